"""Issue 23's insider attacks on presence and sessions, on a real Mosquitto under the generated rules.

- Clearing a card: one empty retained message removed an agent until it restarted. Now the
  agent watches its own card topic and publishes its card again at once (within 1 s), counted in
  its metrics. (Under the rules only the agent's own user may publish there: the attacker here
  holds echo's credentials, as the single shared password file of old allowed.)
- Client-id takeover: a component with its own credentials connected under another's client id
  (derived from its name) and the two kicked each other. Each agent's broker user may now connect
  under its own client id only (dynamic security's client-id binding): another component's
  CONNECT under it is refused by the broker, and the agent's connection is untouched. A
  connection that is taken over (the same identity connecting twice) says whose it was (client
  id, broker user) and the reason code, 0x8E "session taken over".
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import shutil
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agents.builtin import EchoAgent
from agents.service import AgentService
from agents.settings import AgentSettings
from mesh.brokertools.brokerfiles import local_broker_config, write_broker_files
from mesh.brokertools.brokerrules import Identity
from mesh.brokertools.localbroker import LocalBroker, default_config_path
from mesh.client import MeshClient
from mesh.clientids import client_transport
from mesh.credentials import private_client_id, probe_client_id
from mesh.errors import ConnectError
from mesh.telemetry import METRICS
from mesh.transport import MqttTransport
from tests.support import Inbox, precise_keepalive_mosquitto, wait_until
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
        client_transport(ruled_broker.settings("cli")) as watcher,
        # echo's credentials, as its name check's user (the one connection they allow beside echo's own)
        MqttTransport(
            dataclasses.replace(ruled_broker.settings("echo"), username="echo@probe"),
            client_id=probe_client_id(echo.transport.client_id),
        ) as attacker,
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
    async with client_transport(ruled_broker.settings("cli")) as late:
        retained = Inbox()
        await late.subscribe(topic, retained)
        [now] = await retained.wait_for(1)
        assert json.loads(now.payload) == json.loads(original.payload)


@pytest.fixture
def recent_ruled_broker(broker_dir: Path, namespace: str) -> Iterator[RuledBroker]:
    """The generated rules on a Mosquitto that says why it closes a connection taken over (DISCONNECT
    0x8E "session taken over"; Debian 12's 2.0.11 just closes it)."""
    files = write_broker_files(broker_dir, [Identity("agent", "echo", namespace), Identity("client", "cli", namespace)])
    extra_config, copied = local_broker_config(files)
    broker = LocalBroker(default_config_path(), executable=precise_keepalive_mosquitto(), extra_config=extra_config)
    broker.start()
    try:
        yield RuledBroker(broker, files, namespace)
    finally:
        broker.remove()
        if copied is not None:
            shutil.rmtree(copied, ignore_errors=True)


async def test_a_session_taken_over_is_logged_with_the_component_and_the_reason(
    recent_ruled_broker: RuledBroker,
    caplog: pytest.LogCaptureFixture,
) -> None:
    echo = recent_ruled_broker.settings("echo")
    own_id = private_client_id(f"{recent_ruled_broker.namespace}/echo", echo.password)  # the one echo's user may use
    lost = asyncio.Event()
    # The victim waits before reconnecting, so the two do not kick each other during the test.
    victim = MqttTransport(dataclasses.replace(echo, reconnect_min_delay_s=30.0), client_id=own_id)
    victim.add_disconnect_listener(lambda _reason: lost.set())
    await victim.connect()
    try:
        with caplog.at_level(logging.WARNING, logger="mesh.transport"):
            async with MqttTransport(echo, client_id=own_id):  # the same identity, a second time
                await asyncio.wait_for(lost.wait(), 5.0)
        line = next(r.getMessage() for r in caplog.records if " lost (" in r.getMessage())
        assert line.startswith(f"{own_id}: connection to") and "broker user echo" in line, line
        assert "Session taken over, reason code 0x8E" in line, line
        assert "another connection took" in line and "Unspecified" not in line, line
    finally:
        await victim.close()


async def test_a_takeover_with_another_components_credentials_is_refused_by_the_broker(
    ruled_broker: RuledBroker,  # noqa: F811
    echo: AgentService,
) -> None:
    """The issue's attack: ``calculator``, with its own credentials, connected under echo's client
    id and the two kicked each other every second. Now calculator's user may connect under its
    own client id only: the broker refuses the CONNECT (even knowing echo's exact id), and echo's
    connection is never touched."""
    ns = ruled_broker.namespace
    own_id = echo.transport.client_id
    assert own_id == private_client_id(f"{ns}/echo", ruled_broker.settings("echo").password)
    lost = asyncio.Event()
    echo.transport.add_disconnect_listener(lambda _reason: lost.set())
    calculator = ruled_broker.settings("calculator")
    for stolen in (own_id, f"{ns}/echo", own_id + "@probe"):
        with pytest.raises(ConnectError, match="refused the connection: Not authorized") as refused:
            await MqttTransport(calculator, client_id=stolen).connect()
        assert refused.value.reason_code == 0x87
    # Its own id, and the name check's user (echo@probe) only under echo's probe id.
    async with MqttTransport(calculator, client_id=private_client_id(f"{ns}/calculator", calculator.password)):
        pass
    probe = dataclasses.replace(ruled_broker.settings("echo"), username="echo@probe")
    with pytest.raises(ConnectError, match="Not authorized"):
        await MqttTransport(probe, client_id=own_id).connect()
    async with MeshClient.connect(ruled_broker.settings("cli"), ns) as client:
        for _ in range(5):
            answer = await client.send("echo", "still here", timeout=5)
            assert "still here" in answer.model_dump_json()
    assert not lost.is_set()  # echo's connection was never taken over
    assert echo.transport.is_connected
