"""An agent in the EMQX "A2A over MQTT" profile too: its second connection, one runtime.

With ``emqx: {org, unit}`` configured, an :class:`~agents.service.AgentService` also serves the
profile (:mod:`mesh.profile.emqx`, topics in :mod:`topics.profile`). The profile needs what one MQTT
connection cannot give beside the mesh's own: the client id ``{org}/{unit}/{agent}`` and a will
that republishes the card offline (the mesh's will clears its SAM card). So the profile gets a
connection of its own, and nothing else of its own:

- its request topic (and, for replicas or a ``pool``, the pool's shared topic) is subscribed
  with manual acknowledgements; each request is translated to the mesh's 0.3 request and
  handed to the agent's one dispatcher, so the task store, journal, limits, trust, PUBACK
  after storage and redelivery are those of every request;
- its answers are translated back by :class:`ProfileReplies` (the 1.0 translation the HTTP
  gateway uses) and published on this connection with the Correlation Data echoed and, for
  pool members, ``a2a-responder-agent-id``;
- the card (A2A 1.0, the profile's binding) is retained on ``$a2a/v1/discovery/{org}/{unit}/{agent}``
  with ``a2a-status=online``; the will republishes it with ``a2a-status=offline`` and
  ``a2a-status-source=lwt``, a clean stop with ``a2a-status-source=agent``. It heals like the
  SAM card (:class:`~mesh.discovery.presence.CardHealer`): cleared, replaced or marked offline by another
  connection while the agent runs, it is published again at once (counted in
  ``mesh_cards_healed_total``).

A request that cannot be read as the profile's (no Response Topic, a reply topic outside
``$a2a/v1/reply/...``) has nowhere to be answered safely: it is logged, counted and dropped.

Pools: replicas (``shared_subscription``) are members of the pool ``emqx.pool`` (default: the
agent id), each under the member id of its slot, ``{agent}-{slot}``, whose broker user the rules
bind to that member's client id and topics (without slots: its instance id). The profile has members subscribe
``$share/a2a.{org}.{unit}.{pool}/...``; a broker that does not deliver ``$`` topics to shared
subscriptions (Mosquitto 2.0 does not) is found out at start with a probe: the member subscribes
``$share/<a group of its own>/$a2a/v1/reply/{org}/{unit}/{member}/a2a-pool-probe`` and sends
itself a probe there, which only its own receipt passes (a subscriber elsewhere, such as a
``$a2a/v1/#`` observer, does not), and the members
then subscribe the pool topic each and split its requests by a hash of their Task.id over the
live replicas (:class:`~agents.replicas.Siblings`): one member serves each task, and a retry
of it (same Task.id) finds the same member and its de-duplication. While a joining member's
instance card is on its way to the others (milliseconds), a member that does not know it yet
serves its share too: the split errs toward serving a task twice, never toward dropping it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import uuid
import zlib
from collections.abc import Callable

from agents.answers import Answers, Route
from mesh.a2a import Message, Method, RpcError, Task
from mesh.broker import BrokerSettings
from mesh.brokertools.brokerrules import ProfileScope, profile_member_id, profile_user
from mesh.clientids import slot_count, slot_user
from mesh.config.credentials import password_for
from mesh.discovery.presence import CardHealer
from mesh.errors import ConfigError, NoSubscribersError, TransportError, short_repr
from mesh.profile.emqx import (
    AUTHORIZATION,
    CONTEXT_ID,
    RESPONDER_AGENT_ID,
    STATUS,
    STATUS_SOURCE,
    EmqxProfile,
    ProfileAnswer,
    bearer_token,
    profile_card,
    request_from_profile,
    transport_protocol_error,
)
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.telemetry import ComponentMetrics
from mesh.transport import InboundMessage, MqttTransport, Subscription, Transport, Will, connect_subscribing
from topics import (
    profile_client_id,
    profile_discovery_topic,
    profile_pool_subscription,
    profile_pool_topic,
    profile_probe_topic,
    profile_reply_topic_problem,
    profile_request_topic,
)

__all__ = ["ProfileEndpoint", "ProfileReplies", "card_properties"]

log = logging.getLogger(__name__)

#: How long a pool member waits for its own probe through a shared subscription (the broker
#: forwards it in milliseconds; a broker that does not share ``$`` topics never does).
PROBE_WAIT_S = 2.0


def card_properties(status: str, source: str) -> MessageProperties:
    """The properties of a profile card: JSON, ``a2a-status`` and ``a2a-status-source``."""
    return MessageProperties(
        content_type=JSON_CONTENT_TYPE,
        payload_format_utf8=True,
        extra=[(STATUS, status), (STATUS_SOURCE, source)],
    )


class _ProfileReply:
    """The codec of one profile request's answers (an :class:`~agents.answers.AnswerDialect`)."""

    __slots__ = ("answer", "replies")

    def __init__(self, replies: ProfileReplies, method: Method | None) -> None:
        self.replies = replies
        self.answer = ProfileAnswer(method)

    def publish(self, topic: str, payload: bytes, correlation: bytes | None) -> list[asyncio.Future[None]]:
        return self._send(topic, self.answer.encode(payload), correlation)

    def publish_result(
        self, topic: str, request_id: str | int | None, result: Task | Message, correlation: bytes | None
    ) -> list[asyncio.Future[None]]:
        return self._send(topic, self.answer.encode_result(request_id, result), correlation)

    def _send(self, topic: str, items: list[bytes], correlation: bytes | None) -> list[asyncio.Future[None]]:
        props = self.replies.properties(correlation)
        transport = self.replies.transport
        return [transport.publish_nowait(topic, item, properties=props) for item in items]


