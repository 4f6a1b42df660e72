"""The discovery registry against a real broker and real agent processes."""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from collections.abc import AsyncIterator

import pytest

from mesh.a2a import AgentCapabilities, AgentCard, AgentExtension, AgentSkill
from mesh.discovery.registry import GATEWAY_ROLE_EXTENSION, DiscoveryRegistry, RegistryEvent
from mesh.errors import AgentNotFoundError
from mesh.transport import MqttTransport
from tests.conftest import TransportFactory
from tests.support import start_agent_process


def card(name: str, description: str = "test agent", extensions: list[AgentExtension] | None = None) -> bytes:
    return AgentCard(
        name=name,
        description=description,
        version="1",
        url=f"mqtt://x/{name}",
        capabilities=AgentCapabilities(streaming=True, extensions=extensions),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="s", name="S", description="s", tags=["t"])],
    ).to_json_bytes()


class Watch:
    """A registry plus the events it reported, awaitable."""

    def __init__(self, registry: DiscoveryRegistry) -> None:
        self.registry = registry
        self.events: list[RegistryEvent] = []
        self._changed = asyncio.Event()
        registry.add_listener(self._on_event)

    def _on_event(self, event: RegistryEvent) -> None:
        self.events.append(event)
        self._changed.set()

    async def next(self, type_: str, name: str, timeout: float) -> RegistryEvent:
        """The first ``type_`` event for ``name``, waiting up to ``timeout`` seconds for it."""
        async with asyncio.timeout(timeout):
            while True:
                self._changed.clear()
                for event in self.events:
                    if event.type == type_ and event.name == name:
                        return event
                await self._changed.wait()


@pytest.fixture
async def watch(make_transport: TransportFactory, namespace: str) -> AsyncIterator[Watch]:
    registry = DiscoveryRegistry(await make_transport(), namespace, ttl_s=1.0)
    await registry.start()
    yield Watch(registry)
    await registry.stop()


async def test_a_new_agent_appears_within_a_second_and_a_killed_one_leaves_within_two(
    watch: Watch, broker_url: str, namespace: str
) -> None:
    proc = await start_agent_process(broker_url, namespace, "worker")
    try:
        added = await watch.next("added", "worker", timeout=1.0)
        assert added.kind == "agent" and added.card is not None and added.card.name == "worker"
        assert [e.name for e in watch.registry.agents()] == ["worker"]
    finally:
        proc.send_signal(signal.SIGKILL)  # kill -9: no clean shutdown, only the will
        await proc.wait()
    removed = await watch.next("removed", "worker", timeout=2.0)
    assert removed.reason == "gone"
    assert watch.registry.get("worker") is None


# A frozen agent leaves by keepalive + will, not by a TTL: tests/mesh/discovery/test_discovery.py.


async def test_sam_heartbeats_on_the_bare_topic_and_gateway_cards(
    watch: Watch, make_transport: TransportFactory, namespace: str
) -> None:
    sam = await make_transport()
    await sam.publish(f"{namespace}/a2a/v1/discovery/agentcards", card("sam_agent"))  # not retained
    await sam.publish(f"{namespace}/a2a/v1/discovery/gatewaycards/web", card("web"), retain=True)
    gateway_ext = [AgentExtension(uri=GATEWAY_ROLE_EXTENSION, params={"gateway_id": "gw2"})]
    await sam.publish(f"{namespace}/a2a/v1/discovery/agentcards", card("gw2", extensions=gateway_ext))
    assert (await watch.next("added", "sam_agent", 2)).kind == "agent"
    assert (await watch.next("added", "web", 2)).kind == "gateway"
    assert (await watch.next("added", "gw2", 2)).kind == "gateway"
    assert [e.name for e in watch.registry.gateways()] == ["gw2", "web"]
    await sam.publish(f"{namespace}/a2a/v1/discovery/gatewaycards/web", b"", retain=True)
    assert (await watch.next("removed", "web", 2)).reason == "gone"


