"""One live instance per agent name: a second one refuses to start and clears nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agents import AgentSettings
from agents.service import AgentService
from mesh.a2a import Task, TaskState
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.discovery import ownership
from mesh.discovery.presence import CardPresence
from mesh.errors import AgentNameTakenError
from mesh.transport import MqttTransport
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent, TransportFactory
from tests.support import Inbox, publish_stale_card
from topics import get_agent_discovery_topic, get_agent_request_topic


async def heard_on(watcher: MqttTransport, inbox: Inbox, topic: str) -> list[bytes]:
    """What ``inbox`` got on ``topic`` until now: a sentinel on another topic of the same
    connection, sent after everything acknowledged so far, arrives after it."""
    sentinel = topic.replace("/a2a/v1/discovery/", "/test/")  # off the discovery tree: registries ignore it
    await watcher.subscribe(sentinel, inbox)
    await watcher.publish(sentinel, b"end")
    await inbox.wait_until_topic(sentinel)
    return [m.payload for m in inbox.messages if m.topic == topic]


async def assert_answers(client: MeshClient, text: str) -> None:
    task = await client.send("echo", text)
    assert isinstance(task, Task) and task.status.state is TaskState.completed


async def test_a_second_instance_is_refused_and_leaves_the_live_card_alone(
    serve_agent: ServeAgent,
    make_transport: TransportFactory,
    broker_settings: BrokerSettings,
    namespace: str,
    client: MeshClient,
) -> None:
    await serve_agent(Echo())
    watcher, cards = await make_transport(), Inbox()
    card_topic = get_agent_discovery_topic(namespace, "echo")
    await watcher.subscribe(card_topic, cards)
    [card] = await cards.wait_for(1)  # the live instance's retained card
    assert card.retain and card.payload.startswith(b"{")

    second = AgentService(Echo(), broker=broker_settings, namespace=namespace)
    with pytest.raises(AgentNameTakenError) as refused:
        await second.start()
    message = str(refused.value)
    assert f"agent 'echo' is already running on namespace {namespace!r} at {broker_settings.url}" in message
    assert "stop the other instance" in message and "shared_subscription: true" in message
    assert not second.transport.is_connected  # refused before its own connection (and will) existed
    await second.stop()  # nothing to stop: above all, no empty card

    heard = await heard_on(watcher, cards, card_topic)
    assert heard[0] == card.payload and all(p.startswith(b"{") for p in heard)  # no "gone" was published
    await assert_answers(client, "still here")


async def test_a_stale_card_nobody_serves_does_not_block_a_start(
    serve_agent: ServeAgent, make_transport: TransportFactory, namespace: str, client: MeshClient
) -> None:
    await publish_stale_card(await make_transport(), namespace, "echo")  # PUBACK 0x10 for the probe
    await serve_agent(Echo())
    await assert_answers(client, "took over")


async def test_a_stale_card_whose_subscriber_never_answers_does_not_block_a_start(
    serve_agent: ServeAgent, make_transport: TransportFactory, namespace: str, client: MeshClient
) -> None:
    # A dead instance's persistent session still holds the subscription: the broker takes the
    # probe's request, nobody answers it.
    dead = await make_transport()
    await dead.subscribe(get_agent_request_topic(namespace, "echo"), Inbox())
    await publish_stale_card(dead, namespace, "echo")
    await serve_agent(Echo(), AgentSettings(name_check_timeout_s=0.5))
    await assert_answers(client, "after the timeout")


async def test_replicas_with_a_shared_subscription_both_start(
    serve_agent: ServeAgent, namespace: str, client: MeshClient
) -> None:
    replica = AgentSettings(shared_subscription=True)
    first = await serve_agent(Echo(), replica)
    second = await serve_agent(Echo(), replica)
    assert first.transport.is_connected and second.transport.is_connected
    for i in range(4):
        await assert_answers(client, f"request {i}")


async def test_a_card_presence_that_never_published_clears_nothing(
    make_transport: TransportFactory, namespace: str
) -> None:
    owner, watcher, cards = await make_transport(), await make_transport(), Inbox()
    card_topic = get_agent_discovery_topic(namespace, "echo")
    await publish_stale_card(owner, namespace, "echo")  # someone else's card
    await watcher.subscribe(card_topic, cards)
    [card] = await cards.wait_for(1)

    presence = CardPresence(await make_transport(), card_topic, lambda: b"{}")
    await presence.stop()  # never started: not its card to clear
    assert await heard_on(watcher, cards, card_topic) == [card.payload]


async def test_agents_started_together_share_one_probe_and_get_each_its_own_answer(
    serve_agent: ServeAgent,
    make_transport: TransportFactory,
    broker_settings: BrokerSettings,
    namespace: str,
    client: MeshClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As ``mesh run`` starts them: in one gather, on one broker identity."""
    await serve_agent(Echo())  # "echo" is live
    await publish_stale_card(await make_transport(), namespace, "stale")  # nobody serves "stale"
    probes: list[MqttTransport] = []

    class CountedTransport(MqttTransport):  # the real transport, counted
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            probes.append(self)

    monkeypatch.setattr(ownership, "MqttTransport", CountedTransport)
    names = ["echo", "stale", *(f"fresh-{i}" for i in range(6))]
    services = [AgentService(Echo(name=name), broker=broker_settings, namespace=namespace) for name in names]
    results = await asyncio.gather(*(s.start() for s in services), return_exceptions=True)
    try:
        assert isinstance(results[0], AgentNameTakenError) and not services[0].transport.is_connected
        assert results[1:] == [None] * 7
        # One probe for the eight names, then one of its own for each name that has a card.
        assert len(probes) == 3 and not any(p.is_connected for p in probes)
        for name in names[1:]:
            task = await client.send(name, f"hello {name}")
            assert isinstance(task, Task) and task.status.state is TaskState.completed
        await assert_answers(client, "the live one still answers")
    finally:
        await asyncio.gather(*(s.stop() for s in services))
