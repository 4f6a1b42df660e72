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
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from agents.builtin import CountdownAgent, EchoAgent
from agents.service import AgentService
from agents.settings import AgentSettings
from gateways.dashboard.service import Dashboard
from gateways.runtime import GatewayRuntime
from mesh.a2a import Task, TaskState
from mesh.brokertools.brokerfiles import local_broker_config, write_broker_files
from mesh.brokertools.brokerrules import Identity
from mesh.brokertools.localbroker import LocalBroker, default_config_path
from mesh.client import MeshClient
from mesh.clientids import REPLICA_SLOT_ENV, client_transport
from mesh.config.credentials import private_client_id, probe_client_id
from mesh.errors import ConfigError, ConnectError
from mesh.telemetry import METRICS
from mesh.transport import MqttTransport
from tests.support import Inbox, precise_keepalive_mosquitto, within
from tests.test_broker_rules import RuledBroker, broker_under_rules, ruled_broker  # noqa: F401  (the fixture)
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
            await attacker.publish(topic, forged, retain=True)
            # The attacker's, then the agent's again (healed at once: the wait is the bound).
            await cards.wait_for(seen + 2, timeout=within(1.0))
            assert cards.messages[seen].payload == forged
            assert json.loads(cards.messages[-1].payload) == json.loads(original.payload)
        assert metrics.cards_healed >= before + 2  # counted before the card is republished
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
        with pytest.raises(
            ConnectError, match="refused the connection of broker user 'calculator': Not authorized"
        ) as refused:
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


@pytest.fixture
def up_ruled_broker(make_broker: Callable[..., LocalBroker], broker_dir: Path, namespace: str) -> Iterator[RuledBroker]:
    """The rules ``mesh up`` writes (an admin user: replicas get slots) for an agent, an agent run
    as replicas, the HTTP gateway and the CLI user."""
    identities = [
        Identity("agent", "echo", namespace),
        Identity("agent", "countdown", namespace, replica=True),
        Identity("gateway", "http", namespace),
        Identity("client", "cli", namespace),
    ]
    with broker_under_rules(make_broker, broker_dir, namespace, identities, admin=True) as ruled:
        yield ruled


def _replica(ruled: RuledBroker) -> AgentService:
    settings = AgentSettings(shared_subscription=True, task_store=":memory:")
    return AgentService(
        CountdownAgent(), namespace=ruled.namespace, broker=ruled.settings("countdown"), settings=settings
    )


async def test_no_connection_of_any_component_can_be_taken_over_with_the_gateways_or_the_clis_credentials(
    up_ruled_broker: RuledBroker,
) -> None:
    """Every connection is made as a user bound to one client id: an agent's, each replica's (a
    slot of its agent's user, held while it runs), the gateway's own and its dashboard's, each CLI
    connection's (a slot of the CLI user). With the gateway's or the CLI's credentials, the
    broker refuses a CONNECT under any of them (0x87), and none of them is disconnected."""
    ruled, ns = up_ruled_broker, up_ruled_broker.namespace
    http, cli = ruled.settings("http"), ruled.settings("cli")
    echo = AgentService(EchoAgent(), namespace=ns, broker=ruled.settings("echo"), settings=AgentSettings())
    replicas = [_replica(ruled), _replica(ruled)]
    gateway = GatewayRuntime("http", namespace=ns, broker=http, card=lambda: b'{"name": "http"}')
    dashboard = Dashboard(http, ns, owner="http")
    started: list[AgentService | GatewayRuntime] = []
    try:
        components: list[AgentService | GatewayRuntime] = [echo, *replicas, gateway]
        for component in components:
            await component.start()
            started.append(component)
        await dashboard.start()
        watcher = dashboard._watcher
        assert watcher is not None
        # Each replica is a user of its own (a slot of countdown's), bound to an id of its own.
        countdown_id = ruled.client_id("countdown")
        assert countdown_id is not None
        users = sorted((r.transport.settings.username, r.transport.client_id) for r in replicas)  # type: ignore[attr-defined]
        assert users == [("countdown", countdown_id), ("countdown@1", f"{countdown_id}@1")]
        assert (gateway.transport.client_id, watcher.transport.client_id) == (
            ruled.client_id("http"),
            ruled.client_id("http@watch"),
        )
        victims = [echo.transport, *(r.transport for r in replicas), gateway.transport, watcher.transport]
        lost: list[str] = []

        def losing(who: str) -> Callable[[object], None]:
            return lambda _reason: lost.append(who)

        for victim in victims:
            victim.add_disconnect_listener(losing(victim.client_id))
        async with MeshClient.connect(cli, ns) as client:  # the CLI's own connection: slot 0
            assert client.transport.client_id == ruled.client_id("cli")
            attempts = [(cli, v.client_id) for v in victims]
            attempts += [(http, v.client_id) for v in victims[:3]] + [(http, client.transport.client_id)]
            for attacker, stolen in attempts:
                with pytest.raises(ConnectError, match="Not authorized") as refused:
                    await MqttTransport(attacker, client_id=stolen).connect()
                assert refused.value.reason_code == 0x87, (attacker.username, stolen)
            assert len(attempts) == 9
            # Everyone still serves: the agent, and the replicas (each request to one of them).
            answer = await client.send("echo", "still here", timeout=5)
            assert "still here" in answer.model_dump_json()
            for _ in range(2):
                task = await client.send("countdown", "1", timeout=10)
                assert "Liftoff" in task.model_dump_json()
        assert lost == []
        assert all(v.is_connected for v in victims)
        # A replica that stops frees its slot for the next one.
        stopped = replicas.pop(next(i for i, r in enumerate(replicas) if r.transport.client_id != countdown_id))
        await stopped.stop()
        started.remove(stopped)
        again = _replica(ruled)
        await again.start()
        started.append(again)
        assert again.transport.client_id == f"{countdown_id}@1"
    finally:
        await dashboard.close()
        for component in reversed(started):
            await component.stop()