class ProfileReplies:
    """Makes the codec of each profile request's answers; they go out on the profile's connection."""

    def __init__(self, transport: Transport, responder_id: str | None) -> None:
        self.transport = transport
        self._extra = [(RESPONDER_AGENT_ID, responder_id)] if responder_id else []

    def for_request(self, method: Method | None) -> _ProfileReply:
        return _ProfileReply(self, method)

    def properties(self, correlation: bytes | None) -> MessageProperties:
        return MessageProperties(
            correlation_data=correlation,
            content_type=JSON_CONTENT_TYPE,
            payload_format_utf8=True,
            extra=list(self._extra),
        )


class ProfileEndpoint:
    """The profile's connection of one agent: subscriptions, card and presence, translation in."""

    def __init__(
        self,
        profile: EmqxProfile,
        *,
        agent_name: str,
        broker: BrokerSettings,
        instance: str | None,
        card: Callable[[], bytes],
        answers: Answers,
        max_unacked_requests: int,
        members: Callable[[], set[str]] | None = None,
        transport: Transport | None = None,
        slot: int | None = None,
    ) -> None:
        """``instance``: the replica's instance id (a pool member); ``slot``: the slot its own
        connection holds (:mod:`mesh.clientids`), whose profile user and member id it takes
        (``{agent}-{slot}``) where the rules give the profile user slots, else its agent id in
        the profile is its instance id; ``card``: the agent's 0.3 card (JSON); ``members``: the
        live replicas' instance ids (the split of a pool's requests where ``$share`` cannot carry
        them); ``transport``: for tests (it must carry the will)."""
        self.profile = profile
        self.agent_name = agent_name
        base_id = profile.agent_id or agent_name
        #: The agent's id in the profile (a replica's: the base of its member ids).
        self.base_id = base_id
        self._broker, member_slot = _profile_broker(broker, agent_name, replica=instance is not None, slot=slot)
        self.agent_id = profile_member_id(base_id, member_slot) if member_slot is not None else instance or base_id
        #: Who this member is among the replicas (their instance ids: the pool's split by Task.id).
        self.member = instance or self.agent_id
        org, unit = profile.org, profile.unit
        pool = profile.pool or (base_id if instance else None)
        self.pool = pool
        self.card_topic = profile_discovery_topic(org, unit, self.agent_id)
        self.request_topic = profile_request_topic(org, unit, self.agent_id)
        self.filters = [self.request_topic]
        self.pool_topic = profile_pool_topic(org, unit, pool) if pool is not None else None
        if pool is not None:
            self.filters.append(profile_pool_subscription(org, unit, pool))
        #: The agent's address in the profile, as its cards claim it (:class:`~mesh.profile.emqx.DialectClaim`):
        #: ``org/unit/agent``; a replica's, the pool's (its agent id is new at every start).
        self.address = f"{org}/{unit}/pool/{pool}" if instance is not None and pool else f"{org}/{unit}/{self.agent_id}"
        self._members = members
        #: Set when the broker cannot share ``$`` topics: the pool's requests are split by Task.id.
        self.split_pool = False
        self.url = f"{broker.url}"
        self._card_0_3 = card
        self._card: bytes | None = None
        self._receive_maximum = max_unacked_requests
        self._owns_transport = transport is None
        self.transport: Transport = transport if transport is not None else self._new_transport()
        self.replies = ProfileReplies(self.transport, self.agent_id if pool is not None else None)
        self.answers = answers
        answers.profile = self.replies
        #: Requests dropped because they had no reply topic of the profile.
        self.dropped = 0
        self._subscriptions: list[Subscription] = []
        self._on_request: Callable[[InboundMessage], None] | None = None
        self._metrics: ComponentMetrics | None = None
        self._stopped = False
        #: Set once the card is on the broker: from then on a card of another connection is healed.
        self._watching = False
        self.healer = CardHealer(self.card_topic, lambda: self._publish_card("online"), on_heal=self._healed)

    def scope(self, *, replica: bool) -> ProfileScope:
        """Where the agent serves the profile, for the broker rules (a replica: its pool's base id)."""
        agent_id = self.base_id if replica else self.agent_id
        return ProfileScope(self.profile.org, self.profile.unit, agent_id, self.pool, replica)

    def _new_transport(self) -> MqttTransport:
        """The profile connection, its will the card as it is now (offline, lwt)."""
        will = Will(self.card_topic, self.card(), qos=1, retain=True, properties=card_properties("offline", "lwt"))
        client_id = profile_client_id(self.profile.org, self.profile.unit, self.agent_id)
        return MqttTransport(self._broker, client_id=client_id, will=will, receive_maximum=self._receive_maximum)

    def card(self) -> bytes:
        """The agent's profile card (A2A 1.0), made once from its 0.3 card (again at start)."""
        if self._card is None:
            self._card = profile_card(_decode_card(self._card_0_3()), self.url)
        return self._card

    def _refresh_card(self) -> None:
        """At start, after the agent's setup (a worker's skills come from its handshake): a card
        that changed since the connection was made gets a new connection, whose will carries it."""
        before, self._card = self._card, None
        if self.card() != before and self._owns_transport:
            self.transport = self.replies.transport = self._new_transport()

    async def start(self, on_request: Callable[[InboundMessage], None], metrics: ComponentMetrics | None) -> None:
        """Subscribe (before the CONNACK: a resumed session redelivers at once), connect, publish the card."""
        self._on_request, self._metrics = on_request, metrics
        self._refresh_card()
        if self.pool_topic is not None and self._members is not None:
            # A replica has no session to resume: connect, find out how the pool can be shared, subscribe.
            await self.transport.connect()
            if not await self._shares_dollar_topics():
                self.split_pool = True
                self.filters[-1] = self.pool_topic
                log.info(
                    "agent %s: the broker does not share $ topics; pool %s is split by Task.id over the replicas",
                    self.agent_name,
                    self.pool,
                )
            self._subscriptions = await self._subscribe()
            await self._publish_card("online")
            self._watching = True
            self.transport.add_connect_listener(self._on_reconnect)
            return
        self._subscriptions = await connect_subscribing(self.transport, self._subscribe)
        await self._publish_card("online")
        self._watching = True
        self.transport.add_connect_listener(self._on_reconnect)
        log.info("agent %s serving the EMQX profile on %s", self.agent_name, ", ".join(self.filters))

    async def _shares_dollar_topics(self) -> bool:
        """Whether the broker delivers a ``$a2a`` topic to a shared subscription: the member sends
        itself a probe through one, on a topic of its own (:func:`~topics.profile_probe_topic`).

        Only its own receipt proves it: a PUBACK "success" says only that *someone* subscribes
        (on Mosquitto, any observer of ``$a2a/v1/#``), not that the shared subscription got it.
        The probe is a small JSON object that says what it is, never an empty message."""
        probe = profile_probe_topic(self.profile.org, self.profile.unit, self.agent_id)
        nonce = uuid.uuid4().hex
        payload = json.dumps({"probe": "does the broker deliver $ topics to a shared subscription", "nonce": nonce})
        received: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def on_probe(message: InboundMessage) -> None:
            if not received.done() and nonce.encode() in message.payload:
                received.set_result(None)

        subscription = await self.transport.subscribe(f"$share/probe.{nonce[:12]}/{probe}", on_probe)
        try:
            await self.transport.publish_nowait(probe, payload.encode(), require_subscriber=True)
            await asyncio.wait_for(received, PROBE_WAIT_S)
        except NoSubscribersError:
            return False  # nobody at all: the shared subscription was not matched
        except TimeoutError:
            return False  # others may have got it; this member did not
        finally:
            await self.transport.unsubscribe(subscription)
        return True

    def _mine(self, key: str) -> bool:
        """Whether this member serves the pool request keyed ``key`` (split mode; see the module doc)."""
        if self._members is None:
            return True
        members = sorted(self._members() | {self.member})
        return members[zlib.crc32(key.encode()) % len(members)] == self.member

    async def _subscribe(self) -> list[Subscription]:
        # Its own card, without its own messages (no_local): what arrives is another's (presence heals).
        await self.transport.subscribe(self.card_topic, self._card_seen, no_local=True)
        return list(
            await asyncio.gather(
                *(self.transport.subscribe(f, self._on_message, manual_ack=True) for f in self.filters)
            )
        )

    async def _publish_card(self, status: str) -> None:
        await self.transport.publish(
            self.card_topic, self.card(), retain=True, properties=card_properties(status, "agent")
        )

    def _card_seen(self, message: InboundMessage) -> None:
        """Another connection's message on our card topic (a clear, a forged card, an offline
        one): our card again at once, as the SAM card heals (:class:`~mesh.discovery.presence.CardHealer`).
        What the broker held before our card (the retained card of our last run, our will after
        a lost connection) arrives before our publish is acknowledged, so it is not healed."""
        if self._stopped or not self._watching:
            return
        if message.payload == self.card() and message.properties.get_extra(STATUS) == "online":
            return  # our card as it is
        self.healer.schedule(cleared=not message.payload)

    def _healed(self) -> None:
        if self._metrics is not None:
            self._metrics.card_healed()

    async def _on_reconnect(self, _session_present: bool) -> None:
        if self._stopped:
            return
        self._watching = False  # our will may be on the broker: our card replaces it
        try:
            await self._publish_card("online")
            self._watching = not self._stopped
        except TransportError as exc:
            log.warning("profile card republish on %s after reconnect failed: %s", self.card_topic, exc)

    async def unsubscribe(self) -> None:
        """Stop taking requests (the first step of the agent's stop)."""
        self._stopped = True
        for subscription in self._subscriptions:
            await self.transport.unsubscribe(subscription)

    async def close(self) -> None:
        """Republish the card offline (``a2a-status-source=agent``) and disconnect (after the answers)."""
        self._stopped = True
        self.healer.stop()
        if self.transport.is_connected:
            try:
                await self._publish_card("offline")
            except TransportError as exc:
                log.warning("could not publish the offline card on %s: %s", self.card_topic, exc)
        await self.transport.close()

    # ------------------------------------------------------------------ requests in

    def _on_message(self, message: InboundMessage) -> None:
        props = message.properties
        reply_to = props.reply_to
        problem = "has none" if reply_to is None else profile_reply_topic_problem(reply_to)
        if reply_to is None or problem is not None:
            self.dropped += 1
            if self._metrics is not None:
                self._metrics.refused("BadReplyTo")
            log.warning(
                "%s: dropped a profile request: its Response Topic %s %s; nothing is answered",
                self.agent_name,
                short_repr(reply_to),
                problem,
            )
            message.ack()
            return
        route = Route(reply_to, props.correlation_data, None, dialect=self.replies.for_request(None))
        pooled = self.split_pool and message.topic == self.pool_topic
        try:
            if props.correlation_data is None:
                raise transport_protocol_error("Missing MQTT v5 Correlation Data: the profile requires it")
            request = request_from_profile(message.payload, context_id=props.get_extra(CONTEXT_ID))
        except RpcError as exc:
            if pooled and not self._mine(reply_to + repr(props.correlation_data)):
                message.ack()  # another member answers it
                return
            log.info("%s: refused a profile request: %s", self.agent_name, exc.error.message)
            if self._metrics is not None:
                self._metrics.refused(type(exc).__name__)
            self.answers.error(route, exc)
            message.ack()
            return
        if pooled and not self._mine(request.task_id or reply_to + repr(props.correlation_data)):
            message.ack()  # another member serves this task
            return
        token = bearer_token(props.get_extra(AUTHORIZATION))
        translated = dataclasses.replace(
            props,
            reply_to=reply_to,
            # Streams' events go to the same Response Topic (the profile has one reply topic).
            status_topic=reply_to if request.method.streaming else None,
            auth_token=token if token is not None else props.auth_token,
            extra=[(k, v) for k, v in props.extra if k != AUTHORIZATION],  # never kept, never echoed
        )
        if self._on_request is not None:  # set by start(), before the subscriptions
            self._on_request(dataclasses.replace(message, payload=request.payload(), properties=translated))


