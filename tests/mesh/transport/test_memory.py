"""What MemoryTransport adds beyond the shared contract (tests/mesh/transport/test_contract.py)."""

from __future__ import annotations

import asyncio

import pytest

from mesh.errors import NotConnectedError
from mesh.properties import MessageProperties
from mesh.transport import InboundMessage, MemoryBroker, MemoryTransport, Will
from tests.support import Inbox


async def connected(hub: MemoryBroker, **kwargs: object) -> MemoryTransport:
    transport = MemoryTransport(hub, **kwargs)  # type: ignore[arg-type]
    await transport.connect()
    return transport


async def test_handlers_never_run_inside_publish() -> None:
    hub = MemoryBroker()
    publisher, subscriber = await connected(hub), await connected(hub)
    inbox = Inbox()
    await subscriber.subscribe("ns/x", inbox)
    ack = publisher.publish_nowait("ns/x", b"1")
    await publisher.publish("ns/x", b"2")
    assert ack.done() and inbox.messages == []  # scheduled, not yet delivered
    await inbox.wait_for(2)
    assert inbox.payloads == [b"1", b"2"]


async def test_a_dropped_connection_publishes_its_will_and_a_closed_one_does_not() -> None:
    hub = MemoryBroker()
    watcher = await connected(hub)
    inbox = Inbox()
    await watcher.subscribe("ns/cards/+", inbox)
    will = Will(topic="ns/cards/a", payload=b"", retain=True)
    crashing = await connected(hub, client_id="a", will=will)
    closing = await connected(hub, client_id="b", will=Will(topic="ns/cards/b", payload=b"", retain=True))
    lost: list[str] = []
    crashing.add_disconnect_listener(lost.append)
    await crashing.publish("ns/cards/a", b"card-a", retain=True)

    await closing.close()
    await hub.drop(crashing)
    messages = await inbox.wait_for(2)
    assert [(m.topic, m.payload) for m in messages] == [("ns/cards/a", b"card-a"), ("ns/cards/a", b"")]
    assert hub.retained("ns/cards/a") is None  # the empty retained will cleared the card
    assert lost == ["connection lost"] and not crashing.is_connected
    with pytest.raises(NotConnectedError, match="is not connected"):
        await crashing.publish("ns/x", b"late")
    with pytest.raises(ValueError, match="'a' is not connected"):
        await hub.drop(crashing)


async def test_one_client_id_per_hub() -> None:
    hub = MemoryBroker()
    first = await connected(hub, client_id="same")
    with pytest.raises(ValueError, match="client id 'same' is already connected to memory://"):
        await connected(hub, client_id="same")
    assert hub.client("same") is first
    await first.close()
    assert hub.client("same") is None
    await connected(hub, client_id="same")  # free again


async def test_publishing_before_connect_or_after_close_is_refused() -> None:
    hub = MemoryBroker()
    transport = MemoryTransport(hub, client_id="c")
    with pytest.raises(NotConnectedError, match="call connect"):
        await transport.publish("ns/x", b"")
    await transport.connect()
    await transport.close()
    with pytest.raises(NotConnectedError):
        transport.publish_nowait("ns/x", b"")
    with pytest.raises(NotConnectedError, match="make a new one"):
        await transport.connect()


async def test_bad_topics_and_filters_are_refused_as_on_a_broker() -> None:
    transport = await connected(MemoryBroker())
    with pytest.raises(ValueError):
        await transport.publish("ns/+/x", b"")
    with pytest.raises(ValueError):
        await transport.subscribe("ns/#/x", Inbox())
    with pytest.raises(ValueError, match="no_local is a protocol error"):
        await transport.subscribe("$share/g/ns/x", Inbox(), no_local=True)


async def test_qos_is_the_lower_of_publish_and_subscription() -> None:
    hub = MemoryBroker()
    publisher, subscriber = await connected(hub), await connected(hub)
    at_most_once, at_least_once = Inbox(), Inbox()
    await subscriber.subscribe("ns/q0", at_most_once, qos=0)
    await subscriber.subscribe("ns/q1", at_least_once)
    await publisher.publish("ns/q0", b"", qos=1)
    await publisher.publish("ns/q1", b"", qos=0)
    await publisher.publish("ns/q1", b"", qos=1)
    await at_least_once.wait_for(2)
    assert [m.qos for m in at_most_once.messages + at_least_once.messages] == [0, 0, 1]


async def test_received_properties_are_the_receivers_own() -> None:
    hub = MemoryBroker()
    publisher, first, second = await connected(hub), await connected(hub), await connected(hub)
    one, two = Inbox(), Inbox()
    await first.subscribe("ns/p", one)
    await second.subscribe("ns/p", two)
    sent = MessageProperties(user_config={"a": [1]}, call_chain=["x"])
    await publisher.publish("ns/p", b"", properties=sent)
    [a], [b] = await one.wait_for(1), await two.wait_for(1)
    assert a.properties == b.properties == sent
    assert a.properties is not b.properties and a.properties.user_config is not sent.user_config


async def test_close_cancels_running_handler_tasks() -> None:
    hub = MemoryBroker()
    publisher, subscriber = await connected(hub), await connected(hub)
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def slow(_message: InboundMessage) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    await subscriber.subscribe("ns/slow", slow)
    await publisher.publish("ns/slow", b"")
    await asyncio.wait_for(started.wait(), 5)
    await subscriber.close()
    assert cancelled.is_set()


async def test_a_retained_message_keeps_the_properties_it_was_sent_with() -> None:
    hub = MemoryBroker()
    publisher, subscriber = await connected(hub), await connected(hub)
    sent = MessageProperties(content_type="application/json", extra=[("v", "1")])
    await publisher.publish("ns/card", b"{}", retain=True, properties=sent)
    sent.extra.append(("v", "2"))  # the sender reuses its object
    inbox = Inbox()
    await subscriber.subscribe("ns/card", inbox)
    [message] = await inbox.wait_for(1)
    assert message.retain and message.properties.extra == [("v", "1")]
    assert message.properties.content_type == "application/json"