async def test_replicas_under_static_rules_each_hold_a_slot_named_by_the_variable_or_claimed_by_a_lock(
    ruled_broker: RuledBroker,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Static rules (``mesh broker-config``, ``deploy/``): replicas on several machines or
    containers cannot share lock files, so each can be given its slot by ``$MESH_REPLICA_SLOT``;
    one without it claims a free slot of its machine. Both serve the agent's requests (a shared
    subscription), and with the CLI's, the gateway's or another agent's credentials the broker
    refuses a CONNECT under either replica's client id (0x87) and neither is disconnected."""
    ruled, ns = ruled_broker, ruled_broker.namespace
    monkeypatch.setenv(REPLICA_SLOT_ENV, "16")
    out_of_range = rf"{REPLICA_SLOT_ENV}='16' is not a slot of broker user 'countdown': give an integer from 0 to 15"
    with pytest.raises(ConfigError, match=out_of_range):
        _replica(ruled)
    monkeypatch.setenv(REPLICA_SLOT_ENV, "7")
    named = _replica(ruled)
    monkeypatch.delenv(REPLICA_SLOT_ENV)
    claimed = _replica(ruled)
    countdown_id = ruled.client_id("countdown")
    assert countdown_id is not None and ruled.client_id("countdown@7") == f"{countdown_id}@7"  # bound by the rules
    replicas = [named, claimed]
    users = [(r.transport.settings.username, r.transport.client_id) for r in replicas]  # type: ignore[attr-defined]
    assert users == [("countdown@7", f"{countdown_id}@7"), ("countdown", countdown_id)]
    started: list[AgentService] = []
    try:
        for replica in replicas:
            await replica.start()
            started.append(replica)
        lost: list[str] = []

        def losing(who: str) -> Callable[[object], None]:
            return lambda _reason: lost.append(who)

        for replica in replicas:
            replica.transport.add_disconnect_listener(losing(replica.transport.client_id))
        attackers = [ruled.settings(user) for user in ("cli", "http", "echo")]
        for attacker in attackers:
            for replica in replicas:
                with pytest.raises(ConnectError, match="Not authorized") as refused:
                    await MqttTransport(attacker, client_id=replica.transport.client_id).connect()
                assert refused.value.reason_code == 0x87, (attacker.username, replica.transport.client_id)
        async with MeshClient.connect(ruled.settings("cli"), ns) as client:
            tasks = [await client.send("countdown", "1", timeout=10) for _ in range(4)]
        done = [t for t in tasks if isinstance(t, Task) and t.status.state is TaskState.completed]
        assert len(done) == 4
        served = {r.transport.client_id for r in replicas for t in done if r.tasks.get(t.id) is not None}
        assert served == {countdown_id, f"{countdown_id}@7"}  # both took requests
        assert lost == []
        assert all(r.transport.is_connected for r in replicas)
    finally:
        for replica in reversed(started):
            await replica.stop()


async def test_rules_of_an_older_version_without_the_other_users_still_work(
    make_broker: Callable[..., LocalBroker], broker_dir: Path, namespace: str
) -> None:
    """Rules that know no ``{name}@{role}`` nor slot users and bind no client id (an older version's):
    the name check, the dashboard and the CLI connect as the components' own users, as before."""
    identities = [Identity("agent", "echo", namespace), Identity("gateway", "http", namespace)]
    identities.append(Identity("client", "cli", namespace))
    files = write_broker_files(broker_dir, identities)
    rules = json.loads(files.dynsec.read_text())
    rules["clients"] = [
        {k: v for k, v in c.items() if k != "clientid"} for c in rules["clients"] if "@" not in c["username"]
    ]
    files.dynsec.write_text(json.dumps(rules))
    (files.passwords / "cli.slots").unlink()  # older credentials: no slots either
    extra_config, copied = local_broker_config(files)
    try:
        ruled = RuledBroker(make_broker(extra_config), files, namespace)
        echo = AgentService(EchoAgent(), namespace=namespace, broker=ruled.settings("echo"), settings=AgentSettings())
        await echo.start()  # its name check: no echo@probe, so as echo itself
        dashboard = Dashboard(ruled.settings("http"), namespace, owner="http")
        try:
            await dashboard.start()  # no http@watch: as http, under another client id
            assert dashboard._watcher is not None and dashboard._watcher.transport.settings.username == "http"  # type: ignore[attr-defined]
            async with (
                MeshClient.connect(ruled.settings("cli"), namespace) as first,
                MeshClient.connect(ruled.settings("cli"), namespace) as second,
            ):  # no slots: the first takes cli's own id, the second a random one
                assert first.transport.client_id != second.transport.client_id
                for client in (first, second):
                    assert "old rules" in (await client.send("echo", "old rules", timeout=5)).model_dump_json()
        finally:
            await dashboard.close()
            await echo.stop()
    finally:
        if copied is not None:
            shutil.rmtree(copied, ignore_errors=True)
