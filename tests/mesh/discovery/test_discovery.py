"""Discovery in O(changes): one shared registry per process, started on need; no idle traffic;
liveness by keepalive + will; a TTL only for SAM heartbeats."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

import pytest

from agents import AgentSettings
from agents.service import AgentService
from mesh.a2a import Task
from mesh.broker import BrokerSettings
from mesh.brokertools.localbroker import LocalBroker, default_config_path
from mesh.client import MeshClient
from mesh.discovery import lease_registry, rollcall, shared_registry_count
from mesh.discovery.registry import DiscoveryRegistry, RegistryEvent
from mesh.discovery.rollcall import rollcall_payload
from mesh.transport import MqttTransport
from tests.agents.service_agents import Echo, Relay
from tests.conftest import ServeAgent, TransportFactory
from tests.support import Inbox, precise_keepalive_mosquitto, start_agent_process, wait_until
from topics import get_discovery_rollcall_topic, get_rollcall_topic

#: The whole second of Mosquitto's keepalive clock, its loop's 100 ms tick and the will's delivery.
BROKER_CLOCK_SLACK_S = 1.5


class Watching(Echo):
    """An echo that reads ``ctx.peers()``: its registry starts with it."""

    uses_discovery = True


def count_discovery_subscriptions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every subscription to a discovery tree made from now on by any MqttTransport of the process."""
    made: list[str] = []
    original = MqttTransport.subscribe

    async def subscribe(self: MqttTransport, topic_filter: str, *args: Any, **kwargs: Any) -> Any:
        if topic_filter.endswith("/discovery/#"):
            made.append(topic_filter)
        return await original(self, topic_filter, *args, **kwargs)

    monkeypatch.setattr(MqttTransport, "subscribe", subscribe)
    return made


