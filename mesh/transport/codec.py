"""MQTT v5 properties: a faster paho ``Properties`` and the mesh <-> paho conversion.

paho's ``Properties`` rebuilds its name tables for every instance, finds names by linear
search with ``str.replace``, scans each received string character by character and copies
the buffer at every step: ~130 us to read the ~260 bytes of properties a mesh request
carries, and more than half of the CPU of a busy mesh process. :class:`FastProperties`
is a drop-in subclass with the same attributes, the same wire format and the same checks,
built on shared tables. :func:`to_paho` builds it for what we send, and
:mod:`mesh.transport.pahoclient` decodes what we receive with it, per client: paho's module
globals are never patched. A property-based test checks it against paho's own class on
random inputs.

Both lean on paho internals (its property tables, its packet handlers), so they are used only
with the paho minor release they were tested with (:data:`PAHO_TESTED`); with any other, paho's
own ``Properties`` is used, slower but correct.

One deliberate difference: U+FEFF is accepted in received strings. paho rejects it, but
MQTT 5 [MQTT-1.5.4-3] says it must be passed on, not refused.
"""

from __future__ import annotations

import logging
import struct
from typing import Any

import paho.mqtt
from paho.mqtt.exception import MalformedPacket, MQTTException
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from mesh.properties import MessageProperties

__all__ = [
    "PAHO_TESTED",
    "TESTED_PAHO_MINOR",
    "FastProperties",
    "from_paho",
    "new_properties",
    "paho_version_tested",
    "to_paho",
]

log = logging.getLogger(__name__)

#: The paho-mqtt minor release the speed-up was checked against (pyproject pins the same range).
TESTED_PAHO_MINOR = (2, 2)


def paho_version_tested(version: str) -> bool:
    """Whether paho-mqtt ``version`` is of the tested minor release."""
    parts = version.split(".")
    try:
        return (int(parts[0]), int(parts[1])) == TESTED_PAHO_MINOR
    except (IndexError, ValueError):
        return False


#: Whether the installed paho is the tested one, so that its internals are what we expect.
PAHO_TESTED = paho_version_tested(paho.mqtt.__version__)
if not PAHO_TESTED:
    log.debug(
        "paho-mqtt %s is not the tested %d.%d: using paho's own Properties (slower)",
        paho.mqtt.__version__,
        *TESTED_PAHO_MINOR,
    )

_BYTE, _INT16, _INT32, _VBI, _BINARY, _UTF8, _PAIR = range(7)

# paho's own tables, read once from a stock instance (paho's constructor is untyped).
_STOCK = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
_TYPE_NAMES: list[str] = _STOCK.types
_SPACED_NAMES: dict[str, int] = _STOCK.names
_PAHO_TABLE: dict[int, tuple[int, list[int]]] = _STOCK.properties
_NAME_TO_ID: dict[str, int] = {name.replace(" ", ""): ident for name, ident in _SPACED_NAMES.items()}
_ID_TO_NAME: dict[int, str] = {ident: name for name, ident in _NAME_TO_ID.items()}
_ID_TO_SPACED: dict[int, str] = {ident: name for name, ident in _SPACED_NAMES.items()}
_TYPE_OF: dict[int, int] = {ident: entry[0] for ident, entry in _PAHO_TABLE.items()}
_PACKETS_OF: dict[int, frozenset[int]] = {ident: frozenset(entry[1]) for ident, entry in _PAHO_TABLE.items()}
_MULTIPLE = frozenset({11, 38})  # Subscription Identifier, User Property
# (name, identifier, type) in paho's order, which is the order pack() writes.
_ORDER: tuple[tuple[str, int, int], ...] = tuple(
    (name.replace(" ", ""), ident, _TYPE_OF[ident]) for name, ident in _SPACED_NAMES.items()
)
_PRIVATE = frozenset({"packetType", "types", "names", "properties"})
_RANGES: dict[str, tuple[int, int]] = {
    "ReceiveMaximum": (1, 65535),
    "TopicAlias": (1, 65535),
    "TopicAliasMaximum": (0, 65535),
    "MaximumPacketSize": (1, 268435455),
    "SubscriptionIdentifier": (1, 268435455),
    "RequestResponseInformation": (0, 1),
    "RequestProblemInformation": (0, 1),
    "PayloadFormatIndicator": (0, 1),
}
_INT16_STRUCT = struct.Struct("!H")
_INT32_STRUCT = struct.Struct("!L")


