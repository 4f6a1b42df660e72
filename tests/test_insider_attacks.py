"""Issue 23's insider attacks on presence and sessions, on a real Mosquitto under the generated rules.

- Clearing a card: one empty retained message removed an agent until it restarted. Now the
  agent watches its own card topic and publishes its card again at once (within 1 s), counted in
  its metrics. (Under the rules only the agent's own user may publish there: the attacker here
  holds echo's credentials, as the single shared password file of old allowed.)
- Client-id takeover: a component with its own credentials connected under another's client id
  (derived from its name) and the two kicked each other. An agent's client id is now keyed by its
  own password, so no other component knows it; and a connection that is taken over says whose
  it was (client id, broker user) and the reason code.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import time
from collections.abc import AsyncIterator

import pytest

from agents.builtin import EchoAgent
from agents.service import AgentService
from agents.settings import AgentSettings
from mesh.client import MeshClient
from mesh.telemetry import METRICS
from mesh.transport import MqttTransport
from tests.support import Inbox, wait_until
from tests.test_broker_rules import RuledBroker, ruled_broker  # noqa: F401  (the fixture)
from topics import get_agent_discovery_topic


@pytest.fixture
async def echo(ruled_broker: RuledBroker) -> AsyncIterator[AgentService]:  # noqa: F811
    service = AgentService(
        EchoAgent(),
        namespace=ruled_broker.namespace,
        broker=ruled_broker.settings("echo"),
        settings=AgentSettings(task_store=":memory:"),
    )
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


async def test_a_cleared_or_replaced_card_is_back_within_a_second(
    ruled_broker: RuledBroker,  # noqa: F811
    echo: AgentService,
) -> None:
    topic = get_agent_discovery_topic(ruled_broker.namespace, "echo")
    metrics = METRICS.component(ruled_broker.namespace, "echo")
    before = metrics.cards_healed
    async with (
        MqttTransport(ruled_broker.settings("cli")) as watcher,
        MqttTransport(ruled_broker.settings("echo")) as attacker,
    ):
        cards = Inbox()
        await watcher.subscribe(topic, cards)
        [original] = await cards.wait_for(1)
        for forged in (b"", json.dumps({"name": "echo", "url": "mqtt://evil"}).encode()):
            seen = len(cards.messages)
            started = time.monotonic()
            await attacker.publish(topic, forged, retain=True)
            await cards.wait_for(seen + 2, timeout=1.0)  # the attacker's, then the agent's again
            assert time.monotonic() - started < 1.0
            assert cards.messages[seen].payload == forged
            assert json.loads(cards.messages[-1].payload) == json.loads(original.payload)
        await wait_until(lambda: metrics.cards_healed >= before + 2, None, 2.0)
    # What a newcomer gets now is the agent's card, not the attacker's.
    async with MqttTransport(ruled_broker.settings("cli")) as late:
        retained = Inbox()
        await late.subscribe(topic, retained)
        [now] = await retained.wait_for(1)
        assert json.loads(now.payload) == json.loads(original.payload)


async def test_a_session_taken_over_is_logged_with_the_component_and_the_reason(
    ruled_broker: RuledBroker,  # noqa: F811
    caplog: pytest.LogCaptureFixture,
) -> None:
    echo = ruled_broker.settings("echo")
    lost = asyncio.Event()
    # The victim waits before reconnecting, so the two do not kick each other during the test.
    victim = MqttTransport(dataclasses.replace(echo, reconnect_min_delay_s=30.0), client_id="echo-main")
    victim.add_disconnect_listener(lambda _reason: lost.set())
    await victim.connect()
    try:
        with caplog.at_level(logging.WARNING, logger="mesh.transport"):
            async with MqttTransport(echo, client_id="echo-main"):
                await asyncio.wait_for(lost.wait(), 5.0)
        line = next(r.getMessage() for r in caplog.records if " lost (" in r.getMessage())
        assert line.startswith("echo-main: connection to") and "broker user echo" in line, line
        assert "reason code 0x8" in line, line
        assert "another connection took" in line, line
    finally:
        await victim.close()


async def test_a_takeover_with_another_components_credentials_misses_the_agents_session(
    ruled_broker: RuledBroker,  # noqa: F811
    echo: AgentService,
) -> None:
    """The issue's attack: ``calculator``, with its own credentials, connected under echo's client
    id (its name: ``{ns}/echo``) and the two kicked each other every second. The agent's client id
    is now keyed by its own password: another component cannot know it, and echo keeps serving."""
    ns = ruled_broker.namespace
    assert echo.transport.client_id != f"{ns}/echo" and echo.transport.client_id.startswith(f"{ns}/echo-")
    lost = asyncio.Event()
    echo.transport.add_disconnect_listener(lambda _reason: lost.set())
    async with (
        MqttTransport(ruled_broker.settings("calculator"), client_id=f"{ns}/echo"),
        MeshClient.connect(ruled_broker.settings("cli"), ns) as client,
    ):
        for _ in range(5):
            answer = await client.send("echo", "still here", timeout=5)
            assert "still here" in answer.model_dump_json()
    assert not lost.is_set()  # echo's connection was never taken over
