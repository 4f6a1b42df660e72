"""MQTT v5 transport: paho-mqtt driven by the asyncio event loop.

paho's socket is registered with the running loop (``add_reader`` / ``add_writer``) and
read, written and kept alive from it, as aiomqtt does, instead of running paho's network thread:
every callback runs on the loop thread, so there are no cross-thread hand-offs on the message path
and no locks of ours around paho.

:class:`MqttTransport` puts together what it adds on top of paho (DESIGN, "Transport rules"),
one concept per module:

- :mod:`~mesh.transport.connection`: connect from :class:`~mesh.broker.BrokerSettings`
  (a persistent session: clean start off, ``session_expiry_s``, ended by a clean close),
  TCP_NODELAY, reconnect with capped, jittered backoff (:mod:`~mesh.transport.backoff`),
  connect/disconnect listeners;
- :mod:`~mesh.transport.publishing`: ``publish`` awaits the PUBACK and raises the broker's
  reason; QoS 1 publishes in flight are bounded by the broker's Receive Maximum; the broker's
  Maximum Packet Size is checked before sending;
- :mod:`~mesh.transport.inbound`: ``subscribe(filter, handler)``, subscriptions sent again on
  every new session (the transport is "connected" only once they are acknowledged), dispatch
  by Subscription Identifier;
- :mod:`~mesh.transport.pahoclient`: received packets decoded with the faster codec;
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from mesh.broker import BrokerSettings
from mesh.errors import NotConnectedError
from mesh.properties import MessageProperties
from mesh.transport.base import ConnectListener, DisconnectListener, MessageHandler, Subscription, Will
from mesh.transport.callbacks import CallbackRunner
from mesh.transport.codec import to_paho
from mesh.transport.connection import Connection
from mesh.transport.inbound import Inbound
from mesh.transport.pahoclient import make_client
from mesh.transport.publishing import Publisher
from mesh.transport.tls import ssl_context

__all__ = ["MqttTransport"]


class MqttTransport:
    """One MQTT v5 connection, used from asyncio (a :class:`~mesh.transport.base.Transport`).

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
        max_inflight: int = 1000,
        publish_timeout_s: float = 30.0,
        use_subscription_ids: bool = True,
        max_handler_tasks: int = 10_000,
        receive_maximum: int | None = None,
    ) -> None:
        """``max_handler_tasks``: async handlers running at once; at the bound reading pauses.

        ``receive_maximum``: QoS 1 messages the broker may send before we acknowledge them
        (MQTT v5 Receive Maximum; default 65,535). With manual acknowledgements it bounds
        the messages held while their acknowledgement waits.
        """
        self.settings = settings
        self.client_id = client_id or f"mesh-{uuid.uuid4().hex[:12]}"
        self._client = _configured_client(settings, self.client_id, will)
        self._callbacks = CallbackRunner(max_tasks=max_handler_tasks)
        self._connection = Connection(
            settings, self._client, self._callbacks, receive_maximum=receive_maximum, client_id=self.client_id
        )
        self._publisher = Publisher(self._connection, max_inflight=max_inflight, timeout_s=publish_timeout_s)
        self._inbound = Inbound(self._connection, self._callbacks, use_subscription_ids=use_subscription_ids)
        self._client.on_connect = self._on_connect

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
        return self._connection.connected.is_set()

    @property
    def max_inflight(self) -> int:
        return self._publisher.max_inflight

    @property
    def publish_timeout_s(self) -> float:
        return self._publisher.timeout_s

    @property
    def max_packet_size(self) -> int:
        """The broker's Maximum Packet Size (from CONNACK; MQTT's ceiling until connected)."""
        return self._publisher.max_packet_size

    @property
    def queued_publishes(self) -> int:
        """QoS 1 publishes the broker has not acknowledged yet (sent, or waiting for room)."""
        return self._publisher.queued

    @property
    def subscription_ids_available(self) -> bool:
        return self._inbound.subscription_ids_available

    async def connect(self) -> None:
        """Connect once; raise :class:`ConnectError` naming the broker and the reason.

        After this first success the transport reconnects by itself whenever the
        connection drops, until :meth:`close`.
        """
        await self._connection.connect()

    async def close(self) -> None:
        """Disconnect cleanly (the broker discards our will) and fail what is still pending."""
        if not await self._connection.close():
            return
        error = NotConnectedError(f"transport to {self.settings.url} was closed")
        self._publisher.fail_all(error)
        await self._callbacks.cancel_all()

    def add_connect_listener(self, listener: ConnectListener) -> None:
        """Call ``listener(session_present)`` after every (re)connection, once its subscriptions are acknowledged."""
        self._connection.add_connect_listener(listener)

    def add_disconnect_listener(self, listener: DisconnectListener) -> None:
        """Call ``listener(reason)`` whenever an established connection is lost."""
        self._connection.add_disconnect_listener(listener)

    def pause_reading(self, reason: str) -> None:
        """Flow control: read no more messages until :meth:`resume_reading` with the same reason.

        The broker holds what follows (QoS 1 within its queue limits); writes and keepalive go on.
        """
        self._connection.pause_reading(reason)

    def resume_reading(self, reason: str) -> None:
        """Lift a :meth:`pause_reading`; reading resumes once no reason is left."""
        self._connection.resume_reading(reason)

    async def wait_connected(self, timeout: float | None = None) -> None:
        """Wait until connected and subscribed again; raise :class:`NotConnectedError` after ``timeout``."""
        await self._connection.wait_connected(timeout)

    def _on_connect(
        self, _client: paho.Client, _userdata: Any, flags: Any, reason: ReasonCode, props: Properties | None
    ) -> None:
        if reason.is_failure:
            self._connection.refused(reason)
            return
        self._publisher.read_limits(props)
        self._inbound.read_limits(props)
        session_present = bool(getattr(flags, "session_present", False))
        self._connection.accepted()
        # Reported connected (and connect listeners run) only once the broker acknowledged
        # every subscription: before that, an answer published to us could find none.
        self._inbound.resubscribe(session_present, lambda: self._connection.established(session_present))

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
        await self._publisher.publish(topic, payload, qos=qos, retain=retain, properties=properties, timeout=timeout)

    def publish_nowait(
        self,
        topic: str,
        payload: bytes | str,
        *,
        retain: bool = False,
        properties: MessageProperties | None = None,
        require_subscriber: bool = False,
    ) -> asyncio.Future[None]:
        """Queue a QoS 1 publish without waiting; the returned future resolves on its PUBACK.

        Messages are handed to the broker in call order, behind any publish still waiting
        for room in the in-flight window, so a stream of events keeps its order while its
        publishes overlap. A failure lands in the future (logged if nobody reads it). With
        ``require_subscriber``, a PUBACK saying no subscription matched (0x10) fails it with
        :class:`~mesh.errors.NoSubscribersError`.
        """
        return self._publisher.publish_nowait(
            topic, payload, retain=retain, properties=properties, require_subscriber=require_subscriber
        )

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
        """Subscribe and wait for the SUBACK; ``handler`` gets every matching message.

        The handler may be a plain function (called on the loop, keep it short) or a
        coroutine function (run as a task). Exceptions are logged, never propagated.
        The subscription survives reconnects until :meth:`unsubscribe`. With
        ``manual_ack`` the handler acknowledges each QoS 1 message (``message.ack()``) when
        it is safe for the broker to forget it; otherwise the transport does, after the
        handlers are called.

        It may be called before :meth:`connect` (without awaiting it): the handler is then
        in place for what a resumed session delivers right after the CONNACK.
        """
        return await self._inbound.subscribe(
            topic_filter,
            handler,
            qos=qos,
            no_local=no_local,
            manual_ack=manual_ack,
            timeout=timeout or self.publish_timeout_s,
        )

    async def unsubscribe(self, subscription: Subscription) -> None:
        """Stop delivering to ``subscription``; the last handler of a filter unsubscribes it."""
        self._inbound.unsubscribe(subscription)


def _configured_client(settings: BrokerSettings, client_id: str, will: Will | None) -> paho.Client:
    """A paho client set up from ``settings``: credentials, TLS, will, our in-flight bound."""
    client = make_client(client_id)
    # A raising callback would otherwise abort paho's packet handling.
    client.suppress_exceptions = True
    client.connect_timeout = settings.connect_timeout_s
    client.max_inflight_messages = 0  # unlimited in paho: the Publisher's window is the bound
    if settings.username is not None:
        client.username_pw_set(settings.username, settings.password)
    tls = settings.tls
    if tls is not None:
        # Our own context: its files are loaded (and a bad one reported) before any connect.
        client.tls_set_context(ssl_context(tls))
    if will is not None:
        client.will_set(
            will.topic,
            will.payload,
            qos=will.qos,
            retain=will.retain,
            properties=to_paho(will.properties, PacketTypes.WILLMESSAGE),
        )
    return client