class FastProperties(Properties):
    """paho ``Properties`` with shared tables and single-pass pack/unpack."""

    def __init__(self, packetType: int) -> None:
        setter = object.__setattr__
        setter(self, "packetType", packetType)
        # Shared, never mutated: paho reads these but does not change them.
        setter(self, "types", _TYPE_NAMES)
        setter(self, "names", _SPACED_NAMES)
        setter(self, "properties", _PAHO_TABLE)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _PRIVATE:
            object.__setattr__(self, name, value)
            return
        ident = _NAME_TO_ID.get(name)
        if ident is None:
            name = name.replace(" ", "")
            ident = _NAME_TO_ID.get(name)
            if ident is None:
                raise MQTTException(f"Property name must be one of {_SPACED_NAMES.keys()}")
        if self.packetType not in _PACKETS_OF[ident]:
            raise MQTTException(f"Property {name} does not apply to packet type {PacketTypes.Names[self.packetType]}")
        if not isinstance(value, list):
            bounds = _RANGES.get(name)
            if bounds is not None and not bounds[0] <= value <= bounds[1]:
                if bounds[1] == 1:
                    raise MQTTException(f"{name} property value must be 0 or 1")
                raise MQTTException(f"{name} property value must be in the range {bounds[0]}-{bounds[1]}")
        if ident in _MULTIPLE:
            if not isinstance(value, list):
                value = [value]
            existing = self.__dict__.get(name)
            if existing is not None:
                value = existing + value
        object.__setattr__(self, name, value)

    def allowsMultiple(self, compressedName: str) -> bool:
        return _NAME_TO_ID.get(compressedName, -1) in _MULTIPLE

    def getIdentFromName(self, compressedName: str) -> int:
        return _NAME_TO_ID.get(compressedName, -1)

    def getNameFromIdent(self, identifier: int) -> str | None:
        return _ID_TO_SPACED.get(identifier)

    def isEmpty(self) -> bool:
        attributes = self.__dict__
        return not any(name in attributes for name in _NAME_TO_ID)

    def clear(self) -> None:
        attributes = self.__dict__
        for name in _NAME_TO_ID:
            attributes.pop(name, None)

    def pack(self) -> bytes:
        attributes = self.__dict__
        out = bytearray()
        for name, ident, kind in _ORDER:
            if name in attributes:
                value = attributes[name]
                if ident in _MULTIPLE:
                    for item in value:
                        _write(out, ident, kind, item)
                else:
                    _write(out, ident, kind, value)
        header = bytearray()
        _write_vbi(header, len(out))
        return bytes(header + out)

    def unpack(self, buffer: bytes | bytearray) -> tuple[FastProperties, int]:
        self.clear()
        total, pos = _read_vbi(buffer, 0)
        end = pos + total
        if end > len(buffer):
            raise MalformedPacket("Property length exceeds the packet")
        attributes = self.__dict__
        packet_type = self.packetType
        while pos < end:
            ident, pos = _read_vbi(buffer, pos)
            kind = _TYPE_OF.get(ident)
            if kind is None:
                raise MalformedPacket(f"Unknown property identifier {ident}")
            value, pos = _read_value(buffer, pos, end, kind)
            name = _ID_TO_NAME[ident]
            if packet_type not in _PACKETS_OF[ident]:
                raise MQTTException(f"Property {name} does not apply to packet type {PacketTypes.Names[packet_type]}")
            if ident in _MULTIPLE:
                attributes.setdefault(name, []).append(value)
                continue
            if name in attributes:
                raise MQTTException(f"Property '{name}' must not exist more than once")
            bounds = _RANGES.get(name)
            if bounds is not None and not bounds[0] <= value <= bounds[1]:
                raise MQTTException(f"{name} property value out of range")
            attributes[name] = value
        return self, end


def _write(out: bytearray, ident: int, kind: int, value: Any) -> None:
    out.append(ident)  # every identifier is < 128, so its VBI is one byte
    if kind == _PAIR:
        _write_utf8(out, value[0])
        _write_utf8(out, value[1])
    elif kind == _UTF8:
        _write_utf8(out, value)
    elif kind == _BINARY:
        out += _INT16_STRUCT.pack(len(value))
        out += value
    elif kind == _BYTE:
        out.append(value)
    elif kind == _INT16:
        out += _INT16_STRUCT.pack(value)
    elif kind == _INT32:
        out += _INT32_STRUCT.pack(value)
    else:
        _write_vbi(out, value)


def _write_vbi(out: bytearray, value: int) -> None:
    if not 0 <= value <= 268_435_455:
        raise ValueError(f"Value {value!r} must be in range 0-268435455")
    while True:
        digit = value & 0x7F
        value >>= 7
        out.append(digit | 0x80 if value else digit)
        if not value:
            return


def _write_utf8(out: bytearray, value: str | bytes) -> None:
    data = value if isinstance(value, bytes) else value.encode("utf-8")
    out += _INT16_STRUCT.pack(len(data))
    out += data


