"""MQTT v5 transport: paho-mqtt driven by the asyncio event loop.

paho's socket is registered with the running loop (``add_reader`` / ``add_writer``) and
read, written and kept alive from it, as aiomqtt does, instead of running paho's network thread:
every callback runs on the loop thread, so there are no cross-thread hand-offs on the message path
and no locks of ours around paho.

What it adds on top of paho (DESIGN, "Transport rules"):

- connect from :class:`~mesh.broker.BrokerSettings`, TCP_NODELAY on the socket, the broker's
  CONNACK limits honoured (Receive Maximum, Maximum Packet Size);
- reconnect with exponential backoff; subscriptions are sent again on every new session;
- ``publish`` awaits the PUBACK and raises the broker's reason as an exception; QoS 1
  publishes in flight are bounded by the broker's Receive Maximum (callers wait for room),
  a window kept here because paho can neither resize its own nor scan it cheaply;
- ``subscribe(filter, handler)`` dispatches by MQTT v5 Subscription Identifier, so
  overlapping filters each get exactly their own copy; a handler that raises is logged and
  delivery goes on; async handlers run as tasks, off the network path;
- ``request`` publishes with Response Topic + Correlation Data and awaits the matching reply.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import socket
import ssl
import threading
import uuid
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

from mesh.broker import BrokerSettings
from mesh.errors import (
    ConnectError,
    NotAuthorizedError,
    NotConnectedError,
    PacketTooLargeError,
    PublishError,
    PublishTimeoutError,
    QuotaExceededError,
    RequestTimeoutError,
    SubscribeError,
    TransportError,
)
from mesh.properties import MessageProperties
from mesh.transport.base import (
    ConnectListener,
    DisconnectListener,
    InboundMessage,
    MessageHandler,
    Subscription,
    Will,
)
from mesh.transport.codec import from_paho, to_paho
from mesh.transport.driver import SocketDriver
from mesh.transport.subscriptions import BrokerSubscription, SubscriptionTable
from mesh.transport.window import InflightWindow
from topics import validate_filter, validate_publish_topic

log = logging.getLogger(__name__)

# MQTT's own ceiling on a packet (256 MiB); brokers usually advertise less in CONNACK.
_MQTT_MAX_PACKET = 268_435_455
# Bytes a PUBLISH needs beyond payload, topic and user properties (header, lengths, ids).
_PUBLISH_OVERHEAD = 64
# Below the broker's limit by this much, a message is not measured property by property.
_SIZE_CHECK_MARGIN = 64 * 1024


class MqttTransport:
    """One MQTT v5 connection, used from asyncio.

    Use it as an async context manager, or call :meth:`connect` and :meth:`close`::

        async with MqttTransport(BrokerSettings.from_url(url), client_id="agent-a1") as t:
            await t.subscribe("acme/a2a/v1/agent/request/a1", handle)
            await t.publish("acme/...", b"{}", properties=MessageProperties(reply_to=...))
    """

    def __init__(
        self,
        settings: BrokerSettings,
        *,
        client_id: str | None = None,
        will: Will | None = None,
        reply_topic: str | None = None,
        max_inflight: int = 1000,
        publish_timeout_s: float = 30.0,
        use_subscription_ids: bool = True,
    ) -> None:
        self.settings = settings
        self.client_id = client_id or f"mesh-{uuid.uuid4().hex[:12]}"
        self.reply_topic = reply_topic
        self.publish_timeout_s = publish_timeout_s
        self._use_subscription_ids = use_subscription_ids
        self._client = self._make_client(will)

        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None
        self._driver: SocketDriver | None = None

        self._connected = asyncio.Event()
        self._connack: asyncio.Future[None] | None = None
        self._disconnected: asyncio.Future[None] | None = None
        self._started = False
        self._closing = False
        self._reconnect_task: asyncio.Task[None] | None = None
        self._connect_listeners: list[ConnectListener] = []
        self._disconnect_listeners: list[DisconnectListener] = []

        self._subscriptions = SubscriptionTable()
        self._pending_acks: dict[int, tuple[asyncio.Future[None], str]] = {}
        self.max_inflight = max_inflight
        self._window = InflightWindow(min(max_inflight, 20))
        self._replies: dict[bytes, asyncio.Future[InboundMessage]] = {}
        self._reply_subscription: asyncio.Task[Subscription] | None = None
        self._handler_tasks: set[asyncio.Task[None]] = set()

        # Limits announced by the broker in CONNACK.
        self.max_packet_size = _MQTT_MAX_PACKET
        self.subscription_ids_available = use_subscription_ids

    # ------------------------------------------------------------------ lifecycle

    async def __aenter__(self) -> MqttTransport:
        await self.connect()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @property
    def url(self) -> str:
        return self.settings.url

    @property
    def is_connected(self) -> bool:
        return self._connected.is_set()

    async def connect(self) -> None:
        """Connect once; raise :class:`ConnectError` naming the broker and the reason.

        After this first success the transport reconnects by itself whenever the
        connection drops, until :meth:`close`.
        """
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._driver = SocketDriver(self._client, self._loop)
        self._closing = False
        try:
            await self._open_connection(first=True)
        except ConnectError:
            raise
        except (OSError, ssl.SSLError) as exc:
            raise ConnectError(
                f"cannot connect to the MQTT broker at {self.settings.url}: {exc}. "
                "Is it running? Start one with `mesh up`, or set --broker / MESH_BROKER_URL."
            ) from exc
        self._started = True

    async def close(self) -> None:
        """Disconnect cleanly (the broker discards our will) and fail what is still pending."""
        if self._closing:
            return
        self._closing = True
        if self._reconnect_task is not None:
            self._reconnect_task.cancel()
        if self._client.is_connected():
            self._disconnected = asyncio.get_running_loop().create_future()
            self._client.disconnect()
            self._sync_writer()
            try:
                await asyncio.wait_for(self._disconnected, timeout=2.0)
            except TimeoutError:
                log.warning("broker %s did not close the connection in time", self.settings.url)
        self._forget_socket()
        self._connected.clear()
        error = NotConnectedError(f"transport to {self.settings.url} was closed")
        self._window.close(error)
        pending = [ack for ack, _topic in self._pending_acks.values()] + list(self._replies.values())
        for fut in pending:
            if not fut.done():
                fut.set_exception(error)
                fut.exception()  # nobody may be waiting; do not warn about it
        self._pending_acks.clear()
        self._replies.clear()
        for task in list(self._handler_tasks):
            task.cancel()
        if self._handler_tasks:
            await asyncio.gather(*self._handler_tasks, return_exceptions=True)

    def add_connect_listener(self, listener: ConnectListener) -> None:
        """Call ``listener(session_present)`` after every successful (re)connection."""
        self._connect_listeners.append(listener)

    def add_disconnect_listener(self, listener: DisconnectListener) -> None:
        """Call ``listener(reason)`` whenever an established connection is lost."""
        self._disconnect_listeners.append(listener)

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Wait until the connection is up; raise :class:`NotConnectedError` after ``timeout``."""
        if self._connected.is_set():
            return
        try:
            await asyncio.wait_for(self._connected.wait(), timeout)
        except TimeoutError:
            raise NotConnectedError(
                f"no connection to the MQTT broker at {self.settings.url} within {timeout:g} s"
            ) from None

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
        """Publish and, for QoS 1, wait for the broker's PUBACK.

        Waits while the in-flight window is full, and while the connection is down, up to
        ``timeout`` (default ``publish_timeout_s``). A QoS 1 message handed over while the
        connection is down is sent after the reconnect. Raises :class:`PublishError`
        subclasses carrying the broker's reason.
        """
        timeout = self.publish_timeout_s if timeout is None else timeout
        data = payload.encode() if isinstance(payload, str) else payload
        validate_publish_topic(topic)
        self._check_size(topic, data, properties)
        try:
            async with asyncio.timeout(timeout):
                if qos == 0:
                    await self._connected.wait()
                    self._cork()
                    self._client.publish(topic, data, qos=0, retain=retain, properties=to_paho(properties))
                    self._sync_writer()
                    return
                await self._window.acquire()
                await self._send_qos1(topic, data, retain, properties)
        except TimeoutError:
            state = "connected" if self.is_connected else "not connected"
            raise PublishTimeoutError(
                f"no PUBACK for the message to {topic!r} within {timeout:g} s ({state} to {self.settings.url})"
            ) from None

    def publish_nowait(
        self,
        topic: str,
        payload: bytes | str,
        *,
        retain: bool = False,
        properties: MessageProperties | None = None,
    ) -> asyncio.Future[None]:
        """Queue a QoS 1 publish without waiting; the returned future resolves on its PUBACK.

        Messages are handed to the broker in call order, behind any publish still waiting
        for room in the in-flight window, so a stream of events keeps its order while its
        publishes overlap. A failure lands in the future (logged if nobody reads it).
        """
        data = payload.encode() if isinstance(payload, str) else payload
        validate_publish_topic(topic)
        self._check_size(topic, data, properties)
        if self._window.try_acquire():
            ack = self._send_qos1(topic, data, retain, properties)
        else:
            ack = asyncio.ensure_future(self._publish_when_room(topic, data, retain, properties))
        ack.add_done_callback(_log_unread_failure)
        return ack

    async def _publish_when_room(
        self, topic: str, data: bytes, retain: bool, properties: MessageProperties | None
    ) -> None:
        await self._window.acquire()
        await self._send_qos1(topic, data, retain, properties)

    def _send_qos1(
        self, topic: str, data: bytes, retain: bool, properties: MessageProperties | None
    ) -> asyncio.Future[None]:
        """Hand a QoS 1 message to paho; the caller holds a window slot, released on PUBACK."""
        self._cork()
        try:
            info = self._client.publish(topic, data, qos=1, retain=retain, properties=to_paho(properties))
        except BaseException:
            self._window.release()
            raise
        self._sync_writer()
        ack: asyncio.Future[None] = self._require_loop().create_future()
        self._pending_acks[info.mid] = (ack, topic)
        return ack

    def _check_size(self, topic: str, payload: bytes, properties: MessageProperties | None) -> None:
        size = len(payload) + len(topic) + _PUBLISH_OVERHEAD
        if size + _SIZE_CHECK_MARGIN < self.max_packet_size:
            return
        size += len(topic.encode()) - len(topic)
        if properties is not None:
            size += sum(len(k.encode()) + len(v.encode()) + 4 for k, v in properties.user_properties())
            size += 2 * len((properties.reply_to or "").encode()) + len(properties.correlation_data or b"")
        if size > self.max_packet_size:
            raise PacketTooLargeError(
                f"message to {topic!r} is about {size} bytes but the broker accepts at most "
                f"{self.max_packet_size} (its Maximum Packet Size); send large content by URI, "
                "or raise max_packet_size in mosquitto.conf",
                topic=topic,
                reason="Packet too large",
                reason_code=0x95,
            )

    # ------------------------------------------------------------------ subscribing

    async def subscribe(
        self,
        topic_filter: str,
        handler: MessageHandler,
        *,
        qos: int = 1,
        no_local: bool = False,
        timeout: float | None = None,
    ) -> Subscription:
        """Subscribe and wait for the SUBACK; ``handler`` gets every matching message.

        The handler may be a plain function (called on the loop, keep it short) or a
        coroutine function (run as a task). Exceptions are logged, never propagated.
        The subscription survives reconnects until :meth:`unsubscribe`.
        """
        validate_filter(topic_filter)
        if no_local and topic_filter.startswith("$share/"):
            raise ValueError(f"no_local is a protocol error on a shared subscription ({topic_filter!r})")
        entry, created = self._subscriptions.add(topic_filter, handler, qos, no_local, self._require_loop())
        if created and self._connected.is_set():
            self._send_subscribe(entry)
        subscription = Subscription(topic_filter, handler)
        try:
            await asyncio.wait_for(asyncio.shield(entry.acked), timeout or self.publish_timeout_s)
        except TimeoutError:
            self._drop_handler(entry, handler)
            raise SubscribeError(
                f"no SUBACK for {topic_filter!r} from {self.settings.url}", topic_filter=topic_filter, reason="timeout"
            ) from None
        except SubscribeError:
            self._drop_handler(entry, handler)
            raise
        return subscription

    async def unsubscribe(self, subscription: Subscription) -> None:
        """Stop delivering to ``subscription``; the last handler of a filter unsubscribes it."""
        entry = self._subscriptions.get(subscription.topic_filter)
        if entry is not None:
            self._drop_handler(entry, subscription.handler)

    def _drop_handler(self, entry: BrokerSubscription, handler: MessageHandler) -> None:
        if self._subscriptions.drop(entry, handler) and self._connected.is_set():
            self._client.unsubscribe(entry.topic_filter)
            self._sync_writer()

    def _send_subscribe(self, entry: BrokerSubscription) -> None:
        props: Properties | None = None
        if self.subscription_ids_available:
            props = Properties(PacketTypes.SUBSCRIBE)
            props.SubscriptionIdentifier = entry.identifier
        options = SubscribeOptions(qos=entry.qos, noLocal=entry.no_local)
        _rc, mid = self._client.subscribe(entry.topic_filter, options=options, properties=props)
        if mid is not None:
            self._subscriptions.sent(mid, entry)
        self._sync_writer()

    # ------------------------------------------------------------------ request / reply

    async def request(
        self,
        topic: str,
        payload: bytes | str,
        *,
        timeout: float,
        properties: MessageProperties | None = None,
        correlation_id: str | None = None,
    ) -> InboundMessage:
        """Publish a request and return the reply carrying the same Correlation Data.

        Replies come to ``reply_topic`` (given at construction), subscribed on first use.
        Raises :class:`RequestTimeoutError` when no reply arrives in ``timeout`` seconds,
        or the broker's refusal of the request as a :class:`PublishError`.
        """
        correlation = (correlation_id or uuid.uuid4().hex).encode()
        reply = await self.open_request(
            topic, payload, properties=properties, correlation=correlation, expiry_s=timeout
        )
        try:
            return await asyncio.wait_for(reply, timeout)
        except TimeoutError:
            raise RequestTimeoutError(
                f"no reply to request {correlation.decode()!r} sent to {topic!r} within {timeout:g} s"
            ) from None
        finally:
            self.close_request(correlation)

    async def open_request(
        self,
        topic: str,
        payload: bytes | str,
        *,
        correlation: bytes,
        properties: MessageProperties | None = None,
        expiry_s: float | None = None,
    ) -> asyncio.Future[InboundMessage]:
        """Send a request and return the future of its reply, for callers that wait their own way.

        The future also fails with the broker's refusal of the request. Always call
        :meth:`close_request` when done with it.
        """
        if self.reply_topic is None:
            raise TransportError("request() needs a reply_topic; pass reply_topic= to MqttTransport")
        await self._ensure_reply_subscription()
        if correlation in self._replies:
            raise ValueError(f"a request with correlation id {correlation!r} is already waiting")
        props = dataclasses.replace(properties) if properties is not None else MessageProperties()
        props.reply_to = self.reply_topic
        props.correlation_data = correlation
        if props.message_expiry_s is None and expiry_s is not None:
            props.message_expiry_s = max(1, int(expiry_s + 0.999))
        reply: asyncio.Future[InboundMessage] = self._require_loop().create_future()
        self._replies[correlation] = reply
        try:
            ack = self.publish_nowait(topic, payload, properties=props)
        except BaseException:
            self._replies.pop(correlation, None)
            raise
        ack.add_done_callback(lambda done: _fail_with(reply, done))
        return reply

    def close_request(self, correlation: bytes) -> None:
        """Forget a request: a reply arriving later is ignored."""
        self._replies.pop(correlation, None)

    async def _ensure_reply_subscription(self) -> None:
        if self._reply_subscription is None:
            assert self.reply_topic is not None
            self._reply_subscription = asyncio.ensure_future(self.subscribe(self.reply_topic, self._on_reply))
        try:
            await asyncio.shield(self._reply_subscription)
        except Exception:
            self._reply_subscription = None
            raise

    def _on_reply(self, message: InboundMessage) -> None:
        correlation = message.properties.correlation_data
        future = self._replies.get(correlation) if correlation is not None else None
        if future is None:
            log.debug("reply on %s matches no waiting request (late or foreign)", message.topic)
        elif not future.done():
            future.set_result(message)

    # ------------------------------------------------------------------ connection

    def _make_client(self, will: Will | None) -> paho.Client:
        client = paho.Client(
            paho.CallbackAPIVersion.VERSION2,
            client_id=self.client_id,
            protocol=paho.MQTTv5,
            reconnect_on_failure=False,
        )
        # A raising callback would otherwise abort paho's packet handling.
        client.suppress_exceptions = True
        client.connect_timeout = self.settings.connect_timeout_s
        client.max_inflight_messages = 0  # unlimited in paho: InflightWindow is the bound
        if self.settings.username is not None:
            client.username_pw_set(self.settings.username, self.settings.password)
        tls = self.settings.tls
        if tls is not None:
            client.tls_set(ca_certs=tls.ca_file, certfile=tls.cert_file, keyfile=tls.key_file)
            client.tls_insecure_set(tls.insecure)
        if will is not None:
            client.will_set(
                will.topic,
                will.payload,
                qos=will.qos,
                retain=will.retain,
                properties=to_paho(will.properties, PacketTypes.WILLMESSAGE),
            )
        client.on_connect = self._on_connect
        client.on_message = self._on_message
        client.on_publish = self._on_publish
        client.on_subscribe = self._on_subscribe
        client.on_disconnect = self._threadsafe(self._on_disconnect)
        client.on_socket_open = self._on_socket_open
        client.on_socket_close = self._threadsafe(self._on_socket_close)
        return client

    async def _open_connection(self, *, first: bool) -> None:
        loop = self._require_loop()
        self._connack = loop.create_future()
        connect_props = Properties(PacketTypes.CONNECT)
        if self.settings.session_expiry_s:
            connect_props.SessionExpiryInterval = self.settings.session_expiry_s
        if first:
            call = lambda: self._client.connect(  # noqa: E731
                self.settings.host,
                self.settings.port,
                keepalive=self.settings.keepalive_s,
                clean_start=self.settings.session_expiry_s == 0,
                properties=connect_props,
            )
        else:
            call = self._client.reconnect
        await loop.run_in_executor(None, call)
        try:
            await asyncio.wait_for(self._connack, self.settings.connect_timeout_s)
        except TimeoutError:
            self._forget_socket()
            raise ConnectError(
                f"no CONNACK from {self.settings.url} within {self.settings.connect_timeout_s:g} s"
            ) from None

    def _on_socket_open(self, _client: paho.Client, _userdata: Any, sock: Any) -> None:
        # Runs in the executor thread that connects; the loop takes over the socket.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._require_loop().call_soon_threadsafe(self._register_socket, sock)

    def _register_socket(self, sock: Any) -> None:
        if self._client.socket() is not sock:
            return  # closed again before the loop got to it
        if self._closing:
            self._client.disconnect()  # a reconnect finished after close(): undo it
            return
        self._require_driver().attach(sock)

    def _on_socket_close(self, _client: paho.Client, _userdata: Any, sock: Any) -> None:
        if self._driver is not None and sock is self._driver.sock:
            self._driver.detach()

    def _forget_socket(self) -> None:
        if self._driver is not None:
            self._driver.detach()

    def _sync_writer(self) -> None:
        if self._driver is not None:
            self._driver.sync_writer()

    def _cork(self) -> None:
        if self._driver is not None:
            self._driver.cork()

    def _on_connect(
        self, _client: paho.Client, _userdata: Any, flags: Any, reason: ReasonCode, props: Properties | None
    ) -> None:
        connack = self._connack
        if reason.is_failure:
            error = ConnectError(f"the MQTT broker at {self.settings.url} refused the connection: {reason}")
            if connack is not None and not connack.done():
                connack.set_exception(error)
            return
        self._read_broker_limits(props)
        session_present = bool(getattr(flags, "session_present", False))
        for entry in self._subscriptions.to_resubscribe(session_present):
            self._send_subscribe(entry)
        self._connected.set()
        if connack is not None and not connack.done():
            connack.set_result(None)
        for listener in self._connect_listeners:
            self._run_callback(listener, session_present)

    def _read_broker_limits(self, props: Properties | None) -> None:
        self._window.resize(min(self.max_inflight, getattr(props, "ReceiveMaximum", 65535)))
        self.max_packet_size = getattr(props, "MaximumPacketSize", _MQTT_MAX_PACKET)
        self.subscription_ids_available = self._use_subscription_ids and bool(
            getattr(props, "SubscriptionIdentifierAvailable", 1)
        )

    def _on_disconnect(
        self, _client: paho.Client, _userdata: Any, _flags: Any, reason: ReasonCode, _props: Properties | None
    ) -> None:
        was_connected = self._connected.is_set()
        self._connected.clear()
        self._forget_socket()
        if self._disconnected is not None and not self._disconnected.done():
            self._disconnected.set_result(None)
        if self._closing or not self._started:
            return
        if was_connected:
            log.warning("connection to %s lost (%s); reconnecting", self.settings.url, reason)
            for listener in self._disconnect_listeners:
                self._run_callback(listener, str(reason))
        if self._reconnect_task is None or self._reconnect_task.done():
            self._reconnect_task = self._require_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        delay = self.settings.reconnect_min_delay_s
        attempts = 0
        while not self._closing and not self._connected.is_set():
            await asyncio.sleep(delay)
            attempts += 1
            try:
                await self._open_connection(first=False)
            except (OSError, ssl.SSLError, TransportError) as exc:
                log.log(
                    logging.WARNING if attempts in (1, 10) or attempts % 60 == 0 else logging.DEBUG,
                    "reconnect to %s failed (attempt %d): %s",
                    self.settings.url,
                    attempts,
                    exc,
                )
                delay = min(delay * 2, self.settings.reconnect_max_delay_s)
            else:
                log.info("reconnected to %s after %d attempt(s)", self.settings.url, attempts)

    # ------------------------------------------------------------------ inbound

    def _on_message(self, _client: paho.Client, _userdata: Any, msg: paho.MQTTMessage) -> None:
        props = msg.properties
        message = InboundMessage(
            topic=msg.topic,
            payload=msg.payload,
            qos=msg.qos,
            retain=bool(msg.retain),
            properties=from_paho(props),
        )
        sub_ids = getattr(props, "SubscriptionIdentifier", None) if self.subscription_ids_available else None
        for handler in self._subscriptions.handlers_for(message.topic, sub_ids):
            self._run_callback(handler, message)

    def _run_callback(self, callback: Callable[..., Any], *args: Any) -> None:
        """Call a handler or listener; a coroutine result runs as a task. Never raises."""
        try:
            result = callback(*args)
        except Exception:
            log.exception("handler %r failed", callback)
            return
        if asyncio.iscoroutine(result):
            task = self._require_loop().create_task(result)
            self._handler_tasks.add(task)
            task.add_done_callback(self._handler_done)

    def _handler_done(self, task: asyncio.Task[None]) -> None:
        self._handler_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("message handler task failed", exc_info=task.exception())

    def _on_publish(
        self, _client: paho.Client, _userdata: Any, mid: int, reason: ReasonCode, _props: Properties | None
    ) -> None:
        pending = self._pending_acks.pop(mid, None)
        if pending is None:
            return
        self._window.release()
        ack, topic = pending
        if ack.done():
            return
        if reason.is_failure:
            ack.set_exception(_publish_error(reason, topic))
        else:
            ack.set_result(None)

    def _on_subscribe(
        self, _client: paho.Client, _userdata: Any, mid: int, reasons: list[ReasonCode], _props: Properties | None
    ) -> None:
        entry = self._subscriptions.suback(mid)
        if entry is None:
            return
        failed = [r for r in reasons if r.is_failure]
        if not failed:
            entry.confirmed = True
            if not entry.acked.done():
                entry.acked.set_result(None)
            return
        error = SubscribeError(
            f"the broker at {self.settings.url} refused the subscription {entry.topic_filter!r}: {failed[0]}",
            topic_filter=entry.topic_filter,
            reason=str(failed[0]),
        )
        if not entry.acked.done():
            entry.acked.set_exception(error)
            entry.acked.exception()  # waiters each re-raise it; none may be left to read it
        else:
            log.error("%s (after a reconnect)", error)

    # ------------------------------------------------------------------ helpers

    def _require_driver(self) -> SocketDriver:
        if self._driver is None:
            raise NotConnectedError("the transport is not connected; call connect() first")
        return self._driver

    def _require_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            raise NotConnectedError("the transport is not connected; call connect() first")
        return self._loop

    def _threadsafe(self, callback: Callable[..., None]) -> Callable[..., None]:
        """Run a paho callback on the loop even when paho calls it from the connect thread."""

        def wrapper(*args: Any) -> None:
            if self._loop is None or threading.get_ident() == self._loop_thread:
                callback(*args)
            else:
                self._loop.call_soon_threadsafe(callback, *args)

        return wrapper


def _log_unread_failure(ack: asyncio.Future[None]) -> None:
    # Fire-and-forget publishes: report the broker's refusal instead of losing it.
    if not ack.cancelled() and ack.exception() is not None:
        log.warning("queued publish failed: %s", ack.exception())


def _fail_with(reply: asyncio.Future[InboundMessage], ack: asyncio.Future[None]) -> None:
    if not reply.done() and not ack.cancelled() and ack.exception() is not None:
        reply.set_exception(ack.exception())  # type: ignore[arg-type]


def _publish_error(reason: ReasonCode, topic: str) -> PublishError:
    code = reason.value
    error_type = {0x87: NotAuthorizedError, 0x95: PacketTooLargeError, 0x97: QuotaExceededError}.get(code, PublishError)
    hint = {0x87: "; check the broker's ACL for this client and topic"}.get(code, "")
    return error_type(
        f"the broker refused the publish to {topic!r}: {reason} (0x{code:02x}){hint}",
        topic=topic,
        reason=str(reason),
        reason_code=code,
    )
