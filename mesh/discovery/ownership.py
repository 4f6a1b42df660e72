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

A process that starts many agents at once (``mesh run`` of 1,000) checks them together:
:func:`check_agent_name` gathers the checks asked for in one pass of the event loop that share a
broker identity (the same :class:`~mesh.broker.BrokerSettings`: one account) and runs step 1
for all their names on one probe connection (the namespace's card filter ``.../agentcards/+``, or
a subscription per name on a broker without wildcards); only a name whose card is there gets a
probe of its own for step 3. The answer per name is the same as its own probe's; what it saves
is a connection, two subscriptions and a round trip per agent. Components with identities of
their own (per-component broker users) are checked one by one, each as its own user.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import uuid
from collections.abc import Collection

from mesh.a2a import request_bytes
from mesh.background import BackgroundTasks
from mesh.broker import BrokerSettings
from mesh.errors import AgentNameTakenError, NoSubscribersError, SubscribeError
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.transport import InboundMessage, MqttTransport, Transport
from topics import get_agent_discovery_topic, get_agent_request_topic, get_agent_response_topic

__all__ = ["DEFAULT_NAME_CHECK_TIMEOUT_S", "check_agent_name", "ensure_agent_name_free"]

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
        if not await _marker_back(probe, private, marker, timeout_s, agent):
            return
        if cards and await _owner_answers(probe, namespace, agent, key, private, answer, timeout_s):
            raise AgentNameTakenError(agent, namespace=namespace, broker_url=probe.url)
        if cards:
            log.info("agent %s: the card on the broker is stale (its owner does not answer); taking the name", agent)
    finally:
        await probe.close()


async def _marker_back(
    probe: Transport, private: str, marker: asyncio.Future[None], timeout_s: float, agents: str
) -> bool:
    """Publish the marker and wait for it: then every retained card subscribed to has arrived."""
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
            agents,
            private,
            timeout_s,
        )
        return False
    return True


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


# ---------------------------------------------------------------------- checks started together


@dataclasses.dataclass(frozen=True, slots=True)
class _BatchKey:
    loop: asyncio.AbstractEventLoop
    broker: BrokerSettings  # one account: its probe may read what each of the names may
    namespace: str
    timeout_s: float


_batches: dict[_BatchKey, dict[str, list[asyncio.Future[None]]]] = {}


async def check_agent_name(
    broker: BrokerSettings, namespace: str, agent: str, *, timeout_s: float = DEFAULT_NAME_CHECK_TIMEOUT_S
) -> None:
    """:func:`ensure_agent_name_free` through a probe to ``broker``, shared with the other checks
    on the same broker identity and namespace asked for in this pass of the event loop."""
    loop = asyncio.get_running_loop()
    key = _BatchKey(loop, broker, namespace, timeout_s)
    batch = _batches.get(key)
    if batch is None:
        batch = _batches[key] = {}
        # After every task of this loop pass has asked: `mesh run` starts its agents in one gather.
        loop.call_soon(_run_batch, key)
    done: asyncio.Future[None] = loop.create_future()
    batch.setdefault(agent, []).append(done)
    await done


def _run_batch(key: _BatchKey) -> None:
    batch = _batches.pop(key)
    _running.spawn(_check_batch(key, batch), name="name check batch")


_running = BackgroundTasks(log, "name checks")  # the batches' tasks, referenced until they end


async def _check_batch(key: _BatchKey, batch: dict[str, list[asyncio.Future[None]]]) -> None:
    async def one(agent: str) -> None:
        await ensure_agent_name_free(MqttTransport(key.broker), key.namespace, agent, timeout_s=key.timeout_s)

    try:
        carded = set(batch) if len(batch) == 1 else await _names_with_cards(key, batch)
        checks = {agent: one(agent) for agent in carded}
        results = dict(zip(checks, await asyncio.gather(*checks.values(), return_exceptions=True), strict=True))
    except Exception as exc:  # the probe could not connect: each check fails as its own would
        for waiters in batch.values():
            for done in waiters:
                if not done.done():
                    done.set_exception(exc)
        return
    except BaseException:  # canceled (the loop is closing): so are the starts waiting on it
        for waiters in batch.values():
            for done in waiters:
                done.cancel()
        raise
    for agent, waiters in batch.items():
        result = results.get(agent)
        for done in waiters:
            if done.done():
                continue
            if isinstance(result, BaseException):
                done.set_exception(result)
            else:
                done.set_result(None)


async def _names_with_cards(key: _BatchKey, names: Collection[str]) -> set[str]:
    """Step 1 for many names on one probe: those whose card the broker holds (none when the marker
    does not come back: the check cannot tell, and the names start anyway, warned about)."""
    namespace = key.namespace
    topics = {get_agent_discovery_topic(namespace, name): name for name in names}
    private = get_agent_response_topic(namespace, next(iter(names)), f"probe-{uuid.uuid4().hex}")
    marker: asyncio.Future[None] = key.loop.create_future()
    carded: set[str] = set()

    def on_card(message: InboundMessage) -> None:
        name = topics.get(message.topic)
        if name is not None and message.payload:
            carded.add(name)

    def on_private(message: InboundMessage) -> None:
        if message.properties.correlation_data == _MARKER and not marker.done():
            marker.set_result(None)

    probe = MqttTransport(key.broker)
    await probe.connect()
    try:
        await probe.subscribe(private, on_private)
        try:  # one subscription for the namespace's cards, where the broker and the rules allow it
            await probe.subscribe(get_agent_discovery_topic(namespace) + "/+", on_card)
        except SubscribeError:
            await asyncio.gather(*(probe.subscribe(topic, on_card) for topic in topics))
        if not await _marker_back(probe, private, marker, key.timeout_s, ", ".join(sorted(names)[:3]) + ", ..."):
            return set()  # unknown: each starts anyway, as its own probe would have let it
    finally:
        await probe.close()
    log.debug("checked %d agent names on one probe; %d have a card", len(topics), len(carded))
    return carded