def _read_vbi(buffer: bytes | bytearray, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    for index in range(pos, pos + 4):
        if index >= len(buffer):
            raise MalformedPacket("Not enough data to decode Variable Byte Integer")
        digit = buffer[index]
        value |= (digit & 0x7F) << shift
        if digit < 0x80:
            return value, index + 1
        shift += 7
    raise MalformedPacket("Variable Byte Integer is more than four bytes long")


def _read_value(buffer: bytes | bytearray, pos: int, end: int, kind: int) -> tuple[Any, int]:
    if kind == _PAIR:
        key, pos = _read_utf8(buffer, pos, end)
        value, pos = _read_utf8(buffer, pos, end)
        return (key, value), pos
    if kind == _UTF8:
        return _read_utf8(buffer, pos, end)
    if kind == _BINARY:
        length, start = _read_length(buffer, pos, end)
        return bytes(buffer[start : start + length]), start + length
    if kind == _BYTE:
        if pos >= end:
            raise MalformedPacket("Not enough data to read a byte property")
        return buffer[pos], pos + 1
    if kind == _INT16:
        if pos + 2 > end:
            raise MalformedPacket("Not enough data to read a two byte integer")
        return _INT16_STRUCT.unpack_from(buffer, pos)[0], pos + 2
    if kind == _INT32:
        if pos + 4 > end:
            raise MalformedPacket("Not enough data to read a four byte integer")
        return _INT32_STRUCT.unpack_from(buffer, pos)[0], pos + 4
    number, new_pos = _read_vbi(buffer, pos)
    if new_pos > end:
        raise MalformedPacket("Variable Byte Integer runs past the properties")
    return number, new_pos


def _read_length(buffer: bytes | bytearray, pos: int, end: int) -> tuple[int, int]:
    if pos + 2 > end:
        raise MalformedPacket("Not enough data to read a length")
    length = _INT16_STRUCT.unpack_from(buffer, pos)[0]
    if pos + 2 + length > end:
        raise MalformedPacket("Length delimited data too long")
    return length, pos + 2


def _read_utf8(buffer: bytes | bytearray, pos: int, end: int) -> tuple[str, int]:
    length, start = _read_length(buffer, pos, end)
    try:
        text = bytes(buffer[start : start + length]).decode("utf-8")  # strict: refuses surrogates
    except UnicodeDecodeError as exc:
        raise MalformedPacket(f"[MQTT-1.5.4-1] invalid UTF-8 in a property: {exc}") from exc
    if "\x00" in text:
        raise MalformedPacket("[MQTT-1.5.4-2] Null found in UTF-8 data")
    return text, start + length


def new_properties(packet_type: int) -> Properties:
    """Empty properties of ``packet_type`` (CONNECT, SUBSCRIBE...): paho's constructor rebuilds its
    tables for every instance (~50 us), and a start of 1,000 agents makes thousands."""
    if PAHO_TESTED:
        return FastProperties(packet_type)
    return Properties(packet_type)  # type: ignore[no-untyped-call]


def to_paho(props: MessageProperties | None, packet_type: int = PacketTypes.PUBLISH) -> Properties | None:
    """Build a fresh paho Properties (assigning UserProperty appends, so never reuse one)."""
    if props is None:
        return None
    out = FastProperties(packet_type) if PAHO_TESTED else Properties(packet_type)  # type: ignore[no-untyped-call]
    attributes = out.__dict__
    # Values come from MessageProperties, already typed: skip the per-name checks.
    pairs = props.user_properties()
    if pairs:
        attributes["UserProperty"] = pairs
    if props.reply_to:
        attributes["ResponseTopic"] = props.reply_to
    if props.correlation_data is not None:
        attributes["CorrelationData"] = props.correlation_data
    if props.content_type is not None:
        attributes["ContentType"] = props.content_type
    if props.payload_format_utf8:
        attributes["PayloadFormatIndicator"] = 1
    if props.message_expiry_s is not None:
        attributes["MessageExpiryInterval"] = props.message_expiry_s
    return out


def from_paho(props: Properties | None) -> MessageProperties:
    """The mesh's view of received properties (paho's class or ours: both keep their values in ``__dict__``)."""
    if props is None:
        return MessageProperties()
    attributes = props.__dict__
    return MessageProperties.from_wire(
        attributes.get("UserProperty", ()),
        response_topic=attributes.get("ResponseTopic"),
        correlation_data=attributes.get("CorrelationData"),
        content_type=attributes.get("ContentType"),
        payload_format_utf8=attributes.get("PayloadFormatIndicator") == 1,
        message_expiry_s=attributes.get("MessageExpiryInterval"),
    )
