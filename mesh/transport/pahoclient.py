"""The paho ``Client`` the transport drives: received PUBLISH and PUBACK decoded with our codec.

paho decodes every packet with module-level functions that build its own ``Properties``
(~20 us each, for every PUBLISH and even for a PUBACK that carries none). Replacing that class
in paho's modules would speed up every paho user in the process, and change them too, so
instead :class:`FastClient` overrides the two handlers on the hot path and decodes those
packets itself with :class:`~mesh.transport.codec.FastProperties`; everything else (QoS 2,
CONNACK, SUBACK...) stays paho's. The handlers it overrides are paho internals, hence
:func:`make_client` uses it only with the tested paho release (else stock ``paho.Client``).
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Literal

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode
from paho.mqtt.exception import MalformedPacket, MQTTException
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.reasoncodes import ReasonCode

from mesh.transport.codec import PAHO_TESTED, FastProperties

__all__ = ["FastClient", "decode_puback", "decode_publish", "make_client"]

# What paho itself turns into MalformedPacket while decoding (paho.mqtt._packet.DECODE_ERRORS).
_DECODE_ERRORS = (struct.error, IndexError, KeyError, ValueError, MQTTException)
_UINT16 = struct.Struct("!H")
# A PUBACK without a reason byte means success; nobody mutates the one we hand to on_publish.
_PUBACK_SUCCESS = ReasonCode(PacketTypes.PUBACK)


def decode_publish(packet: bytes | bytearray, qos: int) -> tuple[bytes, int, FastProperties, bytes]:
    """Topic, packet id, properties and payload of an MQTT v5 PUBLISH (after the fixed header)."""
    try:
        (topic_length,) = _UINT16.unpack_from(packet, 0)
        pos = 2 + topic_length
        if pos > len(packet):
            raise MalformedPacket("topic length exceeds the packet")
        topic = bytes(packet[2:pos])
        mid = 0
        if qos > 0:
            (mid,) = _UINT16.unpack_from(packet, pos)
            pos += 2
        properties = FastProperties(PacketTypes.PUBLISH)
        _props, length = properties.unpack(packet[pos:])
        return topic, mid, properties, bytes(packet[pos + length :])
    except MalformedPacket:
        raise
    except _DECODE_ERRORS as exc:
        raise MalformedPacket(str(exc)) from exc


def decode_puback(packet: bytes | bytearray) -> tuple[int, ReasonCode, FastProperties]:
    """Packet id, reason and properties of an MQTT v5 PUBACK (after the fixed header)."""
    if len(packet) < 2:
        raise MalformedPacket("wrong size of packet")
    try:
        (mid,) = _UINT16.unpack_from(packet, 0)
        reason = _PUBACK_SUCCESS
        if len(packet) > 2 and packet[2] != 0:
            reason = ReasonCode(PacketTypes.PUBACK)
            reason.unpack(packet[2:])
        properties = FastProperties(PacketTypes.PUBACK)
        if len(packet) > 3:
            properties.unpack(packet[3:])
        return mid, reason, properties
    except MalformedPacket:
        raise
    except _DECODE_ERRORS as exc:
        raise MalformedPacket(str(exc)) from exc


class FastClient(paho.Client):
    """paho's client with the MQTT v5 QoS 0/1 PUBLISH and PUBACK handlers decoding faster.

    Same steps as paho's own handlers (``Client._handle_publish`` and
    ``Client._handle_pubackcomp`` of the tested release), minus the debug log line.
    """

    #: Set while the owner paused reading: :meth:`loop_read` stops after the packet it is on.
    read_paused = False
    #: A TCP socket the owner connected on its loop (mesh.transport.opening): the next connect
    #: or reconnect uses it instead of a blocking ``socket.create_connection``.
    preconnected: socket.socket | None = None

    def _create_socket_connection(self) -> socket.socket:
        sock, self.preconnected = self.preconnected, None
        return sock if sock is not None else super()._create_socket_connection()

    def loop_read(self, max_packets: int = 1) -> MQTTErrorCode:
        """paho's ``loop_read``, which also stops once :attr:`read_paused` is set.

        paho reads as many packets per call as it has messages in flight (thousands for a busy
        agent), so a pause asked for by a handler would otherwise take effect only after them.
        """
        if self._sock is None:
            return MQTTErrorCode.MQTT_ERR_NO_CONN
        for _ in range(max(len(self._out_messages) + len(self._in_messages), 1)):
            if self.read_paused:
                break
            if not self._sock:  # a handler's disconnect closed it (mypy cannot see that)
                return MQTTErrorCode.MQTT_ERR_NO_CONN
            rc = self._packet_read()
            if rc > 0:
                return self._loop_rc_handle(rc)
            if rc == MQTTErrorCode.MQTT_ERR_AGAIN:
                break
        return MQTTErrorCode.MQTT_ERR_SUCCESS

    def _handle_publish(self) -> MQTTErrorCode:
        header = self._in_packet["command"]
        qos = (header & 0x06) >> 1
        if qos == 2 or self._protocol != paho.MQTTv5:
            return super()._handle_publish()
        topic, mid, properties, payload = decode_publish(self._in_packet["packet"], qos)
        message = paho.MQTTMessage(mid=mid, topic=topic)
        message.dup = bool(header & 0x08)
        message.qos = qos
        message.retain = bool(header & 0x01)
        message.properties = properties
        message.payload = payload
        message.timestamp = time.monotonic()
        self._handle_on_message(message)
        if qos == 1 and not self._manual_ack:
            return self._send_puback(mid)
        return MQTTErrorCode.MQTT_ERR_SUCCESS

    def _handle_pubackcomp(self, cmd: Literal["PUBACK", "PUBCOMP"]) -> MQTTErrorCode:
        if cmd != "PUBACK" or self._protocol != paho.MQTTv5:
            return super()._handle_pubackcomp(cmd)
        mid, reason, properties = decode_puback(self._in_packet["packet"])
        with self._out_message_mutex:
            if mid in self._out_messages:
                return self._do_on_publish(mid, reason, properties)
        return MQTTErrorCode.MQTT_ERR_SUCCESS


def make_client(client_id: str) -> paho.Client:
    """An MQTT v5 paho client that reconnects only when told: :class:`FastClient` when paho is the tested one."""
    client_class = FastClient if PAHO_TESTED else paho.Client
    return client_class(
        CallbackAPIVersion.VERSION2,
        client_id=client_id,
        protocol=paho.MQTTv5,
        reconnect_on_failure=False,
        # The transport acknowledges every QoS 1 message after its handlers (or lets them).
        manual_ack=True,
    )
