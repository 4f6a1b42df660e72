"""FastClient decodes PUBLISH and PUBACK exactly as paho does, and nothing in paho is patched."""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap

import paho.mqtt._packet as paho_packet
import paho.mqtt.client as paho_client
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paho.mqtt.enums import MQTTProtocolVersion
from paho.mqtt.exception import MalformedPacket
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

import mesh.transport
from mesh.properties import MessageProperties
from mesh.transport.codec import PAHO_TESTED, FastProperties, paho_version_tested, to_paho
from mesh.transport.pahoclient import FastClient, decode_puback, decode_publish, make_client
from tests.mesh.transport.test_codec import attributes

V5 = MQTTProtocolVersion.MQTTv5


def publish_body(topic: bytes, mid: int | None, props: bytes, payload: bytes) -> bytes:
    body = struct.pack("!H", len(topic)) + topic
    if mid is not None:
        body += struct.pack("!H", mid)
    return body + props + payload


def wire_properties(sent: MessageProperties) -> bytes:
    props = to_paho(sent)
    assert isinstance(props, FastProperties)
    return props.pack()


def test_importing_the_transport_patches_nothing_in_paho() -> None:
    assert mesh.transport  # imported above, before these checks
    assert vars(paho_client)["Properties"] is Properties
    assert vars(paho_packet)["Properties"] is Properties


def test_a_fresh_process_keeps_paho_stock_after_using_the_transport() -> None:
    script = textwrap.dedent(
        """
        import paho.mqtt._packet, paho.mqtt.client, paho.mqtt.properties
        from mesh.broker import BrokerSettings
        from mesh.transport import MqttTransport
        MqttTransport(BrokerSettings.from_url("mqtt://localhost:1"))
        stock = paho.mqtt.properties.Properties
        print(paho.mqtt.client.Properties is stock and paho.mqtt._packet.Properties is stock)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


def test_the_tested_paho_gets_the_fast_client() -> None:
    assert PAHO_TESTED  # pyproject pins paho-mqtt to the tested minor release
    assert type(make_client("c1")) is FastClient


@pytest.mark.parametrize(
    ("version", "tested"), [("2.2.0", True), ("2.2.7", True), ("2.1.0", False), ("3.0.0", False), ("dev", False)]
)
def test_version_guard(version: str, tested: bool) -> None:
    assert paho_version_tested(version) is tested


@settings(max_examples=50, deadline=None)
@given(
    topic=st.text(max_size=30).map(str.encode),
    qos=st.sampled_from([0, 1]),
    mid=st.integers(1, 65535),
    payload=st.binary(max_size=60),
    user=st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8)), max_size=3),
    correlation=st.none() | st.binary(max_size=10),
)
def test_publish_decodes_as_paho_does(
    topic: bytes, qos: int, mid: int, payload: bytes, user: list[tuple[str, str]], correlation: bytes | None
) -> None:
    user = [(k, v) for k, v in user if "\x00" not in k + v]
    props = wire_properties(MessageProperties(extra=user, correlation_data=correlation, content_type="a/b"))
    body = bytearray(publish_body(topic, mid if qos else None, props, payload))
    header = 0x30 | (qos << 1)
    stock = paho_packet.decode_publish(header, body, V5)
    got_topic, got_mid, got_props, got_payload = decode_publish(body, qos)
    assert (got_topic, got_mid, got_payload) == (stock.topic, stock.mid, stock.payload)
    assert type(got_payload) is bytes
    assert stock.properties is not None
    assert attributes(got_props) == attributes(stock.properties)


@given(st.binary(max_size=40), st.sampled_from([0, 1]))
def test_garbage_publish_is_refused_when_paho_refuses_it(body: bytes, qos: int) -> None:
    try:
        stock = paho_packet.decode_publish(0x30 | (qos << 1), body, V5)
    except MalformedPacket:
        with pytest.raises(MalformedPacket):
            decode_publish(body, qos)
        return
    try:
        topic, mid, _props, payload = decode_publish(body, qos)
    except MalformedPacket:
        return  # we may refuse more (paho reads integers past the property length)
    assert (topic, mid, payload) == (stock.topic, stock.mid, stock.payload)


@pytest.mark.parametrize(
    "body",
    [
        b"\x00\x07",  # success, no reason byte
        b"\x00\x07\x00",  # success, reason byte
        b"\x00\x07\x10",  # no matching subscribers
        b"\x00\x07\x87\x00",  # not authorized, empty properties
        b"\x00\x07\x97" + FastProperties(PacketTypes.PUBACK).pack(),
    ],
)
def test_puback_decodes_as_paho_does(body: bytes) -> None:
    stock = paho_packet.decode_puback(0x40, body, V5)
    mid, reason, props = decode_puback(body)
    assert (mid, reason.value, reason.is_failure) == (stock.mid, stock.reason.value, stock.reason.is_failure)
    assert attributes(props) == attributes(stock.properties)


def test_puback_with_a_reason_string() -> None:
    props = FastProperties(PacketTypes.PUBACK)
    props.ReasonString = "quota"
    body = b"\x00\x09\x97" + props.pack()
    stock = paho_packet.decode_puback(0x40, body, V5)
    mid, reason, got = decode_puback(body)
    assert (mid, reason.value) == (9, 0x97)
    assert attributes(got) == attributes(stock.properties) == {"ReasonString": "quota"}


def test_short_puback_is_malformed() -> None:
    with pytest.raises(MalformedPacket):
        decode_puback(b"\x00")
