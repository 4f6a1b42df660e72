"""The Transport contract: the same behaviours from MqttTransport (real Mosquitto) and MemoryTransport.

Every test here runs twice, once per implementation, so the in-memory double agent authors
test with cannot drift from the transport the mesh runs on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from mesh.errors import NoSubscribersError
from mesh.transport import InboundMessage, MemoryBroker, MemoryTransport, Transport
from tests.mesh.transport.test_transport import full_properties
from tests.support import Inbox

Connect = Callable[..., Awaitable[Transport]]


@pytest.fixture
async def make_memory_transport() -> AsyncIterator[Connect]:
    """Connected MemoryTransports on one hub, closed after the test."""
    hub = MemoryBroker()
    made: list[MemoryTransport] = []

    async def make(**kwargs: object) -> Transport:
        transport = MemoryTransport(hub, **kwargs)  # type: ignore[arg-type]
        await transport.connect()
        made.append(transport)
        return transport

    yield make
    for transport in made:
        await transport.close()


@pytest.fixture(params=["mqtt", "memory"])
def connect(request: pytest.FixtureRequest) -> Connect:
    """Connected transports of the parametrized kind: a real Mosquitto's, or a MemoryBroker's."""
    fixture = "make_transport" if request.param == "mqtt" else "make_memory_transport"
    factory: Connect = request.getfixturevalue(fixture)
    return factory


async def test_it_is_a_transport(connect: Connect) -> None:
    transport = await connect()
    assert isinstance(transport, Transport)
    assert transport.is_connected
    await transport.wait_connected(1)


async def test_publish_subscribe_round_trip_keeps_every_property(connect: Connect, namespace: str) -> None:
    sender, receiver = await connect(), await connect()
    inbox = Inbox()
    await receiver.subscribe(f"{namespace}/props", inbox)
    sent = full_properties()
    await sender.publish(f"{namespace}/props", '{"ok":true}', properties=sent)
    [message] = await inbox.wait_for(1)
    assert (message.topic, message.payload, message.qos) == (f"{namespace}/props", b'{"ok":true}', 1)
    assert not message.retain
    got = message.properties
    assert got is not sent
    assert (got.client_id, got.user_id, got.reply_to, got.status_topic) == (
        sent.client_id,
        sent.user_id,
        sent.reply_to,
        sent.status_topic,
    )
    assert (got.user_config, got.auth_token, got.call_depth, got.timestamp_ms) == (
        sent.user_config,
        sent.auth_token,
        sent.call_depth,
        sent.timestamp_ms,
    )
    assert got.call_chain == sent.call_chain and got.extra == sent.extra and got.traceparent == sent.traceparent
    assert got.correlation_data == b"task-1"
    assert got.content_type == "application/json" and got.payload_format_utf8
    assert got.message_expiry_s is not None and 0 < got.message_expiry_s <= 30


async def test_wildcard_filters_each_get_their_copy(connect: Connect, namespace: str) -> None:
    publisher, subscriber = await connect(), await connect()
    everything, one_level, exact = Inbox(), Inbox(), Inbox()
    await subscriber.subscribe(f"{namespace}/#", everything)
    await subscriber.subscribe(f"{namespace}/a/+/c", one_level)
    await subscriber.subscribe(f"{namespace}/a/b/c", exact)
    for topic in ("a/b/c", "a/x/c", "a/b", "a/b/c/d", "end"):
        await publisher.publish(f"{namespace}/{topic}", topic)
    await everything.wait_for(5)
    assert everything.payloads == [b"a/b/c", b"a/x/c", b"a/b", b"a/b/c/d", b"end"]
    assert one_level.payloads == [b"a/b/c", b"a/x/c"]
    assert exact.payloads == [b"a/b/c"]


async def test_messages_arrive_in_publish_order(connect: Connect, namespace: str) -> None:
    publisher, subscriber = await connect(), await connect()
    inbox = Inbox()
    await subscriber.subscribe(f"{namespace}/ordered", inbox)
    acks = [publisher.publish_nowait(f"{namespace}/ordered", str(i)) for i in range(100)]
    await asyncio.gather(*acks)
    await inbox.wait_for(100)
    assert inbox.payloads == [str(i).encode() for i in range(100)]


async def test_retained_messages_reach_new_subscribers_until_cleared(connect: Connect, namespace: str) -> None:
    publisher, early, late, later = await connect(), await connect(), await connect(), await connect()
    topic = f"{namespace}/card/a"
    await publisher.publish(topic, b"card", retain=True)

    first = Inbox()
    await late.subscribe(f"{namespace}/card/+", first)
    [message] = await first.wait_for(1)
    assert (message.topic, message.payload, message.retain) == (topic, b"card", True)

    watching = Inbox()
    await early.subscribe(topic, watching)
    await watching.wait_for(1)  # the retained card
    await publisher.publish(topic, b"", retain=True)  # clears it...
    messages = await watching.wait_for(2)
    assert messages[1].payload == b""  # ...and current subscribers see "gone"

    after = Inbox()
    await later.subscribe(f"{namespace}/card/#", after)
    await publisher.publish(f"{namespace}/card/marker", b"marker")
    await after.wait_for(1)
    assert after.payloads == [b"marker"]  # nothing retained any more


async def test_a_shared_subscription_spreads_messages_over_its_members(connect: Connect, namespace: str) -> None:
    publisher, first, second = await connect(), await connect(), await connect()
    delivered = Inbox()
    taken: dict[str, list[bytes]] = {"first": [], "second": []}

    def member(name: str) -> Callable[[InboundMessage], None]:
        def handler(message: InboundMessage) -> None:
            taken[name].append(message.payload)
            delivered(message)

        return handler

    await first.subscribe(f"$share/workers/{namespace}/jobs", member("first"))
    await second.subscribe(f"$share/workers/{namespace}/jobs", member("second"))
    for i in range(10):
        await publisher.publish(f"{namespace}/jobs", str(i))
    await delivered.wait_for(10)
    await publisher.publish(f"{namespace}/jobs", b"last")
    await delivered.wait_for(11)
    assert sorted(delivered.payloads[:10], key=int) == [str(i).encode() for i in range(10)]  # each exactly once
    assert len(delivered.messages) == 11
    assert taken["first"] and taken["second"]  # and both members took some


async def test_no_local_skips_the_publishers_own_subscription(connect: Connect, namespace: str) -> None:
    me, other = await connect(), await connect()
    inbox = Inbox()
    await me.subscribe(f"{namespace}/chat", inbox, no_local=True)
    await me.publish(f"{namespace}/chat", b"mine")
    await other.publish(f"{namespace}/chat", b"theirs")
    await inbox.wait_for(1)
    await me.publish(f"{namespace}/chat", b"mine again")
    await other.publish(f"{namespace}/chat", b"theirs again")
    await inbox.wait_for(2)
    assert inbox.payloads == [b"theirs", b"theirs again"]


async def test_unsubscribe_stops_delivery(connect: Connect, namespace: str) -> None:
    publisher, subscriber = await connect(), await connect()
    gone, kept, marker = Inbox(), Inbox(), Inbox()
    subscription = await subscriber.subscribe(f"{namespace}/shared-filter", gone)
    await subscriber.subscribe(f"{namespace}/shared-filter", kept)  # same filter, another handler
    await subscriber.subscribe(f"{namespace}/marker", marker)
    await publisher.publish(f"{namespace}/shared-filter", b"1")
    await gone.wait_for(1)
    await subscriber.unsubscribe(subscription)
    await publisher.publish(f"{namespace}/shared-filter", b"2")
    await publisher.publish(f"{namespace}/marker", b"end")
    await marker.wait_for(1)
    await kept.wait_for(2)
    assert gone.payloads == [b"1"]
    assert kept.payloads == [b"1", b"2"]


async def test_raising_handlers_do_not_stop_delivery(
    connect: Connect, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    publisher, subscriber = await connect(), await connect()
    seen: list[bytes] = []
    seen_async = Inbox()

    def fragile(message: InboundMessage) -> None:
        seen.append(message.payload)
        raise RuntimeError(f"handler bug on {message.payload!r}")

    async def fragile_async(message: InboundMessage) -> None:
        seen_async(message)
        raise RuntimeError("async handler bug")

    marker = Inbox()
    await subscriber.subscribe(f"{namespace}/work", fragile)
    await subscriber.subscribe(f"{namespace}/+", fragile_async)
    await subscriber.subscribe(f"{namespace}/marker/end", marker)
    with caplog.at_level(logging.ERROR, logger="mesh.transport"):
        for payload in (b"one", b"two", b"three"):
            await publisher.publish(f"{namespace}/work", payload)
        await seen_async.wait_for(3)
        # The failed tasks are logged when they end, which is after they recorded the message.
        await publisher.publish(f"{namespace}/marker/end", b"end")
        await marker.wait_for(1)
    assert seen == [b"one", b"two", b"three"]
    assert "handler bug on b'three'" in caplog.text and "async handler bug" in caplog.text


async def test_async_handlers_run_off_the_delivery_path(connect: Connect, namespace: str) -> None:
    publisher, subscriber = await connect(), await connect()
    second_arrived = asyncio.Event()
    finished = Inbox()

    async def handler(message: InboundMessage) -> None:
        if message.payload == b"first":
            await second_arrived.wait()  # would deadlock if handlers were awaited in turn
        else:
            second_arrived.set()
        finished(message)

    await subscriber.subscribe(f"{namespace}/async", handler)
    await publisher.publish(f"{namespace}/async", b"first")
    await publisher.publish(f"{namespace}/async", b"second")
    await finished.wait_for(2)
    assert finished.payloads == [b"second", b"first"]


async def test_connect_listeners_hear_of_the_connection_and_close_is_final(connect: Connect, namespace: str) -> None:
    transport = await connect()
    heard = asyncio.Event()
    transport.add_connect_listener(lambda session_present: heard.set())
    await transport.close()
    assert not transport.is_connected
    assert not heard.is_set()  # registered after connecting: only later (re)connections call it


async def test_require_subscriber_fails_only_a_publish_nobody_gets(connect: Connect, namespace: str) -> None:
    sender, receiver = await connect(), await connect()
    await receiver.subscribe(f"{namespace}/served", Inbox())
    with pytest.raises(NoSubscribersError, match=rf"nobody subscribes to '{namespace}/nobody'.*0x10") as caught:
        await sender.publish_nowait(f"{namespace}/nobody", b"x", require_subscriber=True)
    assert (caught.value.topic, caught.value.reason_code) == (f"{namespace}/nobody", 0x10)
    await sender.publish_nowait(f"{namespace}/served", b"x", require_subscriber=True)
    await sender.publish_nowait(f"{namespace}/nobody", b"x")  # not asked: nobody listening is no error
    await sender.publish(f"{namespace}/nobody", b"x")
