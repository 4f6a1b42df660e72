"""The MQTT v5 transport against a real Mosquitto."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mesh.broker import BrokerSettings, TlsOptions
from mesh.brokertools.localbroker import LocalBroker, free_port
from mesh.errors import (
    ConnectError,
    NotAuthorizedError,
    NotConnectedError,
    PacketTooLargeError,
)
from mesh.properties import MessageProperties
from mesh.transport import InboundMessage, MqttTransport
from tests.conftest import TransportFactory
from tests.support import Inbox


def full_properties() -> MessageProperties:
    return MessageProperties(
        client_id="gateway_123",
        user_id="user_abc",
        reply_to="ns/a2a/v1/gateway/response/gateway_123/task-1",
        status_topic="ns/a2a/v1/gateway/status/gateway_123/task-1",
        user_config={"scopes": ["read", "write"], "profile": {"lang": "en"}},
        auth_token="eyJhbGciOi.signed.jwt",
        call_depth=3,
        timestamp_ms=1_774_524_781_150,
        traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        call_chain=["orchestrator", "researcher"],
        extra=[("hop", "a1"), ("hop", "b2"), ("custom", "x")],
        correlation_data=b"task-1",
        content_type="application/json",
        payload_format_utf8=True,
        message_expiry_s=30,
    )


async def test_every_property_and_correlation_data_survive_the_broker(
    make_transport: TransportFactory, namespace: str
) -> None:
    sender, receiver = await make_transport(), await make_transport()
    inbox = Inbox()
    await receiver.subscribe(f"{namespace}/props", inbox)

    sent = full_properties()
    await sender.publish(f"{namespace}/props", b'{"ok":true}', properties=sent)
    [message] = await inbox.wait_for(1)

    got = message.properties
    assert message.payload == b'{"ok":true}'
    assert (got.client_id, got.user_id, got.reply_to, got.status_topic) == (
        sent.client_id,
        sent.user_id,
        sent.reply_to,
        sent.status_topic,
    )
    assert got.user_config == sent.user_config
    assert got.auth_token == sent.auth_token
    assert got.call_depth == 3 and got.timestamp_ms == sent.timestamp_ms
    assert got.traceparent == sent.traceparent
    assert got.call_chain == ["orchestrator", "researcher"]
    assert got.extra == [("hop", "a1"), ("hop", "b2"), ("custom", "x")]  # order and repeats kept
    assert got.correlation_data == b"task-1"
    assert got.content_type == "application/json" and got.payload_format_utf8
    # The broker passes on the remaining lifetime: at most what was sent.
    assert got.message_expiry_s is not None and 0 < got.message_expiry_s <= 30


async def test_a_raising_handler_does_not_stop_delivery(
    make_transport: TransportFactory, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    publisher, subscriber = await make_transport(), await make_transport()
    seen_sync: list[bytes] = []
    seen_async = Inbox()

    def fragile(message: InboundMessage) -> None:
        seen_sync.append(message.payload)
        if message.payload == b"boom":
            raise RuntimeError("handler bug")

    async def fragile_async(message: InboundMessage) -> None:
        seen_async(message)
        if message.payload == b"boom":
            raise RuntimeError("async handler bug")

    await subscriber.subscribe(f"{namespace}/work", fragile)
    await subscriber.subscribe(f"{namespace}/work", fragile_async)
    with caplog.at_level(logging.ERROR, logger="mesh.transport"):
        for payload in (b"boom", b"after-1", b"after-2"):
            await publisher.publish(f"{namespace}/work", payload)
        await seen_async.wait_for(3)
    assert seen_sync == [b"boom", b"after-1", b"after-2"]
    assert seen_async.payloads == [b"boom", b"after-1", b"after-2"]
    assert "handler bug" in caplog.text and "async handler bug" in caplog.text


async def test_overlapping_subscriptions_each_get_exactly_their_copy(
    make_transport: TransportFactory, namespace: str
) -> None:
    publisher, subscriber = await make_transport(), await make_transport()
    wide, narrow = Inbox(), Inbox()
    await subscriber.subscribe(f"{namespace}/#", wide)
    await subscriber.subscribe(f"{namespace}/a/+", narrow)
    await publisher.publish(f"{namespace}/a/b", b"1")
    await publisher.publish(f"{namespace}/c", b"2")
    await wide.wait_for(2)
    await publisher.publish(f"{namespace}/end", b"3")  # ordered after the others
    await wide.wait_for(3)
    assert wide.payloads == [b"1", b"2", b"3"]
    assert narrow.payloads == [b"1"]


async def test_dispatch_by_filter_matching_when_ids_are_not_used(
    make_transport: TransportFactory, namespace: str
) -> None:
    publisher = await make_transport()
    subscriber = await make_transport(use_subscription_ids=False)
    inbox, other = Inbox(), Inbox()
    await subscriber.subscribe(f"{namespace}/x/+", inbox)
    await subscriber.subscribe(f"{namespace}/y/+", other)
    await publisher.publish(f"{namespace}/x/1", b"1")
    await inbox.wait_for(1)
    assert other.messages == []


async def test_unsubscribe_stops_delivery(make_transport: TransportFactory, namespace: str) -> None:
    publisher, subscriber = await make_transport(), await make_transport()
    gone, marker = Inbox(), Inbox()
    sub = await subscriber.subscribe(f"{namespace}/gone", gone)
    await subscriber.subscribe(f"{namespace}/marker", marker)
    await subscriber.unsubscribe(sub)
    await publisher.publish(f"{namespace}/gone", b"lost")
    await publisher.publish(f"{namespace}/marker", b"seen")
    await marker.wait_for(1)
    assert gone.messages == []


async def test_a_burst_of_10000_qos1_messages_arrives_whole(make_transport: TransportFactory, namespace: str) -> None:
    publisher, subscriber = await make_transport(), await make_transport()
    count = 0
    done = asyncio.Event()

    def on_message(_message: InboundMessage) -> None:
        nonlocal count
        count += 1
        if count == 10_000:
            done.set()

    await subscriber.subscribe(f"{namespace}/burst", on_message)
    await asyncio.gather(*(publisher.publish(f"{namespace}/burst", b"x" * 100) for _ in range(10_000)))
    await asyncio.wait_for(done.wait(), 30)
    assert count == 10_000


async def test_queued_publishes_keep_their_order_through_a_small_window(
    make_transport: TransportFactory, namespace: str
) -> None:
    publisher = await make_transport(max_inflight=2)  # most of them wait for room
    subscriber = await make_transport()
    inbox = Inbox()
    await subscriber.subscribe(f"{namespace}/ordered", inbox)
    acks = [publisher.publish_nowait(f"{namespace}/ordered", str(i).encode()) for i in range(300)]
    await asyncio.gather(*acks)
    await inbox.wait_for(300)
    assert inbox.payloads == [str(i).encode() for i in range(300)]


async def test_async_handlers_at_their_bound_pause_reading_and_nothing_is_lost(
    make_transport: TransportFactory, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "mesh.transport.callbacks")
    receiver = await make_transport(max_handler_tasks=5)
    sender = await make_transport()
    started: list[bytes] = []
    release = asyncio.Event()
    five_running = asyncio.Event()

    async def slow(message: InboundMessage) -> None:
        started.append(message.payload)
        if len(started) == 5:
            five_running.set()
        await release.wait()

    await receiver.subscribe(f"{namespace}/slow", slow)
    for i in range(50):
        await sender.publish(f"{namespace}/slow", str(i).encode())
    await asyncio.wait_for(five_running.wait(), 5)
    # The fifth handler paused reading (before it ran): the other 45 wait unread until one ends.
    assert any("reading paused until some finish" in r.getMessage() for r in caplog.records)
    assert len(started) == 5
    release.set()
    async with asyncio.timeout(5):
        while len(started) < 50:
            await asyncio.sleep(0.01)
    assert started == [str(i).encode() for i in range(50)]


async def test_broker_restart_resumes_subscriptions_and_delivers_qos1(
    make_broker: Callable[..., LocalBroker], namespace: str
) -> None:
    broker = make_broker()
    settings = BrokerSettings.from_url(broker.url, reconnect_min_delay_s=0.05, reconnect_max_delay_s=0.5)
    publisher = MqttTransport(settings)
    subscriber = MqttTransport(settings)
    await publisher.connect()
    await subscriber.connect()
    reconnected = asyncio.Event()
    subscriber.add_connect_listener(lambda _session_present: reconnected.set())
    try:
        inbox = Inbox()
        await subscriber.subscribe(f"{namespace}/events", inbox)
        await publisher.publish(f"{namespace}/events", b"before")
        await inbox.wait_for(1)

        broker.stop()
        broker.start()
        await asyncio.wait_for(reconnected.wait(), 10)
        await publisher.wait_connected(10)
        for i in range(20):
            await publisher.publish(f"{namespace}/events", f"after-{i}".encode(), timeout=10)
        await inbox.wait_for(21, timeout=10)
        assert inbox.payloads == [b"before"] + [f"after-{i}".encode() for i in range(20)]
    finally:
        await publisher.close()
        await subscriber.close()


async def test_qos1_published_during_an_outage_reaches_a_persistent_session(
    make_broker: Callable[..., LocalBroker], namespace: str, broker_dir: Path
) -> None:
    store = broker_dir
    broker = make_broker(f"persistence true\npersistence_location {store}/")
    fast: dict[str, Any] = {"reconnect_min_delay_s": 0.05, "reconnect_max_delay_s": 0.2}
    publisher = MqttTransport(BrokerSettings.from_url(broker.url, **fast))
    # A stable client id and a session expiry: the broker keeps the subscription over the restart.
    subscriber = MqttTransport(
        BrokerSettings.from_url(broker.url, session_expiry_s=300, **fast), client_id=f"sub-{namespace[-12:]}"
    )
    sessions: list[bool] = []
    subscriber.add_connect_listener(sessions.append)
    publisher_lost = asyncio.Event()
    publisher.add_disconnect_listener(lambda _reason: publisher_lost.set())
    await publisher.connect()
    await subscriber.connect()
    try:
        inbox = Inbox()
        await subscriber.subscribe(f"{namespace}/jobs", inbox)
        broker.stop()
        await asyncio.wait_for(publisher_lost.wait(), 5)
        with pytest.raises(NotConnectedError):
            await publisher.wait_connected(0)
        during = asyncio.ensure_future(publisher.publish(f"{namespace}/jobs", b"sent-during-outage", timeout=15))
        broker.start()
        await during  # paho kept it and the broker acknowledged it after the reconnect
        await publisher.publish(f"{namespace}/jobs", b"sent-after", timeout=15)
        await inbox.wait_for(2, timeout=15)
        assert inbox.payloads == [b"sent-during-outage", b"sent-after"]
        assert sessions[-1] is True  # resumed the stored session rather than a new one
    finally:
        await publisher.close()
        await subscriber.close()


class _NoThreads(concurrent.futures.ThreadPoolExecutor):
    def submit(self, *_args: Any, **_kwargs: Any) -> concurrent.futures.Future[Any]:
        raise AssertionError("the connect asked for a thread")


async def test_a_plain_tcp_connect_and_its_reconnect_need_no_thread(
    make_broker: Callable[..., LocalBroker], namespace: str
) -> None:
    """1,000 agents starting at once would queue 1,000 blocking connects on a few threads."""
    broker = make_broker()
    settings = BrokerSettings.from_url(f"mqtt://127.0.0.1:{broker.port}", reconnect_min_delay_s=0.05)
    asyncio.get_running_loop().set_default_executor(_NoThreads())
    transport = MqttTransport(settings)
    inbox = Inbox()
    lost = asyncio.Event()
    await transport.connect()
    try:
        await transport.subscribe(f"{namespace}/t", inbox)
        transport.add_disconnect_listener(lambda _reason: lost.set())
        broker.stop()
        await asyncio.wait_for(lost.wait(), 10)
        broker.start()
        await transport.wait_connected(10)
        await transport.publish(f"{namespace}/t", b"after", qos=1)
        [message] = await inbox.wait_for(1)
        assert message.payload == b"after"
    finally:
        await transport.close()


async def test_connection_refused_names_the_broker() -> None:
    url = f"mqtt://127.0.0.1:{free_port()}"
    transport = MqttTransport(BrokerSettings.from_url(url))
    with pytest.raises(ConnectError, match=rf"{url}.*(Connection refused|refused)"):
        await transport.connect()


async def test_oversize_publish_is_refused_before_sending(
    make_broker: Callable[..., LocalBroker], namespace: str
) -> None:
    broker = make_broker("max_packet_size 2000")
    transport = MqttTransport(BrokerSettings.from_url(broker.url))
    await transport.connect()
    try:
        assert transport.max_packet_size == 2000
        with pytest.raises(PacketTooLargeError, match=r"at most 2000"):
            await transport.publish(f"{namespace}/big", b"x" * 5000)
        await transport.publish(f"{namespace}/small", b"x" * 100)  # the connection is still fine
        assert transport.is_connected
    finally:
        await transport.close()


async def test_acl_refusal_is_raised_with_the_broker_reason(
    make_broker: Callable[..., LocalBroker], namespace: str, broker_dir: Path
) -> None:
    acl = broker_dir / "acl"
    acl.write_text(f"topic readwrite {namespace}/open/#\n")
    broker = make_broker(f"acl_file {acl}")
    transport = MqttTransport(BrokerSettings.from_url(broker.url))
    await transport.connect()
    try:
        await transport.publish(f"{namespace}/open/ok", b"fine")
        with pytest.raises(NotAuthorizedError, match=r"closed/no.*Not authorized") as caught:
            await transport.publish(f"{namespace}/closed/no", b"denied")
        assert caught.value.reason_code == 0x87 and caught.value.topic == f"{namespace}/closed/no"
    finally:
        await transport.close()


async def test_credentials_in_the_url(
    make_broker: Callable[..., LocalBroker], namespace: str, broker_dir: Path
) -> None:
    passwd = broker_dir / "passwd"
    subprocess.run(["mosquitto_passwd", "-c", "-b", str(passwd), "alice", "s3cret/pw"], check=True)
    passwd.chmod(0o644)
    broker = make_broker(f"allow_anonymous false\npassword_file {passwd}")
    good = MqttTransport(BrokerSettings.from_url(f"mqtt://alice:s3cret%2Fpw@127.0.0.1:{broker.port}"))
    await good.connect()
    await good.publish(f"{namespace}/hello", b"hi")
    await good.close()
    bad = MqttTransport(BrokerSettings.from_url(f"mqtt://alice:wrong@127.0.0.1:{broker.port}"))
    with pytest.raises(
        ConnectError, match=r"refused the connection of broker user 'alice': (Not authorized|Bad user name or password)"
    ):
        await bad.connect()


async def test_mqtts_with_a_private_ca(
    make_broker: Callable[..., LocalBroker], namespace: str, broker_dir: Path
) -> None:
    certs = broker_dir
    _make_certificates(certs)
    tls_port = free_port()
    make_broker(
        textwrap.dedent(
            f"""
            listener {tls_port} 127.0.0.1
            certfile {certs / "server.crt"}
            keyfile {certs / "server.key"}
            """
        )
    )
    settings = BrokerSettings.from_url(f"mqtts://localhost:{tls_port}", tls=TlsOptions(ca_file=str(certs / "ca.crt")))
    a, b = MqttTransport(settings), MqttTransport(settings)
    await a.connect()
    await b.connect()
    try:
        inbox = Inbox()
        await b.subscribe(f"{namespace}/tls", inbox)
        for i in range(200):  # enough to leave decrypted bytes pending in the TLS layer
            await a.publish(f"{namespace}/tls", f"m{i}".encode())
        await inbox.wait_for(200)
        assert inbox.payloads == [f"m{i}".encode() for i in range(200)]
    finally:
        await a.close()
        await b.close()


async def test_will_is_published_when_the_process_dies(
    make_transport: TransportFactory, broker_url: str, namespace: str
) -> None:
    watcher = await make_transport()
    inbox = Inbox()
    await watcher.subscribe(f"{namespace}/presence/+", inbox)
    script = textwrap.dedent(
        f"""
        import asyncio, os
        from mesh.broker import BrokerSettings
        from mesh.transport import MqttTransport, Will
        async def main():
            t = MqttTransport(BrokerSettings.from_url({broker_url!r}),
                              will=Will({namespace + "/presence/dead"!r}, b"gone", retain=False))
            await t.connect()
            await t.publish({namespace + "/presence/alive"!r}, b"up")
            os._exit(0)  # no DISCONNECT: the broker must send the will
        asyncio.run(main())
        """
    )
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script)
    assert await proc.wait() == 0
    messages = await inbox.wait_for(2)
    assert [(m.topic.rsplit("/", 1)[1], m.payload) for m in messages] == [("alive", b"up"), ("dead", b"gone")]


def _make_certificates(d: Path) -> None:
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
        "-keyout",
        str(d / "ca.key"),
        "-out",
        str(d / "ca.crt"),
    )
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        "/CN=localhost",
        "-keyout",
        str(d / "server.key"),
        "-out",
        str(d / "server.csr"),
    )
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run(
        "x509",
        "-req",
        "-in",
        str(d / "server.csr"),
        "-CA",
        str(d / "ca.crt"),
        "-CAkey",
        str(d / "ca.key"),
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        str(d / "ext.cnf"),
        "-out",
        str(d / "server.crt"),
    )
    for name in ("server.key", "server.crt", "ca.crt"):
        (d / name).chmod(0o644)
