"""An in-process broker and transport: the mesh without MQTT, for agent authors' unit tests.

:class:`MemoryBroker` is a hub living in one event loop; each :class:`MemoryTransport`
connected to it is a :class:`~mesh.transport.base.Transport` like
:class:`~mesh.transport.client.MqttTransport`, so services, clients and registries run on it
unchanged::

    hub = MemoryBroker()
    async with MemoryTransport(hub, client_id="a") as a, MemoryTransport(hub, client_id="b") as b:
        await b.subscribe("acme/#", handler)
        await a.publish("acme/x", b"{}")

What it keeps of MQTT v5: filter matching (:func:`topics.topic_matches`), one copy per
matching filter of a connection, retained messages (an empty retained payload clears the
topic and is still delivered to current subscribers; a new subscription gets the retained
matches, shared ones do not), ``$share/{group}/...`` delivered to one member per group in
turn, ``no_local``, QoS downgraded to the subscription's, properties as the receiver would
read them off the wire, and the will published when a connection is lost
(:meth:`MemoryBroker.drop`) but not on :meth:`MemoryTransport.close`.

Delivery is asynchronous and in publish order: a publish schedules its deliveries on the loop
(``call_soon``) and returns, so handlers never run inside ``publish``. Not emulated: Message
Expiry, session persistence across connections, PUBACK reason codes (but for "no matching
subscribers", which fails a ``publish_nowait(..., require_subscriber=True)`` as on a broker),
packet size and in-flight limits.

The real mesh is always tested against a real broker; this is the double for code that sits on
top of the transport.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from dataclasses import dataclass

from mesh.errors import NoSubscribersError, NotConnectedError
from mesh.properties import MessageProperties
from mesh.transport.base import (
    ConnectListener,
    DisconnectListener,
    InboundMessage,
    MessageHandler,
    Subscription,
    Will,
)
from mesh.transport.callbacks import CallbackRunner
from mesh.transport.capabilities import BrokerCapabilities
from mesh.transport.subscriptions import BrokerSubscription, SubscriptionTable
from topics import split_shared_subscription, topic_matches, validate_publish_topic

__all__ = ["MemoryBroker", "MemoryTransport"]

log = logging.getLogger(__name__)

_names = itertools.count(1)


@dataclass(frozen=True, slots=True)
class _Retained:
    payload: bytes
    qos: int
    properties: MessageProperties | None


class MemoryBroker:
    """An in-process MQTT-like hub for :class:`MemoryTransport` connections (one event loop)."""

    def __init__(self, name: str | None = None) -> None:
        self.name = name or f"hub-{next(_names)}"
        self._clients: dict[str, MemoryTransport] = {}
        self._retained: dict[str, _Retained] = {}
        self._share_turns: dict[tuple[str, str], int] = {}

    @property
    def url(self) -> str:
        return f"memory://{self.name}"

    def retained(self, topic: str) -> bytes | None:
        """The payload retained on ``topic``, or None."""
        stored = self._retained.get(topic)
        return stored.payload if stored is not None else None

    def client(self, client_id: str) -> MemoryTransport | None:
        """The connected transport with this client id, or None."""
        return self._clients.get(client_id)

    async def drop(self, transport: MemoryTransport) -> None:
        """Lose ``transport``'s connection as a crash would: its will is published, it stays down."""
        if self._clients.get(transport.client_id) is not transport:
            raise ValueError(f"client {transport.client_id!r} is not connected to {self.url}")
        self._detach(transport)
        transport._lost("connection lost")
        will = transport.will
        if will is not None:
            self._route(None, will.topic, will.payload, will.qos, will.retain, will.properties)

    # ------------------------------------------------------------------ used by MemoryTransport

    def _attach(self, transport: MemoryTransport) -> None:
        if transport.client_id in self._clients:
            raise ValueError(
                f"client id {transport.client_id!r} is already connected to {self.url}; give each transport its own"
            )
        self._clients[transport.client_id] = transport

    def _detach(self, transport: MemoryTransport) -> None:
        if self._clients.get(transport.client_id) is transport:
            del self._clients[transport.client_id]

    def _route(
        self,
        sender: MemoryTransport | None,
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        properties: MessageProperties | None,
    ) -> bool:
        """Route one message: store or clear it if retained, schedule its deliveries in order.

        False when no subscription matched it.
        """
        if retain:
            if payload:
                # A copy: the sender may reuse its properties object for the next message.
                self._retained[topic] = _Retained(payload, qos, _as_received(properties))
            else:
                self._retained.pop(topic, None)
        shared: dict[tuple[str, str], list[tuple[MemoryTransport, BrokerSubscription]]] = {}
        matched = False
        for client in self._clients.values():
            for entry in client._table.entries():
                if not topic_matches(entry.topic_filter, topic):
                    continue
                matched = True
                group, inner = split_shared_subscription(entry.topic_filter)
                if group is not None:
                    shared.setdefault((group, inner), []).append((client, entry))
                elif not (entry.no_local and client is sender):
                    client._schedule(entry, topic, payload, min(qos, entry.qos), False, properties)
        for key, members in shared.items():
            turn = self._share_turns.get(key, 0)
            self._share_turns[key] = turn + 1
            client, entry = members[turn % len(members)]
            client._schedule(entry, topic, payload, min(qos, entry.qos), False, properties)
        return matched

    def _send_retained(self, client: MemoryTransport, entry: BrokerSubscription) -> None:
        """A new subscription gets the retained messages it matches (a shared one gets none)."""
        if split_shared_subscription(entry.topic_filter)[0] is not None:
            return
        for topic, stored in self._retained.items():
            if topic_matches(entry.topic_filter, topic):
                client._schedule(entry, topic, stored.payload, min(stored.qos, entry.qos), True, stored.properties)


