"""The roll call lies outside the discovery tree a SAM gateway reads as cards (mesh.discovery.rollcall).

A Solace Agent Mesh gateway subscribes to ``{ns}/a2a/v1/discovery/>`` and validates every
message there as an A2A 0.3 ``AgentCard`` (the a2a-sdk's 0.3 model, which SAM uses). On a mesh
with agents, a gateway and a registry holding a roll call, every non-empty message of that tree
must be such a card. The previous release's roll-call topic is still answered, and under the
rules of that release (no grant for the new topic) the mesh still works, on the old topic.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from a2a.compat.v0_3.types import AgentCard as SamAgentCard

from agents import AgentSettings
from agents.service import AgentService
from mesh.broker import BrokerSettings
from mesh.brokertools.brokerrules import Identity
from mesh.brokertools.localbroker import LocalBroker
from mesh.discovery.registry import DiscoveryRegistry
from mesh.discovery.rollcall import rollcall_payload
from mesh.transport import MqttTransport
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent, TransportFactory
from tests.support import Inbox
from tests.test_broker_rules import RuledBroker, broker_under_rules
from topics import get_discovery_rollcall_topic, get_discovery_subscription_topic, get_rollcall_topic

MEMORY = AgentSettings(task_store=":memory:")


async def test_every_message_in_the_discovery_tree_is_a_card_sam_accepts(
    serve_agent: ServeAgent, make_transport: TransportFactory, namespace: str
) -> None:
    echoes = [await serve_agent(Echo(name=f"e{i}"), MEMORY) for i in range(2)]
    sam = await make_transport()
    tree = Inbox()
    await sam.subscribe(get_discovery_subscription_topic(namespace), tree)
    await tree.wait_for(2)  # the retained cards
    registry = DiscoveryRegistry(await make_transport(), namespace, rollcall_window_s=0.1)
    await registry.start()  # holds a roll call: the echoes publish their cards again
    try:
        async with asyncio.timeout(10):
            while any(e.presence.rollcall.answered < 1 for e in echoes):
                await asyncio.sleep(0.02)
        await tree.wait_for(4)  # their answers
    finally:
        await registry.stop()
    refused = []
    for message in tree.messages:
        if not message.payload:
            continue  # a card cleared
        try:
            SamAgentCard.model_validate(json.loads(message.payload))
        except ValueError as exc:
            refused.append(f"{message.topic}: {str(exc).splitlines()[0]}")
    assert refused == [], refused


async def test_a_roll_call_on_the_previous_releases_topic_is_still_answered(
    serve_agent: ServeAgent, make_transport: TransportFactory, namespace: str
) -> None:
    echo = await serve_agent(Echo(name="e"), MEMORY)
    caller = await make_transport()
    await caller.publish(get_discovery_rollcall_topic(namespace), rollcall_payload(0.05))
    async with asyncio.timeout(10):
        while echo.presence.rollcall.answered < 1:
            await asyncio.sleep(0.02)


@pytest.fixture
def previous_rules(make_broker: Callable[..., LocalBroker], broker_dir: Path, namespace: str) -> Iterator[RuledBroker]:
    """A broker under rules as the previous release wrote them: no grant for the new roll-call topic."""
    identities = [Identity("agent", "e", namespace), Identity("client", "cli", namespace)]
    current = get_rollcall_topic(namespace)

    with broker_under_rules(make_broker, broker_dir, namespace, identities, edit=_without(current)) as ruled:
        yield ruled


def _without(topic: str) -> Callable[[dict[str, Any]], None]:
    def edit(rules: dict[str, Any]) -> None:
        for role in rules["roles"]:
            role["acls"] = [acl for acl in role["acls"] if acl["topic"] != topic]

    return edit


async def test_under_the_previous_releases_rules_roll_calls_go_the_old_way(
    previous_rules: RuledBroker, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="mesh.discovery.rollcall")
    echo = AgentService(Echo(name="e"), broker=previous_rules.settings("e"), namespace=namespace, settings=MEMORY)
    await echo.start()  # the new topic refused: it hears the old one, and says so
    try:
        assert "regenerate them with `mesh broker-config`" in caplog.text
        with pytest.raises(Exception, match="Not authorized"):
            async with MqttTransport(previous_rules.settings("cli"), client_id=previous_rules.client_id("cli")) as t:
                await t.publish(get_rollcall_topic(namespace), b"{}", timeout=5)
        settings: BrokerSettings = previous_rules.settings("cli")
        async with MqttTransport(settings, client_id=previous_rules.client_id("cli")) as transport:
            registry = DiscoveryRegistry(transport, namespace, rollcall_window_s=0.05)
            await registry.start()  # its roll call refused on the new topic: called on the old one
            try:
                async with asyncio.timeout(10):
                    while echo.presence.rollcall.answered < 1:
                        await asyncio.sleep(0.02)
            finally:
                await registry.stop()
    finally:
        await echo.stop()
