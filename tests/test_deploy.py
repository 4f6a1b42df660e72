"""deploy/: the ACL on a real Mosquitto, and the configs compose.yaml runs."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from agents.service import AgentService
from mesh.a2a import Task, TaskState
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.config import load_config
from mesh.errors import AgentNameTakenError, NotAuthorizedError
from mesh.localbroker import LocalBroker
from mesh.sections import build_components
from mesh.transport import MqttTransport
from tests.agents.service_agents import Echo
from tests.support import Inbox

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"


@pytest.fixture
def secured_broker(make_broker: Callable[..., LocalBroker], namespace: str, broker_dir: Path) -> LocalBroker:
    """Mosquitto with deploy/'s ACL (for this test's namespace) and users echo, caller, rogue."""
    acl = broker_dir / "acl"
    acl.write_text((DEPLOY / "mosquitto" / "acl").read_text().replace("mesh/a2a/v1/", f"{namespace}/a2a/v1/"))
    passwd = broker_dir / "passwd"
    for index, user in enumerate(("echo", "caller", "rogue")):
        create = ["-c"] if index == 0 else []
        subprocess.run(["mosquitto_passwd", *create, "-b", str(passwd), user, "pw"], check=True)
    for path in (acl, passwd):
        path.chmod(0o644)
    return make_broker(f"allow_anonymous false\npassword_file {passwd}\nacl_file {acl}")


def as_user(broker: LocalBroker, user: str) -> BrokerSettings:
    return BrokerSettings.from_url(f"mqtt://{user}:pw@127.0.0.1:{broker.port}")


async def test_the_acl_lets_each_component_do_its_job_and_no_more(secured_broker: LocalBroker, namespace: str) -> None:
    echo = AgentService(Echo(), broker=as_user(secured_broker, "echo"), namespace=namespace)
    await echo.start()  # subscribes to its requests, publishes its card: both allowed
    with pytest.raises(AgentNameTakenError):  # the ACL lets a second echo's name check see the first
        await AgentService(Echo(), broker=as_user(secured_broker, "echo"), namespace=namespace).start()
    rogue = MqttTransport(as_user(secured_broker, "rogue"))
    await rogue.connect()
    try:
        stolen, seen = Inbox(), Inbox()
        await rogue.subscribe(f"{namespace}/a2a/v1/agent/request/echo", stolen)  # granted, never delivered
        await rogue.subscribe(f"{namespace}/a2a/v1/discovery/#", seen)
        await seen.wait_for(1)  # echo's retained card: discovery is readable by all

        async with MeshClient.connect(as_user(secured_broker, "caller"), namespace, client_id="caller") as caller:
            task = await caller.send("echo", "through the ACL")
            assert isinstance(task, Task) and task.status.state is TaskState.completed
            # A barrier on rogue's connection: the caller's own card comes after its request.
            await caller.transport.publish(f"{namespace}/a2a/v1/discovery/agentcards/caller", b"{}")
            await seen.wait_until_topic(f"{namespace}/a2a/v1/discovery/agentcards/caller")
        assert stolen.messages == []  # rogue never read echo's requests

        with pytest.raises(NotAuthorizedError):  # nor can it pose as echo
            await rogue.publish(f"{namespace}/a2a/v1/discovery/agentcards/echo", b"{}", retain=True)
    finally:
        await rogue.close()
        await echo.stop()


def test_the_deploy_configs_load() -> None:
    broker = BrokerSettings.from_url("mqtt://127.0.0.1:1883")
    agents = build_components(load_config(DEPLOY / "agents.yaml"), broker)
    assert sorted(c.name for c in agents) == ["calculator", "countdown", "echo", "orchestrator"]
    gateway = build_components(load_config(DEPLOY / "gateway.yaml", environ={"A2A_TOKEN": "t"}), broker)
    assert [(c.kind, c.name) for c in gateway] == [("gateway", "http")]
