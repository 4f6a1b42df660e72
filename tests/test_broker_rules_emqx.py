"""The generated broker rules cover the EMQX profile's ``$a2a/...`` topics and its client-id rule.

A real Mosquitto under the dynamic-security rules ``mesh broker-config`` writes for an agent that
serves the profile: its profile connection is a broker user of its own (``echo@a2a``) bound to
the client id ``{org}/{unit}/echo``; the official SDK's Requester, connected as the CLI client,
calls it; what the profile gives nobody else is refused by the broker (SUBACK, PUBACK 0x87,
CONNACK).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from a2a_over_mqtt import A2ARequest, MqttConfig, Requester, TopicSpace

from agents.service import AgentService
from agents.settings import AgentSettings
from mesh.broker import BrokerSettings
from mesh.brokertools.brokerfiles import write_broker_files
from mesh.brokertools.brokerrules import Identity, ProfileScope, profile_user
from mesh.brokertools.localbroker import LocalBroker
from mesh.config.credentials import password_for
from mesh.errors import ConnectError, NotAuthorizedError, SubscribeError
from mesh.profile.emqx import EmqxProfile
from mesh.transport import MqttTransport
from tests.agents.service_agents import Echo
from tests.test_broker_rules import RuledBroker, broker_under_rules


@pytest.fixture
def org() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def ruled_broker(
    make_broker: Callable[..., LocalBroker], broker_dir: Path, namespace: str, org: str
) -> Iterator[RuledBroker]:
    identities = [
        Identity("agent", "echo", namespace, profile=ProfileScope(org, "ai", "echo")),
        Identity("agent", "calculator", namespace),
        Identity("client", "cli", namespace),
        # The SDK's requester picks its own client ids: a client user left unbound for it.
        Identity("client", "sdk", namespace, unbound=True),
    ]
    with broker_under_rules(make_broker, broker_dir, namespace, identities) as ruled:
        yield ruled


async def test_a_profile_agent_serves_the_sdk_under_the_rules(
    ruled_broker: RuledBroker, namespace: str, org: str
) -> None:
    service = AgentService(
        Echo(),
        broker=ruled_broker.settings("echo"),
        namespace=namespace,
        settings=AgentSettings(task_store=":memory:", emqx=EmqxProfile(org=org, unit="ai")),
    )
    await service.start()
    try:
        assert service.profile is not None
        assert service.profile.transport.client_id == f"{org}/ai/echo"
        broker = BrokerSettings.from_url(ruled_broker.broker.url)
        cli = MqttConfig(
            host=broker.host,
            port=broker.port,
            username="sdk",
            password=password_for(ruled_broker.files.passwords, "sdk"),
        )
        requester = Requester(cli, TopicSpace(org=org, unit="ai"), requester_id="sdk", first_reply_timeout=5)
        replies = [
            item async for item in requester.stream("echo", A2ARequest(text="ruled", request_id="r").to_json(), "c")
        ]
        assert replies == [("terminal", "ruled")]
    finally:
        await service.stop()


async def test_the_profile_grants_nothing_more(ruled_broker: RuledBroker, org: str) -> None:
    base = "$a2a/v1"
    subscribes = {
        "cli": [f"{base}/request/{org}/ai/echo", f"{base}/reply/{org}/ai/other/+", f"{base}/#", "$a2a/#"],
        "calculator": [f"{base}/request/{org}/ai/echo", f"$share/g/{base}/request/{org}/ai/echo"],
        profile_user("echo"): [f"{base}/request/{org}/ai/other", f"{base}/reply/+/+/+/+"],
    }
    publishes = {
        "cli": [f"{base}/discovery/{org}/ai/echo", f"{base}/reply/{org}/ai/x/y", f"{base}/event/{org}/ai/echo"],
        "calculator": [f"{base}/discovery/{org}/ai/calculator"],
        profile_user("echo"): [f"{base}/discovery/{org}/ai/other", f"{base}/event/{org}/ai/other"],
    }
    client_ids = {profile_user("echo"): f"{org}/ai/echo"}
    allowed: list[str] = []
    for user in subscribes:
        settings = ruled_broker.settings(user)
        if user == profile_user("echo"):
            settings = BrokerSettings.from_url(
                ruled_broker.broker.url, username=user, password=password_for(ruled_broker.files.passwords, user)
            )
        # The profile user under its profile client id; the others under the one their rules allow.
        transport = MqttTransport(settings, client_id=client_ids.get(user) or ruled_broker.client_id(user))
        await transport.connect()
        try:
            for topic_filter in subscribes[user]:
                try:
                    await transport.subscribe(topic_filter, lambda message: None)
                    allowed.append(f"{user} subscribed to {topic_filter}")
                except SubscribeError as exc:
                    assert "Not authorized" in str(exc)
            for topic in publishes[user]:
                try:
                    await transport.publish(topic, b"{}", retain=True)
                    allowed.append(f"{user} published on {topic}")
                except NotAuthorizedError:
                    pass
        finally:
            await transport.close()
    assert allowed == []
    # The client-id rule: the profile user connects as {org}/{unit}/{agent} only.
    user = profile_user("echo")
    wrong = BrokerSettings.from_url(
        ruled_broker.broker.url, username=user, password=password_for(ruled_broker.files.passwords, user)
    )
    with pytest.raises(ConnectError, match=r"Not authorized|Bad user name or password|identifier"):
        await MqttTransport(wrong, client_id=f"{org}/ai/impostor").connect()


def test_broker_config_and_mesh_up_secure_read_the_profile_from_the_config(tmp_path: Path) -> None:
    """`mesh broker-config` / `mesh up --secure` name the components from the config: an agent with
    `emqx:` gets its profile user, bound to its client id; one without gets none."""
    import json

    from mesh.brokertools.brokerfiles import identities_of
    from mesh.config import load_config

    config = tmp_path / "mesh.yaml"
    config.write_text(
        "namespace: acme/ai\n"
        "emqx: {org: acme, unit: ai}\n"
        "agents:\n"
        "  - class: agents.builtin.echo:EchoAgent\n"
        "  - class: agents.builtin.calculator:CalculatorAgent\n"
        "    emqx: null\n"
    )
    identities = identities_of([load_config(config)], ["cli"])
    scopes = {i.name: i.profile for i in identities}
    assert scopes["echo"] == ProfileScope("acme", "ai", "echo", None, False)
    assert scopes["calculator"] is None and scopes["cli"] is None
    files = write_broker_files(tmp_path / "broker", identities)
    clients = {c["username"]: c for c in json.loads(files.dynsec.read_text())["clients"]}
    assert clients["echo@a2a"]["clientid"] == "acme/ai/echo"
    assert "calculator@a2a" not in clients
    # echo's mesh identity keeps the client id of its own (bound by the mesh's rules), not the profile's.
    assert clients["echo"]["clientid"] not in ("acme/ai/echo", None)
