"""Subscribing on one MQTT connection and dispatching what arrives to the handlers.

Handlers are found by MQTT v5 Subscription Identifier, so overlapping filters each get
exactly their own copy (by local filter matching on a broker without identifiers); a handler
that raises is logged and delivery goes on; async handlers run as tasks, off the network path.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode
from paho.mqtt.subscribeoptions import SubscribeOptions

from mesh.errors import SubscribeError
from mesh.transport.base import InboundMessage, MessageHandler, Subscription
from mesh.transport.callbacks import CallbackRunner
from mesh.transport.capabilities import BrokerCapabilities
from mesh.transport.codec import from_paho, new_properties
from mesh.transport.connection import Connection
from mesh.transport.subscriptions import BrokerSubscription, SubscriptionTable

__all__ = ["Inbound"]

log = logging.getLogger(__name__)


class Inbound:
    """The subscribing and receiving half of one connection."""

    def __init__(self, connection: Connection, callbacks: CallbackRunner, *, use_subscription_ids: bool) -> None:
        self._connection = connection
        self._client = connection.client
        self._callbacks = callbacks
        self._table = SubscriptionTable()
        self._use_subscription_ids = use_subscription_ids
        # Packet ids of the SUBSCRIBEs sent for a new session, and who to tell when all are answered.
        self._resubscribing: set[int] = set()
        self._on_resubscribed: Callable[[], None] | None = None
        #: Whether the broker supports Subscription Identifiers (from CONNACK) and we use them.
        self.subscription_ids_available = use_subscription_ids
        #: What the broker's last CONNACK said it can do.
        self.capabilities = BrokerCapabilities()
        self._client.on_message = self._on_message
        self._client.on_subscribe = self._on_subscribe

    def read_limits(self, capabilities: BrokerCapabilities) -> None:
        """Adopt what the broker announced in CONNACK."""
        self.capabilities = capabilities
        self.subscription_ids_available = self._use_subscription_ids and capabilities.subscription_identifiers

    def resubscribe(self, session_present: bool, done: Callable[[], None]) -> None:
        """After a (re)connection: subscribe again to what the broker's session lacks.

        ``done`` is called once every one of those SUBSCRIBEs is answered (at once if there
        are none): until then a message published to us could find no subscription.
        """
        self._resubscribing.clear()
        self._on_resubscribed = done
        for entry in self._table.to_resubscribe(session_present):
            mid = self._send_subscribe(entry)
            if mid is not None:
                self._resubscribing.add(mid)
        self._check_resubscribed()

    def _check_resubscribed(self) -> None:
        if not self._resubscribing and self._on_resubscribed is not None:
            done, self._on_resubscribed = self._on_resubscribed, None
            done()

    async def subscribe(
        self,
        topic_filter: str,
        handler: MessageHandler,
        *,
        qos: int,
        no_local: bool,
        manual_ack: bool,
        timeout: float,
    ) -> Subscription:
        """See :meth:`mesh.transport.MqttTransport.subscribe`."""
        connection = self._connection
        entry, created = self._table.add(topic_filter, handler, qos, no_local, asyncio.get_running_loop(), manual_ack)
        if created and connection.session_up:
            self._send_subscribe(entry)
        try:
            await asyncio.wait_for(asyncio.shield(entry.acked), timeout)
        except TimeoutError:
            self._drop_handler(entry, handler)
            raise SubscribeError(
                f"no SUBACK for {topic_filter!r} from {connection.settings.url}",
                topic_filter=topic_filter,
                reason="timeout",
            ) from None
        except SubscribeError:
            self._drop_handler(entry, handler)
            raise
        return Subscription(topic_filter, handler)

    def unsubscribe(self, subscription: Subscription) -> None:
        """Stop delivering to ``subscription``; the last handler of a filter unsubscribes it."""
        entry = self._table.get(subscription.topic_filter)
        if entry is not None:
            self._drop_handler(entry, subscription.handler)

    def _drop_handler(self, entry: BrokerSubscription, handler: MessageHandler) -> None:
        refused = self.capabilities.refusal(entry.topic_filter, self._connection.settings.url) is not None
        if self._table.drop(entry, handler) and self._connection.session_up and not refused:
            self._client.unsubscribe(entry.topic_filter)
            self._connection.sync_writer()

    def _send_subscribe(self, entry: BrokerSubscription) -> int | None:
        refusal = self.capabilities.refusal(entry.topic_filter, self._connection.settings.url)
        if refusal is not None:  # sent, it would cost the connection (ejabberd closes it on a $share)
            if not entry.acked.done():
                entry.acked.set_exception(refusal)
            return None
        props: Properties | None = None
        if self.subscription_ids_available:
            props = new_properties(PacketTypes.SUBSCRIBE)
            props.SubscriptionIdentifier = entry.identifier
        options = SubscribeOptions(qos=entry.qos, noLocal=entry.no_local)
        _rc, mid = self._client.subscribe(entry.topic_filter, options=options, properties=props)
        if mid is not None:
            self._table.sent(mid, entry)
        self._connection.sync_writer()
        return mid

    def _on_subscribe(
        self, _client: paho.Client, _userdata: Any, mid: int, reasons: list[ReasonCode], _props: Properties | None
    ) -> None:
        entry = self._table.suback(mid)
        if entry is None:
            return
        self._answer(entry, reasons)
        if mid in self._resubscribing:
            self._resubscribing.discard(mid)
            self._check_resubscribed()

    def _answer(self, entry: BrokerSubscription, reasons: list[ReasonCode]) -> None:
        failed = [r for r in reasons if r.is_failure]
        if not failed:
            entry.confirmed = True
            if not entry.acked.done():
                entry.acked.set_result(None)
            return
        settings = self._connection.settings
        user = f" of broker user {settings.username!r}" if settings.username else " of an anonymous client"
        error = SubscribeError(
            f"the broker at {settings.url} refused the subscription {entry.topic_filter!r}{user}: {failed[0]}",
            topic_filter=entry.topic_filter,
            reason=str(failed[0]),
        ).refused_as(settings.url, settings.username)
        if not entry.acked.done():
            entry.acked.set_exception(error)
            entry.acked.exception()  # waiters each re-raise it; none may be left to read it
        else:
            log.error("%s (after a reconnect)", error)

    def _on_message(self, _client: paho.Client, _userdata: Any, msg: paho.MQTTMessage) -> None:
        props = msg.properties
        payload = msg.payload
        message = InboundMessage(
            topic=msg.topic,
            # paho's own decoder may hand out a bytearray; handlers get immutable bytes.
            payload=payload if type(payload) is bytes else bytes(payload),
            qos=msg.qos,
            retain=bool(msg.retain),
            properties=from_paho(props),
            redelivered=bool(msg.dup),
        )
        sub_ids = getattr(props, "SubscriptionIdentifier", None) if self.subscription_ids_available else None
        entries = self._table.entries_for(message.topic, sub_ids)
        ack_now = msg.qos > 0
        if ack_now and any(entry.manual_ack for entry in entries):
            message.ack = self._acknowledger(msg.mid, msg.qos)
            ack_now = False
        run = self._callbacks.run
        for entry in entries:
            for handler in tuple(entry.handlers):
                run(handler, message)
        if ack_now:
            self._client.ack(msg.mid, msg.qos)  # goes out with whatever this read answers

    def _acknowledger(self, mid: int, qos: int) -> Callable[[], None]:
        """``ack()`` of one message: once, and only on the connection that received it.

        A packet id is only meaningful within its connection: after a reconnect the broker
        redelivers the message under a new id, and an old one could acknowledge another.
        """
        connection = self._connection
        session = connection.session_number
        acked = False

        def ack() -> None:
            nonlocal acked
            if acked or connection.session_number != session or not connection.session_up:
                return
            acked = True
            connection.cork()
            self._client.ack(mid, qos)
            connection.sync_writer()

        return ack