async def test_fifty_agents_share_one_registry_with_one_subscription(
    serve_agent: ServeAgent, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    subscriptions = count_discovery_subscriptions(monkeypatch)
    services = await asyncio.gather(
        *(serve_agent(Watching(name=f"w{i}"), AgentSettings(task_store=":memory:")) for i in range(50))
    )
    assert subscriptions == [f"{namespace}/a2a/v1/discovery/#"]
    assert shared_registry_count() == 1
    registry = services[0].discovery.current
    assert registry is not None and all(s.discovery.current is registry for s in services)
    changed = asyncio.Event()
    registry.add_listener(lambda _e: changed.set())
    await wait_until(lambda: len(registry.agents()) == 50, changed, 10, lambda: f"{len(registry.agents())} cards")
    for service in services[:49]:
        await service.stop()
    assert shared_registry_count() == 1  # the last one still holds it
    await services[49].stop()
    assert shared_registry_count() == 0


async def test_agents_of_one_process_hear_roll_calls_on_one_subscription(
    broker_settings: BrokerSettings,
    namespace: str,
    make_transport: TransportFactory,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One roll-call delivery per process, not per agent; each agent still answers on its own
    connection, also once the agent that started first has stopped (mesh.discovery.rollcall)."""
    topic = get_rollcall_topic(namespace)
    topics = (topic, get_discovery_rollcall_topic(namespace))  # today's, and the previous release's
    subscribed: list[str] = []
    original = MqttTransport.subscribe

    async def subscribe(self: MqttTransport, topic_filter: str, *args: Any, **kwargs: Any) -> Any:
        if topic_filter in topics:
            subscribed.append(self.client_id)
        return await original(self, topic_filter, *args, **kwargs)

    monkeypatch.setattr(MqttTransport, "subscribe", subscribe)
    settings = AgentSettings(task_store=":memory:")
    echoes = [
        AgentService(Echo(name=f"e{i}"), broker=broker_settings, namespace=namespace, settings=settings)
        for i in range(4)
    ]
    await asyncio.gather(*(e.start() for e in echoes))
    caller = await make_transport()
    try:
        assert len(subscribed) == 2 and len(set(subscribed)) == 1  # both topics, on one connection
        assert subscribed[0] not in {e.transport.client_id for e in echoes}

        async def roll_call(expected: list[AgentService]) -> None:
            before = [e.presence.rollcall.answered for e in expected]
            await caller.publish(topic, rollcall_payload(0.05))
            async with asyncio.timeout(10):
                while [e.presence.rollcall.answered for e in expected] != [n + 1 for n in before]:
                    await asyncio.sleep(0.02)

        await roll_call(echoes)
        await echoes[0].stop()  # the first to start leaves: the others still hear roll calls
        await roll_call(echoes[1:])
        assert len(subscribed) == 2
    finally:
        await asyncio.gather(*(e.stop() for e in echoes))
    assert not rollcall._hearings  # the last one out closed the hearing's connection


async def echo_answering_roll_calls(
    broker_settings: BrokerSettings, namespace: str, changed: asyncio.Event
) -> tuple[AgentService, rollcall.RollCallAnswers, list[float]]:
    """An echo agent, its roll-call answers, and when each answer started (loop time; ``changed``
    is set at each)."""
    echo = AgentService(
        Echo(name="e"), broker=broker_settings, namespace=namespace, settings=AgentSettings(task_store=":memory:")
    )
    await echo.start()
    answers = echo.presence.rollcall
    started: list[float] = []
    republish = answers._republish

    async def timed() -> None:
        started.append(asyncio.get_running_loop().time())
        changed.set()
        await republish()

    answers._republish = timed
    return echo, answers, started


async def test_a_roll_call_is_answered_no_sooner_than_its_minimum_delay(
    broker_settings: BrokerSettings, namespace: str, make_transport: TransportFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even an answer already due for an earlier roll call: a watcher on another node of a
    cluster subscribed just before it called, and its subscription may reach this node late."""
    monkeypatch.setattr(rollcall.random, "uniform", lambda low, high: low)  # as early as allowed
    changed = asyncio.Event()
    echo, _, started = await echo_answering_roll_calls(broker_settings, namespace, changed)
    caller = await make_transport()
    topic = get_rollcall_topic(namespace)
    try:
        for _ in range(2):
            sent, answers_before = asyncio.get_running_loop().time(), len(started)
            await caller.publish(topic, rollcall_payload(0.05))
            await wait_until(lambda: len(started) > answers_before, changed, 5)  # noqa: B023 - awaited here
            assert started[-1] - sent >= rollcall.ROLLCALL_MIN_DELAY_S
    finally:
        await echo.stop()


async def test_a_roll_call_during_an_answer_gets_an_answer_of_its_own(
    broker_settings: BrokerSettings, namespace: str, make_transport: TransportFactory
) -> None:
    changed = asyncio.Event()
    echo, answers, started = await echo_answering_roll_calls(broker_settings, namespace, changed)
    held = asyncio.Event()
    timed = answers._republish

    async def slow() -> None:
        await timed()
        await held.wait()  # the first answer is on its way while the second roll call comes

    answers._republish = slow
    heard: list[float] = []
    on_rollcall = answers._on_rollcall

    def hear(message: Any) -> None:
        heard.append(asyncio.get_running_loop().time())
        changed.set()
        on_rollcall(message)

    answers._on_rollcall = hear  # type: ignore[method-assign]
    caller = await make_transport()
    topic = get_rollcall_topic(namespace)
    try:
        await caller.publish(topic, rollcall_payload(0.05))
        await wait_until(lambda: len(started) == 1, changed, 5)
        await caller.publish(topic, rollcall_payload(0.05))
        await wait_until(lambda: len(heard) == 2, changed, 5)
        held.set()
        await wait_until(lambda: len(started) == 2, changed, 5)
        assert started[1] - heard[1] >= rollcall.ROLLCALL_MIN_DELAY_S
    finally:
        held.set()
        await echo.stop()


async def test_an_agent_that_never_delegates_runs_no_registry(
    serve_agent: ServeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    subscriptions = count_discovery_subscriptions(monkeypatch)
    service = await serve_agent(Echo(), AgentSettings(task_store=":memory:"))
    assert service.discovery.current is None and shared_registry_count() == 0 and subscriptions == []


async def test_leases_of_one_broker_and_namespace_share_a_registry(
    broker_settings: BrokerSettings, namespace: str
) -> None:
    first, second = await asyncio.gather(
        lease_registry(broker_settings, namespace, owner="a"), lease_registry(broker_settings, namespace, owner="b")
    )
    other = await lease_registry(broker_settings, f"{namespace}/other", owner="c")
    try:
        assert first.registry is second.registry and other.registry is not first.registry
        assert shared_registry_count() == 2
    finally:
        for lease in (first, second, other):
            await lease.release()
    assert shared_registry_count() == 0


async def test_an_idle_mesh_sends_nothing_on_the_discovery_topics(
    serve_agent: ServeAgent, make_transport: TransportFactory, namespace: str
) -> None:
    # A short card_interval_s: it paces only the SAM heartbeat, which is off.
    settings = AgentSettings(task_store=":memory:", card_interval_s=0.2)
    echoes = [await serve_agent(Echo(name=f"e{i}"), settings) for i in range(3)]
    await serve_agent(Watching(name="watching"), settings)
    # Starting, the watching agent's registry held a roll call: the echoes answered it once each.
    async with asyncio.timeout(10):
        while any(e.presence.rollcall.answered < 1 for e in echoes):
            await asyncio.sleep(0.05)
    watcher = await make_transport()
    inbox = Inbox()
    await watcher.subscribe(f"{namespace}/a2a/v1/discovery/#", inbox)
    retained = await inbox.wait_for(4)
    assert all(m.retain for m in retained)
    # Measuring a quiet window, not waiting for a race: anything in it is steady-state traffic.
    await asyncio.sleep(3)
    assert len(inbox.messages) == 4, [m.topic for m in inbox.messages[4:]]
    assert [e.presence.rollcall.answered for e in echoes] == [1, 1, 1]


async def test_a_frozen_agent_process_leaves_within_one_and_a_half_keepalives(namespace: str) -> None:
    keepalive = 2
    broker = LocalBroker(default_config_path(), executable=precise_keepalive_mosquitto())
    broker.start()
    watcher = MqttTransport(BrokerSettings.from_url(broker.url), client_id=f"watcher-{namespace.split('/')[-1]}")
    try:
        await watcher.connect()
        inbox = Inbox()
        await watcher.subscribe(f"{namespace}/a2a/v1/discovery/agentcards/echo", inbox)
        proc = await start_agent_process(f"{broker.url}?keepalive={keepalive}", namespace)
        try:
            await inbox.wait_for(1)
            frozen_at = time.monotonic()
            proc.send_signal(signal.SIGSTOP)
            messages = await inbox.wait_for(2, timeout=3 * keepalive)
            left_after = time.monotonic() - frozen_at
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.send_signal(signal.SIGCONT)
            await proc.wait()
    finally:
        await watcher.close()
        broker.remove()
    assert messages[-1].payload == b""
    # Mosquitto counts whole seconds: it drops a client in the first second after 1.5 x keepalive
    # of silence (up to 1 s late), seen by its loop's next tick (100 ms), then the will reaches us.
    assert left_after <= 1.5 * keepalive + BROKER_CLOCK_SLACK_S, left_after


async def test_only_cards_known_from_sam_heartbeats_expire(make_transport: TransportFactory, namespace: str) -> None:
    publisher = await make_transport()
    card = Echo(name="sam").card(url="mqtt://x", push_notifications=False).to_json_bytes()
    retained = Echo(name="kept").card(url="mqtt://x", push_notifications=False).to_json_bytes()
    await publisher.publish(f"{namespace}/a2a/v1/discovery/agentcards/kept", retained, retain=True)
    registry = DiscoveryRegistry(await make_transport(), namespace, ttl_s=0.5)
    removed: list[RegistryEvent] = []
    changed = asyncio.Event()

    def on_event(event: RegistryEvent) -> None:
        if event.type == "removed":
            removed.append(event)
        changed.set()

    registry.add_listener(on_event)
    await registry.start()
    try:
        await publisher.publish(f"{namespace}/a2a/v1/discovery/agentcards", card)  # a SAM heartbeat
        await registry.wait_for("sam", 5)
        await wait_until(lambda: bool(removed), changed, 5)
        assert [(e.name, e.reason) for e in removed] == [("sam", "expired")]
        assert registry.get("kept") is not None
    finally:
        await registry.stop()
        await publisher.publish(f"{namespace}/a2a/v1/discovery/agentcards/kept", b"", retain=True)


async def test_a_delegating_agent_starts_the_shared_registry_on_first_use(
    serve_agent: ServeAgent, broker_settings: BrokerSettings, namespace: str
) -> None:
    await serve_agent(Echo(), AgentSettings(task_store=":memory:"))
    relay = await serve_agent(Relay(name="relay", next_agent="echo"), AgentSettings(task_store=":memory:"))
    assert relay.discovery.current is None and shared_registry_count() == 0
    async with MeshClient.connect(broker_settings, namespace) as client:
        task = await client.send("relay", "hi")
    assert isinstance(task, Task) and task.status.state == "completed"
    assert relay.discovery.current is not None and shared_registry_count() == 1
