"""One agent serving both dialects is one registry entry, with both addresses (issue 38, item 7).

On the real broker: a mesh agent with ``emqx:`` publishes a card on its SAM topic and one on its
profile topic; the registry lists it once (``profile`` set) and the orchestrator asks it once.
Merging rests on what the broker rules verify (who may publish on each card topic): both cards
must make the same claim, so a card of another user that names the agent changes nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents import AgentSettings
from agents.builtin.calculator import CalculatorAgent
from agents.builtin.orchestrator import OrchestratorAgent
from agents.service import AgentService
from mesh.a2a import Task, TaskState, get_text_from_message
from mesh.broker import BrokerSettings
from mesh.brokertools.brokerrules import Identity, ProfileScope, profile_user
from mesh.brokertools.localbroker import LocalBroker
from mesh.client import MeshClient
from mesh.config.credentials import password_for
from mesh.discovery.registry import DiscoveryRegistry
from mesh.errors import NotAuthorizedError
from mesh.profile.emqx import BOTH_DIALECTS_EXTENSION, EmqxProfile
from mesh.properties import MessageProperties
from mesh.transport import MqttTransport
from tests.test_broker_rules import broker_under_rules

pytestmark = pytest.mark.asyncio


def claim(namespace: str, name: str, address: str) -> dict[str, Any]:
    return {"uri": BOTH_DIALECTS_EXTENSION, "params": {"namespace": namespace, "name": name, "profileAddress": address}}


def profile_card(name: str, extensions: list[dict[str, Any]]) -> bytes:
    """An A2A 1.0 card as a profile agent publishes it."""
    return json.dumps(
        {
            "name": name,
            "description": "Does arithmetic",
            "version": "1",
            "supportedInterfaces": [{"url": "mqtt://x", "protocolBinding": "MQTTv5+JSONRPCv2"}],
            "capabilities": {"streaming": True, "extensions": extensions},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "math", "name": "math", "description": "arithmetic", "tags": ["math", "calculate"]}],
        }
    ).encode()


ONLINE = MessageProperties(extra=[("a2a-status", "online")])


async def until(condition: Callable[[], bool], timeout: float = 10) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


async def test_one_agent_one_entry_and_the_orchestrator_asks_it_once(
    broker_settings: BrokerSettings, namespace: str, make_transport: Any
) -> None:
    org = f"t{uuid.uuid4().hex[:10]}"
    address = f"{org}/math/calc"
    calculator = AgentService(
        CalculatorAgent(),
        broker=broker_settings,
        namespace=namespace,
        settings=AgentSettings(task_store=":memory:", emqx=EmqxProfile(org=org, unit="math", agent_id="calc")),
    )
    orchestrator = AgentService(OrchestratorAgent(), broker=broker_settings, namespace=namespace)
    watcher = await make_transport()
    registry = DiscoveryRegistry(watcher, namespace)
    await calculator.start()
    await orchestrator.start()
    await registry.start()
    try:
        await registry.wait_for(address, 10)
        await until(lambda: (e := registry.get("calculator")) is not None and e.profile == address)
        names = registry.agent_names()
        assert "calculator" in names and address not in names, names
        assert registry.get(address) is not None  # still reachable by its profile name
        async with MeshClient.connect(broker_settings, namespace) as client:
            task = await client.send("orchestrator", "what is 6 * 7")
            assert isinstance(task, Task) and task.status.state is TaskState.completed, task
            assert task.status.message is not None
            text = get_text_from_message(task.status.message)
            assert text.count("42") == 1, text
            # Called by its profile name it still answers, through the profile.
            direct = await client.send(address, "6 * 7")
            assert isinstance(direct, Task) and direct.status.state is TaskState.completed

        # Cards of others that claim the calculator change nothing (on a broker without rules anyone
        # may publish them; the rules below show who can).
        attacker = await make_transport()
        await attacker.publish(  # a profile card that names the calculator, at another address
            f"$a2a/v1/discovery/{org}/math/evil",
            profile_card("evil", [claim(namespace, "calculator", f"{org}/math/evil")]),
            retain=True,
            properties=ONLINE,
        )
        await attacker.publish(  # ... and one that claims its very address, from another topic
            f"$a2a/v1/discovery/{org}/math/evil2",
            profile_card("evil2", [claim(namespace, "calculator", address)]),
            retain=True,
            properties=ONLINE,
        )
        mallory = json.loads(calculator.card_bytes())  # a mesh card of another name claiming the address
        mallory["name"] = "mallory"
        mallory["capabilities"]["extensions"] = [claim(namespace, "mallory", address)]
        await attacker.publish(
            f"{namespace}/a2a/v1/discovery/agentcards/mallory", json.dumps(mallory).encode(), retain=True
        )
        await until(lambda: {f"{org}/math/evil", f"{org}/math/evil2", "mallory"} <= set(registry.agent_names()))
        calc_entry, mallory_entry = registry.get("calculator"), registry.get("mallory")
        assert calc_entry is not None and calc_entry.profile == address
        assert mallory_entry is not None and mallory_entry.profile is None
        assert address not in registry.agent_names()
        for retained in (f"$a2a/v1/discovery/{org}/math/evil", f"$a2a/v1/discovery/{org}/math/evil2"):
            await attacker.publish(retained, b"", retain=True)
        await attacker.publish(f"{namespace}/a2a/v1/discovery/agentcards/mallory", b"", retain=True)
    finally:
        await registry.stop()
        await orchestrator.stop()
        await calculator.stop()


async def test_under_the_broker_rules_another_user_cannot_join_or_hijack_the_entry(
    make_broker: Callable[..., LocalBroker], broker_dir: Path, namespace: str
) -> None:
    org = f"t{uuid.uuid4().hex[:10]}"
    address = f"{org}/math/calc"
    identities = [
        Identity("agent", "calculator", namespace, profile=ProfileScope(org, "math", "calc")),
        Identity("agent", "mallory", namespace, profile=ProfileScope(org, "math", "mallory")),
        Identity("client", "cli", namespace),
    ]
    with broker_under_rules(make_broker, broker_dir, namespace, identities) as ruled:
        calculator = AgentService(
            CalculatorAgent(),
            broker=ruled.settings("calculator"),
            namespace=namespace,
            settings=AgentSettings(task_store=":memory:", emqx=EmqxProfile(org=org, unit="math", agent_id="calc")),
        )
        await calculator.start()
        cli = MqttTransport(ruled.settings("cli"), client_id=ruled.client_id("cli"))
        user = profile_user("mallory")
        mallory_settings = dataclasses.replace(
            ruled.settings("mallory"), username=user, password=password_for(ruled.files.passwords, user)
        )
        mallory = MqttTransport(mallory_settings, client_id=f"{org}/math/mallory")
        await cli.connect()
        await mallory.connect()
        registry = DiscoveryRegistry(cli, namespace)
        await registry.start()
        try:
            await until(lambda: (e := registry.get("calculator")) is not None and e.profile == address)
            # mallory's profile user may publish only its own card: it claims the calculator there.
            await mallory.publish(
                f"$a2a/v1/discovery/{org}/math/mallory",
                profile_card("mallory", [claim(namespace, "calculator", f"{org}/math/mallory")]),
                retain=True,
                properties=ONLINE,
            )
            with pytest.raises(NotAuthorizedError):  # the calculator's profile card is not its to write
                await mallory.publish(
                    f"$a2a/v1/discovery/{org}/math/calc",
                    profile_card("calc", [claim(namespace, "calculator", address)]),
                    retain=True,
                    properties=ONLINE,
                )
            await until(lambda: f"{org}/math/mallory" in registry.agent_names())
            entry = registry.get("calculator")
            assert entry is not None and entry.profile == address
            assert entry.card.description == CalculatorAgent().card(url="x", push_notifications=False).description
            assert address not in registry.agent_names()
            await mallory.publish(f"$a2a/v1/discovery/{org}/math/mallory", b"", retain=True)
        finally:
            await registry.stop()
            await mallory.close()
            await cli.close()
            await calculator.stop()


async def test_a_pools_members_are_their_agents_one_entry(
    broker_settings: BrokerSettings, namespace: str, make_transport: Any
) -> None:
    from tests.agents.service_agents import Echo

    org = f"t{uuid.uuid4().hex[:10]}"
    settings = AgentSettings(
        task_store=":memory:", shared_subscription=True, emqx=EmqxProfile(org=org, unit="ai", pool="echoes")
    )
    services = [AgentService(Echo(), broker=broker_settings, namespace=namespace, settings=settings) for _ in range(2)]
    registry = DiscoveryRegistry(await make_transport(), namespace)
    for service in services:
        await service.start()
    await registry.start()
    try:
        members = {f"{org}/ai/{s.profile.agent_id}" for s in services if s.profile is not None}
        await until(lambda: all(registry.get(m) is not None for m in members))
        await until(lambda: (e := registry.get("echo")) is not None and e.profile == f"{org}/ai/pool/echoes")
        assert registry.agent_names() == ["echo"]
    finally:
        await registry.stop()
        for service in services:
            await service.stop()
