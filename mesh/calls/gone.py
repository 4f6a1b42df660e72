"""How a call path learns that an agent it waits on is gone (DESIGN, "Delivery guarantees").

An agent is gone when its card is removed: an empty retained message on its card topic,
published by the broker as its will (the connection died) or by the agent as it shuts down.
Every call waiting on it then fails at once with "agent 'x' went away"
(:meth:`~mesh.calls.CallPath.agent_gone`) instead of sitting until its timeout. Two sources
report removals, so that no component needs a second subscription to the discovery tree:

- :func:`follow_registry`: a component with a registry (an agent's delegator, a gateway)
  follows its ``removed`` events;
- :class:`CardWatch`: a component without one (:class:`~mesh.client.MeshClient`) subscribes to
  the card topic of each agent it calls, once per agent and for its connection's life: one
  SUBACK before its first call to that agent, then nothing per call (a subscription for the
  duration of each call would cost two round trips per call), and none of the other agents'
  cards to parse, as a whole registry would.

The other signal, PUBACK 0x10 for a request nobody subscribes to, needs no watcher: the call
path asks the transport for it on every request.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from mesh.discovery.registry import InstanceListener, Listener, RegistryEvent
from mesh.errors import MeshError
from mesh.transport import InboundMessage, Subscription
from topics import get_agent_discovery_topic, parse_instance_card_topic

if TYPE_CHECKING:
    from mesh.calls.path import CallPath

__all__ = ["CardWatch", "follow_registry"]

log = logging.getLogger(__name__)


class _Events(Protocol):
    def add_listener(self, listener: Listener) -> None: ...

    def add_instance_listener(self, listener: InstanceListener) -> None: ...


def follow_registry(calls: CallPath, registry: _Events) -> None:
    """Fail ``calls``' calls to an agent as soon as ``registry`` reports its card removed."""

    def on_change(event: RegistryEvent) -> None:
        if event.kind != "agent":
            return
        if event.type != "removed":
            calls.agent_back(event.name)
        else:
            # "expired": a card that stopped coming (SAM heartbeats; a frozen agent before its will)
            why = None if event.reason == "gone" else f"its card {event.reason} (not refreshed in time)"
            calls.agent_gone(event.name, why)

    def on_instance(agent: str, instance: str, present: bool) -> None:
        if present:
            calls.instance_back(agent, instance)
        else:
            calls.instance_gone(agent, instance)

    registry.add_listener(on_change)
    registry.add_instance_listener(on_instance)


class CardWatch:
    """Watches the card topic of every agent ``calls`` sends to (see the module doc)."""

    def __init__(self, calls: CallPath) -> None:
        self.calls = calls
        self._watching: dict[str, asyncio.Future[Subscription]] = {}

    async def watch(self, agent: str) -> None:
        """Follow ``agent``'s card from now on; the first call per agent waits for the SUBACK.

        A watch the broker refuses (or that cannot be set up now) is logged and skipped: the
        call goes ahead, and would learn of the agent's crash only at its timeout.
        """
        watching = self._watching.get(agent)
        if watching is None:
            topic = get_agent_discovery_topic(self.calls.namespace, agent)  # validates the name
            handler = functools.partial(self._on_card, agent)
            watching = asyncio.ensure_future(self._subscribe(topic, handler))
            self._watching[agent] = watching
        if watching.done() and not watching.cancelled() and watching.exception() is None:
            return
        try:
            await asyncio.shield(watching)
        except MeshError as exc:
            if self._watching.get(agent) is watching:
                del self._watching[agent]  # the next call tries again
            log.warning("%s: cannot watch the card of agent %s: %s", self.calls.owner, agent, exc)

    async def _subscribe(self, topic: str, handler: Callable[[InboundMessage], None]) -> Subscription:
        # The agent's card and its replicas' cards (.../agentcards/{agent}/{instance}).
        transport = self.calls.transport
        replicas = transport.subscribe(f"{topic}/+", self._on_instance_card)
        subscription, _ = await asyncio.gather(transport.subscribe(topic, handler), replicas)
        return subscription

    def _on_instance_card(self, message: InboundMessage) -> None:
        found = parse_instance_card_topic(self.calls.namespace, message.topic)
        if found is None:
            return
        if message.payload:
            self.calls.instance_back(*found)
        else:
            self.calls.instance_gone(*found)

    def _on_card(self, agent: str, message: InboundMessage) -> None:
        if not message.payload:  # the retained card was cleared: will or shutdown
            self.calls.agent_gone(agent)
        else:
            self.calls.agent_back(agent)
