"""One live instance per agent name (DESIGN, "Discovery and presence").

A second instance of an agent name must not start beside a live one: it would share the
requests, overwrite the card, and clear it (cleanly or by its will) when it leaves. So before an
agent opens its own connection, :func:`ensure_agent_name_free` asks the broker, through a
short-lived probe connection (a random client id, no will), whether the name is taken:

1. The probe subscribes to the agent's card topic and to a private topic of its own, then
   publishes a marker to the private topic. The broker sends a retained card right after the
   SUBACK, on the same connection, so once the marker is back any retained card has arrived:
   no sleep decides that nothing is retained.
2. No card: the name is free.
3. A card: is its owner alive? The probe sends ``tasks/get`` of a random task id to the
   agent's request topic, asking the broker to say whether anyone subscribes. PUBACK "no
   matching subscribers" (0x10): nobody serves the name, the card is stale (e.g. left by a
   broker crash). No answer within the timeout: stale too (a dead instance's persistent session
   still holds its subscription; the request expires with the timeout). Any answer, even a
   JSON-RPC error (``TaskNotFound`` is the usual), means a live instance owns the name:
   :class:`~mesh.errors.AgentNameTakenError`.

Why before the agent's own connection: its client id is derived from the namespace and the
name, and a second CONNECT with a live client id makes the broker drop the live instance; and
while a refused instance has no connection of its own, no will of it can clear the live card.

The private topic lies in the agent's own answer family (``{ns}/a2a/v1/agent/response/{agent}/
probe-...``), which the generated broker rules let the agent's user read and write
(:mod:`mesh.brokertools.brokerrules`); the probe connects as that user.

Replicas (``shared_subscription: true``) serve one name together and skip the check. The check
is no lock: two instances starting in the same instant, or one starting between a live
instance's subscription and its first card, can both find the name free.
"""

from __future__ import annotations

import asyncio
import logging
import math
import uuid

from mesh.a2a import request_bytes
from mesh.errors import AgentNameTakenError, NoSubscribersError
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.transport import InboundMessage, Transport
from topics import get_agent_discovery_topic, get_agent_request_topic, get_agent_response_topic

__all__ = ["DEFAULT_NAME_CHECK_TIMEOUT_S", "ensure_agent_name_free"]

log = logging.getLogger(__name__)

#: How long the check waits for the marker, then for a live owner's answer.
DEFAULT_NAME_CHECK_TIMEOUT_S = 2.0

_MARKER = b"marker"


async def ensure_agent_name_free(
    probe: Transport, namespace: str, agent: str, *, timeout_s: float = DEFAULT_NAME_CHECK_TIMEOUT_S
) -> None:
    """Raise :class:`AgentNameTakenError` if a live instance serves ``agent`` on ``namespace``.

    ``probe`` is an unconnected transport to the agent's broker with a client id of its own and
    no will; it is connected for the check and closed after it.
    """
    key = f"probe-{uuid.uuid4().hex}"
    private = get_agent_response_topic(namespace, agent, key)
    loop = asyncio.get_running_loop()
    marker: asyncio.Future[None] = loop.create_future()
    answer: asyncio.Future[None] = loop.create_future()
    cards: list[InboundMessage] = []

    def on_card(message: InboundMessage) -> None:
        if message.payload:  # an empty message is "gone"
            cards.append(message)

    def on_private(message: InboundMessage) -> None:
        correlation = message.properties.correlation_data
        done = marker if correlation == _MARKER else answer if correlation == key.encode() else None
        if done is not None and not done.done():
            done.set_result(None)

    await probe.connect()
    try:
        await probe.subscribe(private, on_private)
        await probe.subscribe(get_agent_discovery_topic(namespace, agent), on_card)
        await probe.publish(private, _MARKER, properties=MessageProperties(correlation_data=_MARKER))
        try:
            async with asyncio.timeout(timeout_s):
                await marker
        except TimeoutError:
            # The broker did not hand our own message back (an ACL that hides the agent's answer
            # topics from it): we cannot tell, and refusing to start on a guess would be worse.
            log.warning(
                "agent %s: could not check whether another instance serves the name (%s did not come back "
                "within %g s; may this user read it?); starting anyway",
                agent,
                private,
                timeout_s,
            )
            return
        if cards and await _owner_answers(probe, namespace, agent, key, private, answer, timeout_s):
            raise AgentNameTakenError(agent, namespace=namespace, broker_url=probe.url)
        if cards:
            log.info("agent %s: the card on the broker is stale (its owner does not answer); taking the name", agent)
    finally:
        await probe.close()


async def _owner_answers(
    probe: Transport,
    namespace: str,
    agent: str,
    key: str,
    reply_to: str,
    answer: asyncio.Future[None],
    timeout_s: float,
) -> bool:
    """Whether anyone answers ``tasks/get`` on the agent's request topic within ``timeout_s``."""
    props = MessageProperties(
        client_id=probe.client_id,
        reply_to=reply_to,
        correlation_data=key.encode(),
        content_type=JSON_CONTENT_TYPE,
        payload_format_utf8=True,
        # A dead instance's session would otherwise keep the request for its successor.
        message_expiry_s=max(1, math.ceil(timeout_s)),
    )
    ack = probe.publish_nowait(
        get_agent_request_topic(namespace, agent),
        request_bytes("tasks/get", key, {"id": key}),
        properties=props,
        require_subscriber=True,
    )
    try:
        async with asyncio.timeout(timeout_s):
            await ack
            await answer
    except NoSubscribersError:
        return False
    except TimeoutError:
        if not ack.done():
            ack.cancel()
        return False
    return True
