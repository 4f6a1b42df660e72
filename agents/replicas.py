"""Replicas of one agent that own their tasks (DESIGN, "Topics" and "Discovery and presence").

Replicas (``shared_subscription: true``) serve one name together. Each has an instance id
(``{agent}-{8 hex}``, also the last level of its client id, except where the broker's rules give
the agent's user slots, under ``mesh up``: then each running replica is a slot user of its own,
``{agent}@{k}``, bound to the slot's client id; see :mod:`mesh.clientids`) and:

- takes new requests from the shared topic (``$share/{agent}/{ns}/a2a/v1/agent/request/{agent}``)
  and the follow-ups of the tasks it owns from its instance topic (``.../request/{agent}/{instance}``);
- stamps ``a2aInstance`` on its answers, so the call path sends a task's follow-ups
  (``tasks/get``, ``tasks/cancel``, ``tasks/resubscribe``, an input-required continuation, push
  config) to the replica that knows the task (:class:`mesh.calls.CallPath`);
- publishes, besides the shared card, its instance card ``.../agentcards/{agent}/{instance}``,
  which its will clears: a caller waiting on that replica fails within the will's delivery,
  while the shared card stays for the others. The shared card is cleared by the last replica
  to stop cleanly: one that sees no other instance card (:class:`Siblings`). Two replicas that
  stop in the same instant may both see the other and leave the shared card; registries drop an
  agent whose last instance card went away, whatever its shared card says.

A replica keeps no session after its connection (a new instance id at every start has no
use for one): a dead replica's subscriptions end with it, so the broker stops handing it
shared requests and answers a follow-up to it with "no matching subscribers" at once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from mesh.transport import InboundMessage, Subscription, Transport
from topics import (
    get_agent_discovery_topic,
    get_agent_instance_discovery_topic,
    get_agent_instance_request_topic,
    parse_instance_card_topic,
)

__all__ = ["Siblings", "new_instance_id"]


def new_instance_id(agent: str) -> str:
    """A fresh instance id for a replica of ``agent``: ``{agent}-{8 hex}``."""
    return f"{agent}-{uuid.uuid4().hex[:8]}"


class Siblings:
    """One replica's topics, and the other live replicas of its agent, from their instance cards."""

    def __init__(self, transport: Transport, namespace: str, agent: str, instance: str) -> None:
        self.transport = transport
        self.namespace = namespace
        self.agent = agent
        self.instance = instance
        self.request_topic = get_agent_instance_request_topic(namespace, agent, instance)
        self.card_topic = get_agent_instance_discovery_topic(namespace, agent, instance)
        self._live: set[str] = set()
        self._subscription: Subscription | None = None
        #: Called with the instance id of another replica whose card went empty (its will).
        self.on_gone: Callable[[str], None] | None = None

    async def start(self) -> None:
        """Follow the instance cards of the agent (retained: the live ones arrive at once)."""
        topic = f"{get_agent_discovery_topic(self.namespace, self.agent)}/+"
        self._subscription = await self.transport.subscribe(topic, self._on_card)

    async def stop(self) -> None:
        if self._subscription is not None and self.transport.is_connected:
            await self.transport.unsubscribe(self._subscription)
        self._subscription = None

    def others(self) -> set[str]:
        """The other replicas whose card is on the broker now."""
        return self._live - {self.instance}

    def _on_card(self, message: InboundMessage) -> None:
        found = parse_instance_card_topic(self.namespace, message.topic)
        if found is None:
            return
        if message.payload:
            self._live.add(found[1])
        else:
            self._live.discard(found[1])
            if self.on_gone is not None and found[1] != self.instance:
                self.on_gone(found[1])