async def test_a_changed_card_is_an_update_and_a_repeat_is_not(
    watch: Watch, make_transport: TransportFactory, namespace: str
) -> None:
    owner = await make_transport()
    topic = f"{namespace}/a2a/v1/discovery/agentcards/a1"
    await owner.publish(topic, card("a1", "first"), retain=True)
    await watch.next("added", "a1", 2)
    await owner.publish(topic, card("a1", "first"), retain=True)  # a heartbeat
    await owner.publish(topic, card("a1", "second"), retain=True)
    updated = await watch.next("updated", "a1", 2)
    assert updated.card is not None and updated.card.description == "second"
    assert [e.type for e in watch.events if e.name == "a1"] == ["added", "updated"]


async def test_allow_and_deny_patterns(make_transport: TransportFactory, namespace: str) -> None:
    owner = await make_transport()
    registry = DiscoveryRegistry(await make_transport(), namespace, allow=("team_*",), deny=("team_secret*",))
    for name in ("team_a", "team_secret1", "other"):
        await owner.publish(f"{namespace}/a2a/v1/discovery/agentcards/{name}", card(name), retain=True)
    await owner.publish(f"{namespace}/a2a/v1/discovery/agentcards/team_z", card("team_z"), retain=True)
    await registry.start()
    try:
        await registry.wait_for("team_z", 2)  # retained cards arrive in publish order
        assert registry.agent_names() == ["team_a", "team_z"]
    finally:
        await registry.stop()


async def test_malformed_cards_are_ignored_with_a_warning(
    watch: Watch, make_transport: TransportFactory, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    owner = await make_transport()
    with caplog.at_level(logging.WARNING, logger="mesh.discovery.registry"):
        await owner.publish(f"{namespace}/a2a/v1/discovery/agentcards/bad", b'{"name": 3}')
        await owner.publish(f"{namespace}/a2a/v1/discovery/agentcards/good", card("good"))
        await watch.next("added", "good", 2)
    assert watch.registry.get("bad") is None
    assert "refused the card of 'bad'" in caplog.text and "malformed card" in caplog.text
    assert "agentcards/bad" in caplog.text and watch.registry.refused["bad"][1].startswith("malformed card")


async def test_wait_for_an_absent_agent_lists_the_present_ones(
    watch: Watch, make_transport: TransportFactory, namespace: str
) -> None:
    owner = await make_transport()
    await owner.publish(f"{namespace}/a2a/v1/discovery/agentcards/here", card("here"), retain=True)
    await watch.next("added", "here", 2)
    with pytest.raises(AgentNotFoundError, match=r"unknown agent 'there'.*agents on the mesh: here"):
        await watch.registry.wait_for("there", 0.2)


async def test_an_unknown_agent_is_reported_once_the_retained_cards_are_in_not_after_the_timeout(
    make_transport: TransportFactory, namespace: str
) -> None:
    owner = await make_transport()
    for name in ("echo", "calculator"):
        await owner.publish(f"{namespace}/a2a/v1/discovery/agentcards/{name}", card(name), retain=True)
    registry = DiscoveryRegistry(await make_transport(), namespace)
    await registry.start()
    try:
        with pytest.raises(AgentNotFoundError, match=r"unknown agent 'ecoh'.*did you mean 'echo'") as caught:
            await registry.wait_for("ecoh", 60)
        assert "within 60 s" not in str(caught.value)  # it did not sit out the timeout
        assert (await registry.wait_for("echo", 60)).name == "echo"
    finally:
        await registry.stop()


async def test_on_an_empty_mesh_wait_for_waits_for_the_card(make_transport: TransportFactory, namespace: str) -> None:
    registry = DiscoveryRegistry(await make_transport(), namespace)
    await registry.start()
    try:
        await registry.settled(5)
        waiting = asyncio.ensure_future(registry.wait_for("late", 30))
        owner = await make_transport()
        await owner.publish(f"{namespace}/a2a/v1/discovery/agentcards/late", card("late"), retain=True)
        assert (await waiting).name == "late"
    finally:
        await registry.stop()


async def test_event_json_form(watch: Watch, make_transport: TransportFactory, namespace: str) -> None:
    owner: MqttTransport = await make_transport()
    await owner.publish(f"{namespace}/a2a/v1/discovery/agentcards/j", card("j"), retain=True)
    event = await watch.next("added", "j", 2)
    data = json.loads(json.dumps(event.to_json_dict()))
    assert data["event"] == "added" and data["kind"] == "agent" and data["name"] == "j"
    assert data["card"]["name"] == "j" and data["time"].endswith("+00:00")
