"""FastProperties must behave like paho's own Properties, only faster."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import MQTTException, Properties

from mesh.properties import MessageProperties
from mesh.transport.codec import FastProperties, from_paho, to_paho

PACKET_TYPES = [
    PacketTypes.CONNECT,
    PacketTypes.CONNACK,
    PacketTypes.PUBLISH,
    PacketTypes.PUBACK,
    PacketTypes.SUBSCRIBE,
    PacketTypes.SUBACK,
    PacketTypes.DISCONNECT,
    PacketTypes.WILLMESSAGE,
]
STOCK = Properties(PacketTypes.PUBLISH)
# paho's surrogate/NUL/U+FEFF rules differ from ours only on U+FEFF (see codec docstring).
text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\ufeff"), max_size=40)


def value_for(name: str) -> st.SearchStrategy[Any]:
    kind = STOCK.properties[STOCK.names[name]][0]
    compressed = name.replace(" ", "")
    bounded = {
        "ReceiveMaximum": st.integers(1, 65535),
        "TopicAlias": st.integers(1, 65535),
        "TopicAliasMaximum": st.integers(0, 65535),
        "MaximumPacketSize": st.integers(1, 268435455),
        "SubscriptionIdentifier": st.integers(1, 268435455),
        "RequestResponseInformation": st.integers(0, 1),
        "RequestProblemInformation": st.integers(0, 1),
        "PayloadFormatIndicator": st.integers(0, 1),
    }
    if compressed in bounded:
        return bounded[compressed]
    return [
        st.integers(0, 255),
        st.integers(0, 65535),
        st.integers(0, 2**32 - 1),
        st.integers(1, 268435455),
        st.binary(max_size=40),
        text,
        st.tuples(text, text),
    ][kind]


@st.composite
def property_sets(draw: st.DrawFn) -> tuple[int, list[tuple[str, Any]]]:
    packet_type = draw(st.sampled_from(PACKET_TYPES))
    allowed = [n for n, ident in STOCK.names.items() if packet_type in STOCK.properties[ident][1]]
    chosen = draw(st.lists(st.sampled_from(allowed), unique=True, max_size=len(allowed)))
    assignments = []
    for name in chosen:
        repeats = draw(st.integers(1, 3)) if STOCK.allowsMultiple(name.replace(" ", "")) else 1
        assignments += [(name.replace(" ", ""), draw(value_for(name))) for _ in range(repeats)]
    return packet_type, assignments


def build(cls: type[Properties], packet_type: int, assignments: list[tuple[str, Any]]) -> Properties:
    props = cls(packet_type)
    for name, value in assignments:
        setattr(props, name, value)
    return props


def attributes(props: Properties) -> dict[str, Any]:
    """The property values set on an instance, without paho's bookkeeping attributes."""
    return {k: v for k, v in vars(props).items() if k not in ("packetType", "types", "names", "properties")}


@settings(max_examples=400, deadline=None)
@given(property_sets())
def test_pack_and_unpack_match_paho(case: tuple[int, list[tuple[str, Any]]]) -> None:
    packet_type, assignments = case
    stock, fast = build(Properties, packet_type, assignments), build(FastProperties, packet_type, assignments)
    assert fast.pack() == stock.pack()
    assert attributes(fast) == attributes(stock)
    assert fast.isEmpty() == stock.isEmpty()

    wire = stock.pack()
    from_stock, from_fast = Properties(packet_type), FastProperties(packet_type)
    assert from_fast.unpack(wire)[1] == from_stock.unpack(wire)[1] == len(wire)
    assert attributes(from_fast) == attributes(from_stock)


@settings(max_examples=600, deadline=None)
@given(st.sampled_from(PACKET_TYPES), st.binary(max_size=60))
def test_garbage_is_never_read_differently_from_paho(packet_type: int, data: bytes) -> None:
    """What we accept, paho reads the same; what paho refuses, we refuse.

    We may refuse more: paho reads fixed-size integers past the declared property length.
    """

    def read(cls: type[Properties]) -> Any:
        try:
            props = cls(packet_type)
            return ("ok", props.unpack(data)[1], attributes(props))
        except (MQTTException, IndexError, KeyError, UnicodeDecodeError, TypeError, ValueError, struct.error):
            return ("refused",)

    if b"\xef\xbb\xbf" in data:
        return  # U+FEFF: the one intended difference
    stock, fast = read(Properties), read(FastProperties)
    if fast[0] == "ok":
        assert stock == fast
    if stock[0] == "refused":
        assert fast[0] == "refused"


def test_assignment_checks_match_paho() -> None:
    for cls in (Properties, FastProperties):
        props = cls(PacketTypes.PUBLISH)
        with pytest.raises(MQTTException, match="must be one of"):
            props.NotAProperty = 1
        with pytest.raises(MQTTException, match="does not apply"):
            props.SessionExpiryInterval = 10
        with pytest.raises(MQTTException, match="0 or 1"):
            props.PayloadFormatIndicator = 2
        props.UserProperty = ("a", "1")
        props.UserProperty = [("b", "2")]
        assert props.UserProperty == [("a", "1"), ("b", "2")]  # assignment appends


def test_feff_in_a_string_is_accepted() -> None:
    props = FastProperties(PacketTypes.PUBLISH)
    props.UserProperty = ("k", "\ufeffv")
    wire = props.pack()
    read = FastProperties(PacketTypes.PUBLISH)
    read.unpack(wire)
    assert read.UserProperty == [("k", "\ufeffv")]


def test_mesh_properties_round_trip_through_the_wire_format() -> None:
    sent = MessageProperties(
        client_id="c",
        user_id="u",
        reply_to="r/t",
        status_topic="s/t",
        user_config={"a": [1]},
        auth_token="tok",
        call_depth=2,
        timestamp_ms=5,
        traceparent="00-x",
        call_chain=["a", "b"],
        extra=[("k", "v"), ("k", "w")],
        correlation_data=b"\x00id",
        content_type="application/json",
        payload_format_utf8=True,
        message_expiry_s=9,
    )
    packed = to_paho(sent).pack()  # type: ignore[union-attr]
    received = FastProperties(PacketTypes.PUBLISH)
    received.unpack(packed)
    assert from_paho(received) == sent