class MemoryTransport:
    """A :class:`~mesh.transport.base.Transport` on a :class:`MemoryBroker` (see the module docstring)."""

    def __init__(
        self,
        broker: MemoryBroker,
        *,
        client_id: str | None = None,
        will: Will | None = None,
    ) -> None:
        self.broker = broker
        self.client_id = client_id or f"memory-{next(_names)}"
        self.will = will
        self._table = SubscriptionTable()
        self._callbacks = CallbackRunner()
        self._connect_listeners: list[ConnectListener] = []
        self._disconnect_listeners: list[DisconnectListener] = []
        self._connected = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        # Flow control: while paused, deliveries wait here in order.
        self._paused_for: set[str] = set()
        self._held: deque[tuple[int, InboundMessage]] = deque()

    async def __aenter__(self) -> MemoryTransport:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def url(self) -> str:
        return self.broker.url

    @property
    def is_connected(self) -> bool:
        return self._connected.is_set()

    @property
    def capabilities(self) -> BrokerCapabilities:
        """The in-memory hub has every feature the mesh uses."""
        return BrokerCapabilities()

    async def connect(self) -> None:
        if self._closed:
            raise NotConnectedError(f"transport {self.client_id!r} to {self.url} was closed; make a new one")
        if self.is_connected:
            return
        self._loop = asyncio.get_running_loop()
        self.broker._attach(self)
        self._connected.set()
        for listener in self._connect_listeners:
            self._callbacks.run(listener, False)

    async def close(self) -> None:
        """Disconnect cleanly: the will is discarded, running handler tasks are canceled."""
        if self._closed:
            return
        self._closed = True
        self.broker._detach(self)
        self._connected.clear()
        await self._callbacks.cancel_all()

    async def wait_connected(self, timeout: float | None = None) -> None:
        if self.is_connected:
            return
        try:
            await asyncio.wait_for(self._connected.wait(), timeout)
        except TimeoutError:
            raise NotConnectedError(f"{self.client_id!r} not connected to {self.url} within {timeout:g} s") from None

    def pause_reading(self, reason: str) -> None:
        self._paused_for.add(reason)

    def resume_reading(self, reason: str) -> None:
        self._paused_for.discard(reason)
        while self._held and not self._paused_for:
            self._deliver(*self._held.popleft())

    def add_connect_listener(self, listener: ConnectListener) -> None:
        self._connect_listeners.append(listener)

    def add_disconnect_listener(self, listener: DisconnectListener) -> None:
        self._disconnect_listeners.append(listener)

    # ------------------------------------------------------------------ publishing

    async def publish(
        self,
        topic: str,
        payload: bytes | str,
        *,
        qos: int = 1,
        retain: bool = False,
        properties: MessageProperties | None = None,
        timeout: float | None = None,
    ) -> None:
        """Hand the message to the hub; returns once its deliveries are scheduled."""
        self._publish(topic, payload, qos, retain, properties)

    def publish_nowait(
        self,
        topic: str,
        payload: bytes | str,
        *,
        retain: bool = False,
        properties: MessageProperties | None = None,
        require_subscriber: bool = False,
    ) -> asyncio.Future[None]:
        """Hand a QoS 1 message to the hub; the returned future is already done."""
        matched = self._publish(topic, payload, 1, retain, properties)
        ack: asyncio.Future[None] = self._require_loop().create_future()
        if require_subscriber and not matched:
            ack.set_exception(NoSubscribersError(topic))
        else:
            ack.set_result(None)
        return ack

    def _publish(
        self, topic: str, payload: bytes | str, qos: int, retain: bool, properties: MessageProperties | None
    ) -> bool:
        validate_publish_topic(topic)
        if qos not in (0, 1, 2):
            raise ValueError(f"qos must be 0, 1 or 2, got {qos!r}")
        if not self.is_connected:
            raise NotConnectedError(f"transport {self.client_id!r} is not connected to {self.url}; call connect()")
        data = payload.encode() if isinstance(payload, str) else bytes(payload)
        return self.broker._route(self, topic, data, qos, retain, properties)

    # ------------------------------------------------------------------ subscribing

    async def subscribe(
        self,
        topic_filter: str,
        handler: MessageHandler,
        *,
        qos: int = 1,
        no_local: bool = False,
        manual_ack: bool = False,
        timeout: float | None = None,
    ) -> Subscription:
        """Subscribe ``handler``; retained matches follow (asynchronously) for a new filter.

        Nothing is redelivered in memory, so ``message.ack()`` does nothing here.
        """
        if self._loop is None:  # subscribing before connect(): delivered once connected
            self._loop = asyncio.get_running_loop()
        entry, created = self._table.add(topic_filter, handler, qos, no_local, self._loop, manual_ack)
        if created:
            entry.acked.set_result(None)
            entry.confirmed = True
            self.broker._send_retained(self, entry)
        return Subscription(topic_filter, handler)

    async def unsubscribe(self, subscription: Subscription) -> None:
        entry = self._table.get(subscription.topic_filter)
        if entry is not None:
            self._table.drop(entry, subscription.handler)

    # ------------------------------------------------------------------ used by MemoryBroker

    def _schedule(
        self,
        entry: BrokerSubscription,
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        properties: MessageProperties | None,
    ) -> None:
        message = InboundMessage(topic, payload, qos, retain, _as_received(properties))
        self._require_loop().call_soon(self._deliver, entry.identifier, message)

    def _deliver(self, identifier: int, message: InboundMessage) -> None:
        if not self.is_connected:
            return  # closed or dropped while the message was on its way
        if self._paused_for:
            self._held.append((identifier, message))
            return
        for handler in self._table.handlers_for(message.topic, (identifier,)):
            self._callbacks.run(handler, message)

    def _lost(self, reason: str) -> None:
        self._closed = True
        self._connected.clear()
        for listener in self._disconnect_listeners:
            self._callbacks.run(listener, reason)

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise NotConnectedError(f"transport {self.client_id!r} is not connected to {self.url}; call connect()")
        return self._loop


def _as_received(properties: MessageProperties | None) -> MessageProperties:
    """A receiver's own copy of ``properties``, as it would read them off the wire."""
    if properties is None:
        return MessageProperties()
    return MessageProperties.from_wire(
        properties.user_properties(),
        response_topic=properties.reply_to,
        correlation_data=properties.correlation_data,
        content_type=properties.content_type,
        payload_format_utf8=properties.payload_format_utf8,
        message_expiry_s=properties.message_expiry_s,
    )
