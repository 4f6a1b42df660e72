"""The generated broker rules on a real Mosquitto: every component does its job and nothing more.

Four agents, an HTTP gateway and a CLI client, each connected as its own broker user under the
dynamic-security rules ``mesh broker-config`` writes. Denials are checked as the broker reports
them: a SUBACK failure (``SubscribeError``), a PUBACK 0x87 (``NotAuthorizedError``), a refused
CONNACK (``ConnectError``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import shutil
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.builtin import CalculatorAgent, CountdownAgent, EchoAgent, OrchestratorAgent
from agents.service import AgentService
from agents.settings import AgentSettings
from gateways.http.server import HttpGateway
from gateways.http.settings import HttpGatewaySettings
from mesh.a2a import Task, TaskState
from mesh.broker import BrokerSettings
from mesh.brokertools.brokerfiles import BrokerFiles, local_broker_config, write_broker_files
from mesh.brokertools.brokerrules import Identity
from mesh.brokertools.localbroker import LocalBroker
from mesh.cli.broker_commands import check_broker_log
from mesh.client import MeshClient
from mesh.errors import AgentNameTakenError, ConnectError, NotAuthorizedError, SubscribeError
from mesh.transport import MqttTransport
from tests.gateways.jsonrpc_http import call, message, result_of
from tests.support import Inbox

AGENTS = ("echo", "calculator", "countdown", "orchestrator")


@dataclass
class RuledBroker:
    broker: LocalBroker
    files: BrokerFiles
    namespace: str

    def settings(self, user: str) -> BrokerSettings:
        """How component ``user`` connects: its own username and password."""
        return BrokerSettings.from_url(self.broker.url, password_file=str(self.files.passwords)).for_identity(user)

    def client_id(self, user: str) -> str | None:
        """The one client id the rules let ``user`` connect with (an agent's), else None: any."""
        rules = json.loads(self.files.dynsec.read_text())
        found = next(c for c in rules["clients"] if c["username"] == user)
        client_id: str | None = found.get("clientid")
        return client_id

    def transport(self, user: str) -> MqttTransport:
        """A connection as ``user`` (a component, or one of its other users ``{name}@{role}``), under
        the client id its rules allow."""
        owner = user.partition("@")[0]
        settings = dataclasses.replace(self.settings(owner), username=user)
        return MqttTransport(settings, client_id=self.client_id(user))


@contextlib.contextmanager
def broker_under_rules(
    make_broker: Callable[..., LocalBroker],
    broker_dir: Path,
    namespace: str,
    identities: list[Identity],
    *,
    admin: bool = False,
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> Iterator[RuledBroker]:
    """A Mosquitto of the test's own under the rules generated for ``identities`` (changed by
    ``edit`` first: rules of another release), started without a warning or an error."""
    files = write_broker_files(broker_dir, identities, admin=admin)
    if edit is not None:
        rules = json.loads(files.dynsec.read_text())
        edit(rules)
        files.dynsec.write_text(json.dumps(rules))
    extra_config, copied = local_broker_config(files)
    try:
        broker = make_broker(extra_config)
        check_broker_log(broker, files.dynsec)
        yield RuledBroker(broker, files, namespace)
    finally:
        if copied is not None:
            shutil.rmtree(copied, ignore_errors=True)


@pytest.fixture
def ruled_broker(make_broker: Callable[..., LocalBroker], broker_dir: Path, namespace: str) -> Iterator[RuledBroker]:
    """A Mosquitto of the test's own under the rules generated for the four agents, ``http`` and ``cli``."""
    # countdown runs as replicas (each in a slot of its user), the others bound to one client id each.
    identities = [Identity("agent", name, namespace, replica=name == "countdown") for name in AGENTS]
    identities += [Identity("gateway", "http", namespace), Identity("client", "cli", namespace)]
    identities.append(Identity("probe", "doctor", namespace))
    with broker_under_rules(make_broker, broker_dir, namespace, identities) as ruled:
        yield ruled


async def test_every_cross_component_attempt_is_denied(ruled_broker: RuledBroker, namespace: str) -> None:
    base = f"{namespace}/a2a/v1"
    echo_requests = f"{base}/agent/request/echo"
    subscribes = {
        "calculator": [
            echo_requests,  # another agent's requests
            f"$share/echo/{echo_requests}",  # ... through its share group
            f"$share/calculator/{echo_requests}",  # ... through a group of its own
            f"{echo_requests}/+",  # ... its instance topics
            f"{base}/agent/request/+",  # every agent's requests
            f"{base}/agent/response/echo/+",  # another agent's delegation answers
            f"{base}/agent/status/echo/+",
            f"{base}/agent/response/+/+",
            f"{base}/gateway/response/http/+",  # the gateway's answers
            f"{base}/client/response/cli",  # a client's answers
            f"{base}/client/status/cli/+",
            "#",
            "$SYS/#",
            f"{namespace}/#",
            "+/a2a/v1/discovery/#",  # other namespaces' discovery
        ],
        "http": [
            echo_requests,
            f"{base}/agent/response/echo/+",
            f"{base}/client/response/cli",
            f"{base}/gateway/response/+/+",  # other gateways' answers
            "#",
        ],
        "cli": [
            echo_requests,
            f"$share/echo/{echo_requests}",
            f"{base}/gateway/response/http/+",
            f"{base}/gateway/status/http/+",
            f"{base}/client/response/+",  # every client's answers
            f"{base}/agent/status/+/+",
            "$SYS/#",
        ],
        "echo": [f"{base}/agent/response/+/#", f"{base}/agent/request/calculator"],
    }
    publishes = {
        "calculator": [
            f"{base}/discovery/agentcards/echo",  # another agent's card
            f"{base}/discovery/agentcards/echo/x1",  # ... an instance card of it
            f"{base}/discovery/agentcards",  # the SAM heartbeat topic (cards named by their content)
            f"{base}/discovery/gatewaycards/http",  # the gateway's card
            f"{base}/discovery/other",
            f"{base}/agent/foo/x",  # outside the answer families
            f"{base}/agent/response/echo",  # an answer family's shape, one level short
            f"{base}/client/status/cli",
            "other/a2a/v1/agent/request/echo",  # another namespace
            "outside/the/mesh",
        ],
        "http": [
            f"{base}/discovery/agentcards/http",  # an agent card under its own name
            f"{base}/agent/response/echo/t1",  # an answer: gateways do not answer
            f"{base}/client/response/cli",
            f"{base}/gateway/status/other/t1",
        ],
        "cli": [
            f"{base}/discovery/agentcards/cli",  # a client publishing a card
            f"{base}/discovery/gatewaycards/cli",
            f"{base}/gateway/response/http/t1",  # forged answers
            f"{base}/agent/status/echo/t1",
            f"{base}/client/response/cli",
            f"{namespace}/anything",
        ],
    }
    allowed: list[str] = []
    for user in sorted(set(subscribes) | set(publishes)):
        transport = ruled_broker.transport(user)
        await transport.connect()
        try:
            for topic_filter in subscribes.get(user, []):
                try:
                    await transport.subscribe(topic_filter, lambda message: None)
                    allowed.append(f"{user} subscribed to {topic_filter}")
                except SubscribeError as exc:
                    assert "Not authorized" in str(exc)
            for topic in publishes.get(user, []):
                try:
                    await transport.publish(topic, b"{}", retain=True)
                    allowed.append(f"{user} published on {topic}")
                except NotAuthorizedError:
                    pass
        finally:
            await transport.close()
    kinds = sum(map(len, subscribes.values())) + sum(map(len, publishes.values()))
    assert kinds >= 30
    assert allowed == []

    # Connections: anonymous, a wrong password.
    refused = [
        BrokerSettings.from_url(ruled_broker.broker.url),
        BrokerSettings.from_url(ruled_broker.broker.url.replace("mqtt://", "mqtt://echo:wrong@")),
    ]
    for settings in refused:
        with pytest.raises(ConnectError, match=r"Not authorized|Bad user name or password"):
            await MqttTransport(settings).connect()


async def test_a_will_on_another_components_card_is_never_published(ruled_broker: RuledBroker, namespace: str) -> None:
    base = f"{namespace}/a2a/v1"
    echo_card, calculator_card = f"{base}/discovery/agentcards/echo", f"{base}/discovery/agentcards/calculator"
    watcher = ruled_broker.transport("echo")
    await watcher.connect()
    try:
        await watcher.publish(echo_card, b'{"name": "echo"}', retain=True)
        cards = Inbox()
        await watcher.subscribe(f"{base}/discovery/agentcards/+", cards)
        await cards.wait_until_topic(echo_card)  # the retained card
        # Mosquitto accepts the CONNECT and checks a will when it would publish it: die with a will
        # on echo's card, then (the barrier) with one on calculator's own card, which passes.
        calculator = ruled_broker.settings("calculator"), ruled_broker.client_id("calculator")
        await _die_with_will(*calculator, echo_card)
        await _die_with_will(*calculator, calculator_card)
        await cards.wait_until_topic(calculator_card)
        assert [m.payload for m in cards.messages if m.topic == echo_card] == [b'{"name": "echo"}']
    finally:
        await watcher.close()


async def _die_with_will(settings: BrokerSettings, client_id: str | None, topic: str) -> None:
    """Connect in a child process with an empty retained will on ``topic``, then exit without DISCONNECT."""
    script = textwrap.dedent(
        f"""
        import asyncio, os
        from mesh.broker import BrokerSettings
        from mesh.transport import MqttTransport, Will
        async def main():
            settings = BrokerSettings(host="127.0.0.1", port={settings.port}, username={settings.username!r},
                                      password={settings.password!r})
            await MqttTransport(settings, client_id={client_id!r}, will=Will({topic!r}, b"", retain=True)).connect()
            os._exit(0)
        asyncio.run(main())
        """
    )
    child = await asyncio.create_subprocess_exec(sys.executable, "-c", script)
    assert await child.wait() == 0


async def test_every_legitimate_flow_works(
    ruled_broker: RuledBroker, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    memory = AgentSettings(task_store=":memory:")
    replica = AgentSettings(task_store=":memory:", shared_subscription=True)
    agents = [(EchoAgent(), memory), (CalculatorAgent(), memory), (OrchestratorAgent(), memory)]
    agents += [(CountdownAgent(), replica), (CountdownAgent(), replica)]  # two replicas: a $share group
    services = [
        AgentService(a, broker=ruled_broker.settings(a.name), namespace=namespace, settings=settings)
        for a, settings in agents
    ]
    gateway = HttpGateway(
        HttpGatewaySettings(id="http", port=0, default_agent="echo"),
        broker=ruled_broker.settings("http"),
        namespace=namespace,
    )
    started: list[AgentService | HttpGateway] = []
    try:
        for service in services:
            await service.start()  # the name probe, the request subscription, the card
            started.append(service)
        # The probe saw its own marker (its answer topic is readable) and found the names free.
        assert not [r for r in caplog.records if "could not check whether another instance" in r.getMessage()]
        with pytest.raises(AgentNameTakenError):  # ... and a second echo finds the live one
            await AgentService(
                EchoAgent(), broker=ruled_broker.settings("echo"), namespace=namespace, settings=memory
            ).start()

        async with MeshClient.connect(ruled_broker.settings("cli"), namespace) as client:
            for name in AGENTS:  # discovery
                assert (await client.wait_for_agent(name, timeout=5)).name == name
            sent = await client.send("echo", "under the rules")  # send
            assert isinstance(sent, Task) and sent.status.state is TaskState.completed
            items = [item async for item in client.stream("countdown", "2")]  # stream
            final = items[-1]
            assert isinstance(final, Task) and final.status.state is TaskState.completed and len(items) > 3
            routed = await client.send("orchestrator", "what is 2+3")  # delegate to calculator
            assert isinstance(routed, Task) and routed.status.state is TaskState.completed
            assert "5" in str(routed.model_dump())
            for _ in range(4):  # the replicas take turns
                counted = await client.send("countdown", "1")
                assert isinstance(counted, Task) and counted.status.state is TaskState.completed

        await gateway.start()  # its card, its answer topics, discovery
        started.append(gateway)
        await gateway.runtime.registry.wait_for("echo", 5)
        async with httpx.AsyncClient(timeout=30) as http:
            response = await call(http, f"{gateway.public_url}/a2a/agents/echo", "message/send", {"message": message()})
        task = result_of(response)
        assert task["status"]["state"] == "completed" and task["status"]["message"]["parts"][0]["text"] == "hi"
    finally:
        for component in reversed(started):
            await component.stop()


async def test_the_dashboard_watcher_only_reads_and_the_doctor_only_probes(
    ruled_broker: RuledBroker, namespace: str
) -> None:
    """Two rights of their own: a gateway's dashboard watcher (``http@watch``) reads the namespace's
    cards, requests (one agent at a time) and answers, and publishes nothing but a roll call; the
    doctor uses its scratch tree (``mesh-doctor/...``) and nothing of the mesh."""
    base = f"{namespace}/a2a/v1"
    echo_requests = f"{base}/agent/request/echo"
    may_read = {
        "http@watch": [
            f"{base}/discovery/#",
            echo_requests,
            *(f"{base}/{kind}/{family}/+/+" for kind in ("agent", "gateway") for family in ("response", "status")),
            f"{base}/client/response/+",
            f"{base}/client/status/+/+",
        ],
        "doctor": ["mesh-doctor/x1/#", "$share/doctor/mesh-doctor/x1/shared"],
    }
    may_publish = {"http@watch": [f"{base}/rollcall", f"{base}/discovery/rollcall"], "doctor": ["mesh-doctor/x1/up"]}
    may_not_read = {
        "http@watch": [
            f"$share/echo/{echo_requests}",  # taking echo's requests from it
            f"$share/watch/{echo_requests}",
            # (Not refused: f"{base}/agent/request/+", which the pattern allowing each agent's topic
            # matches too; docs/security-model.md says what a holder of the watcher's password gains.)
            f"{echo_requests}/+",
            f"{namespace}/#",
            "#",
            "$SYS/#",
            "other/a2a/v1/agent/response/+/+",
        ],
        "doctor": [f"{base}/discovery/#", echo_requests, f"{base}/agent/response/+/+", "#", "$SYS/#", "mesh-doctors/x"],
    }
    may_not_publish = {
        "http@watch": [
            echo_requests,
            f"{base}/discovery/gatewaycards/http",
            f"{base}/gateway/response/http/t1",
            f"{base}/agent/response/echo/t1",
        ],
        "doctor": [
            echo_requests,
            f"{base}/discovery/agentcards/doctor",
            f"{base}/rollcall",
            f"{base}/discovery/rollcall",
            "outside/x",
        ],
    }
    unexpected: list[str] = []
    for user in ("http@watch", "doctor"):
        async with ruled_broker.transport(user) as transport:
            for topic_filter in may_read[user]:
                await transport.subscribe(topic_filter, lambda message: None)  # raises if refused
            for topic in may_publish[user]:
                await transport.publish(topic, b"{}")
            for topic_filter in may_not_read[user]:
                try:
                    await transport.subscribe(topic_filter, lambda message: None)
                    unexpected.append(f"{user} subscribed to {topic_filter}")
                except SubscribeError as exc:
                    assert "Not authorized" in str(exc) and repr(user) in str(exc)
            for topic in may_not_publish[user]:
                try:
                    await transport.publish(topic, b"{}", retain=True)
                    unexpected.append(f"{user} published on {topic}")
                except NotAuthorizedError:
                    pass
    assert unexpected == []
