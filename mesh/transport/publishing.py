"""Publishing on one MQTT connection: size checks, the in-flight window, PUBACKs as futures.

QoS 1 publishes in flight are bounded by the broker's Receive Maximum (callers wait for room),
a window kept here because paho can neither resize its own nor scan it cheaply. Each PUBACK
resolves its publish's future, or fails it with the broker's reason as a :class:`PublishError`.
PUBACK 0x10 ("No matching subscribers") is a success in MQTT; it fails the future with
:class:`NoSubscribersError` only for a publish that asked (``require_subscriber``): a request
to an agent nobody serves.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from mesh.errors import (
    NoSubscribersError,
    NotAuthorizedError,
    NotConnectedError,
    PacketTooLargeError,
    PublishError,
    PublishTimeoutError,
    QuotaExceededError,
)
from mesh.properties import MessageProperties
from mesh.transport.codec import to_paho
from mesh.transport.connection import Connection
from mesh.transport.window import InflightWindow
from topics import validate_publish_topic

__all__ = ["MQTT_MAX_PACKET", "Publisher"]

log = logging.getLogger(__name__)

#: MQTT's own ceiling on a packet (256 MiB); brokers usually advertise less in CONNACK.
MQTT_MAX_PACKET = 268_435_455
# Bytes a PUBLISH needs beyond payload, topic and user properties (header, lengths, ids).
_PUBLISH_OVERHEAD = 64
# Below the broker's limit by this much, a message is not measured property by property.
_SIZE_CHECK_MARGIN = 64 * 1024
_NO_MATCHING_SUBSCRIBERS = 0x10


class Publisher:
    """The publishing half of one connection."""

    def __init__(self, connection: Connection, *, max_inflight: int, timeout_s: float) -> None:
        self._connection = connection
        self._client = connection.client
        self.max_inflight = max_inflight
        self.timeout_s = timeout_s
        self.window = InflightWindow(min(max_inflight, 20))
        # mid -> (its future, its topic, whether PUBACK 0x10 fails it)
        self._pending_acks: dict[int, tuple[asyncio.Future[None], str, bool]] = {}
        #: The broker's Maximum Packet Size, from CONNACK.
        self.max_packet_size = MQTT_MAX_PACKET
        #: Whether the broker keeps retained messages (CONNACK's Retain Available): if not, a
        #: retained publish would be a protocol error, so it goes out unretained.
        self.retain_available = True
        self._client.on_publish = self._on_publish

    @property
    def queued(self) -> int:
        """QoS 1 publishes not yet acknowledged: sent, or waiting for room in the window."""
        return len(self._pending_acks) + self.window.waiting

    def read_limits(self, props: Properties | None) -> None:
        """Adopt the limits the broker announced in CONNACK."""
        self.window.resize(min(self.max_inflight, getattr(props, "ReceiveMaximum", 65535)))
        self.max_packet_size = getattr(props, "MaximumPacketSize", MQTT_MAX_PACKET)

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
        """See :meth:`mesh.transport.MqttTransport.publish`."""
        timeout = self.timeout_s if timeout is None else timeout
        data = payload.encode() if isinstance(payload, str) else payload
        validate_publish_topic(topic)
        self.check_size(topic, data, properties)
        connection = self._connection
        try:
            async with asyncio.timeout(timeout):
                if qos == 0:
                    await connection.connected.wait()
                    connection.cork()
                    self._client.publish(
                        topic, data, qos=0, retain=self._retained(retain), properties=to_paho(properties)
                    )
                    connection.sync_writer()
                    return
                await self.window.acquire()
                await self._send_qos1(topic, data, retain, properties)
        except TimeoutError:
            state = "connected" if connection.connected.is_set() else "not connected"
            raise PublishTimeoutError(
                f"no PUBACK for the message to {topic!r} within {timeout:g} s ({state} to {connection.settings.url})"
            ) from None

    def publish_nowait(
        self,
        topic: str,
        payload: bytes | str,
        *,
        retain: bool = False,
        properties: MessageProperties | None = None,
        require_subscriber: bool = False,
    ) -> asyncio.Future[None]:
        """See :meth:`mesh.transport.MqttTransport.publish_nowait`."""
        data = payload.encode() if isinstance(payload, str) else payload
        validate_publish_topic(topic)
        self.check_size(topic, data, properties)
        if self.window.try_acquire():
            ack = self._send_qos1(topic, data, retain, properties, require_subscriber)
        else:
            ack = asyncio.ensure_future(self._publish_when_room(topic, data, retain, properties, require_subscriber))
        ack.add_done_callback(_log_unread_failure)
        return ack

    def check_size(self, topic: str, payload: bytes, properties: MessageProperties | None) -> None:
        """Refuse, before sending, a message the broker would refuse as too large."""
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
                "or raise the broker's limit (max_packet_size in mosquitto.conf)",
                topic=topic,
                reason="Packet too large",
                reason_code=0x95,
            )

    def fail_all(self, error: NotConnectedError) -> None:
        """The transport closed: fail every publish still waiting for room or a PUBACK."""
        self.window.close(error)
        for ack, _topic, _required in self._pending_acks.values():
            if not ack.done():
                ack.set_exception(error)
                ack.exception()  # nobody may be waiting; do not warn about it
        self._pending_acks.clear()

    async def _publish_when_room(
        self, topic: str, data: bytes, retain: bool, properties: MessageProperties | None, require_subscriber: bool
    ) -> None:
        await self.window.acquire()
        await self._send_qos1(topic, data, retain, properties, require_subscriber)

    def _retained(self, retain: bool) -> bool:
        return retain and self.retain_available

    def _send_qos1(
        self,
        topic: str,
        data: bytes,
        retain: bool,
        properties: MessageProperties | None,
        require_subscriber: bool = False,
    ) -> asyncio.Future[None]:
        """Hand a QoS 1 message to paho; the caller holds a window slot, released on PUBACK."""
        connection = self._connection
        connection.cork()
        try:
            info = self._client.publish(
                topic, data, qos=1, retain=self._retained(retain), properties=to_paho(properties)
            )
        except BaseException:
            self.window.release()
            raise
        connection.sync_writer()
        ack: asyncio.Future[None] = connection.require_loop().create_future()
        self._pending_acks[info.mid] = (ack, topic, require_subscriber)
        return ack

    def _on_publish(
        self, _client: paho.Client, _userdata: Any, mid: int, reason: ReasonCode, _props: Properties | None
    ) -> None:
        pending = self._pending_acks.pop(mid, None)
        if pending is None:
            return
        self.window.release()
        ack, topic, require_subscriber = pending
        if ack.done():
            return
        if reason.is_failure:
            settings = self._connection.settings
            ack.set_exception(publish_error(reason, topic).refused_as(settings.url, settings.username))
        elif require_subscriber and reason.value == _NO_MATCHING_SUBSCRIBERS:
            ack.set_exception(NoSubscribersError(topic))
        else:
            ack.set_result(None)


def publish_error(reason: ReasonCode, topic: str) -> PublishError:
    """The broker's refusal of a publish as the matching :class:`PublishError`."""
    code = reason.value
    error_type = {0x87: NotAuthorizedError, 0x95: PacketTooLargeError, 0x97: QuotaExceededError}.get(code, PublishError)
    hint = {0x87: "; check the broker's ACL for this client and topic"}.get(code, "")
    return error_type(
        f"the broker refused the publish to {topic!r}: {reason} (0x{code:02x}){hint}",
        topic=topic,
        reason=str(reason),
        reason_code=code,
    )


def _log_unread_failure(ack: asyncio.Future[None]) -> None:
    # Fire-and-forget publishes: report the broker's refusal instead of losing it.
    # A NoSubscribersError was asked for: its publisher reads it.
    if not ack.cancelled() and (error := ack.exception()) is not None and not isinstance(error, NoSubscribersError):
        log.warning("queued publish failed: %s", error)