def _profile_broker(
    broker: BrokerSettings, agent_name: str, *, replica: bool, slot: int | None = None
) -> tuple[BrokerSettings, int | None]:
    """The profile connection's settings: its own broker user when the agent has per-component
    credentials (``{name}@a2a``, bound to the profile's client id by the generated rules); and
    for a replica in slot ``slot`` of its own user, that slot of the profile user
    (``{name}@a2a@{slot}``, same password), returned with it, where the rules give it slots
    (``{name}@a2a.slots``; older rules: the profile user itself, and no slot)."""
    if replica:
        broker = dataclasses.replace(broker, session_expiry_s=0)
    if broker.password_file is None or broker.username != agent_name:
        return broker, None  # no per-component credentials, or a shared account named in the URL
    user = profile_user(agent_name)
    try:
        settings = dataclasses.replace(broker, username=user, password=password_for(broker.password_file, user))
    except ConfigError:
        log.warning(
            "agent %s: the password file has no %r (rules made before the agent served the EMQX profile); its "
            "profile connection uses the agent's own user; regenerate the rules with `mesh broker-config`",
            agent_name,
            user,
        )
        return broker, None
    if not replica or slot is None:
        return settings, None
    if slot >= slot_count(settings):
        log.warning(
            "agent %s: its replica holds slot %d but %s has no slots (no %s.slots beside its password in %s); its "
            "profile connection uses %r under its instance id, which only rules of an older version allow: give the "
            "replica %s.slots too, or regenerate the rules with `mesh broker-config`",
            agent_name,
            slot,
            user,
            user,
            broker.password_file,
            user,
            user,
        )
        return settings, None
    return dataclasses.replace(settings, username=slot_user(user, slot)), slot


def _decode_card(card: bytes) -> dict[str, object]:
    value = json.loads(card)
    return value if isinstance(value, dict) else {}
