"""Trust in the agent runtime on the real broker: user tokens, call properties, signed cards
and the orchestrator's routing policy."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from joserfc import jwk

from agents import Agent, AgentSettings, TaskContext
from agents.builtin.calculator import CalculatorAgent
from agents.builtin.echo import EchoAgent
from agents.builtin.orchestrator import OrchestratorAgent
from agents.service import AgentService
from mesh.a2a import (
    AgentSkill,
    Message,
    MessageSendParams,
    Task,
    TaskState,
    TextPart,
    create_user_message,
    request_bytes,
)
from mesh.a2a import get_text_from_message as text
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.properties import MessageProperties
from mesh.trust import TokenMinter, Trust, generate_keys, load_private_key
from mesh.trust.config import TrustSettings, resolve
from tests.agents.service_agents import Blocker, Relay
from tests.conftest import TransportFactory
from tests.mesh.test_trust import card
from tests.support import answer_of

NAMES = ["whoami", "relay", "blocker", "orchestrator", "echo", "calculator", "http", "evil"]


class Whoami(Agent):
    name = "whoami"
    skills = (AgentSkill(id="who", name="Who", description="who asks", tags=["who"]),)

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        identity = ctx.identity
        return json.dumps(
            {"user": ctx.user_id, "verified": ctx.user_verified, "issuer": identity.issuer, "why": identity.problem}
        )


Serve = Callable[..., Awaitable[AgentService]]


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    generate_keys(tmp_path, NAMES)
    return tmp_path


def trust_of(keys: Path, name: str, **settings: Any) -> Trust:
    return resolve(TrustSettings(keys=keys, **settings), name, Path("."))


@pytest.fixture
async def serve(broker_settings: BrokerSettings, namespace: str, keys: Path) -> AsyncIterator[Serve]:
    """``await serve(agent, settings, signed=True, token_issuers=...)``: served with trust from ``keys``."""
    started: list[AgentService] = []

    async def start(agent: Agent, settings: AgentSettings | None = None, **trust: Any) -> AgentService:
        service = AgentService(
            agent,
            broker=broker_settings,
            namespace=namespace,
            settings=settings,
            trust=trust_of(keys, agent.name, **trust),
        )
        await service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        await service.stop()


def minter(keys: Path, name: str, audience: str, **options: Any) -> TokenMinter:
    return TokenMinter(load_private_key(keys / f"{name}.jwk"), issuer=name, audience=audience, **options)


async def ask(client: MeshClient, agent: str, *, user: str | None, token: str | None) -> Task:
    client.user_id, client.auth_token = user, token
    task = await client.send(agent, "who am i")
    assert isinstance(task, Task)
    return task


def who(task: Task) -> dict[str, Any]:
    assert task.status.message is not None
    answer: dict[str, Any] = json.loads(text(task.status.message))
    return answer


def forged_tokens(keys: Path, namespace: str) -> dict[str, str | None]:
    impostor = TokenMinter(
        jwk.ECKey.generate_key("P-256", parameters={"kid": "http"}, private=True), issuer="http", audience=namespace
    )
    expired = minter(keys, "http", namespace, ttl_s=60, clock=lambda: time.time() - 3600)
    return {
        "no token": None,
        "trusted key, untrusted issuer": minter(keys, "evil", namespace).mint("alice"),
        "untrusted key": impostor.mint("alice"),
        "expired": expired.mint("alice"),
        "wrong audience": minter(keys, "http", "other/ns").mint("alice"),
        "not a token": "alice-secret-token",
    }


# --- user tokens -----------------------------------------------------------------------------------


async def test_a_forged_user_id_is_reported_unverified_and_a_trusted_token_verified(
    serve: Serve, client: MeshClient, keys: Path, namespace: str
) -> None:
    await serve(Whoami(), token_issuers=["http"])
    for case, token in forged_tokens(keys, namespace).items():
        answer = who(await ask(client, "whoami", user="alice", token=token))
        assert answer["user"] == "alice" and answer["verified"] is False and answer["why"], case
    good = minter(keys, "http", namespace).mint("alice")
    answer = who(await ask(client, "whoami", user="mallory", token=good))  # the token's subject wins
    assert answer == {"user": "alice", "verified": True, "issuer": "http", "why": None}


async def test_required_tokens_refuse_every_request_without_a_valid_one(
    serve: Serve, client: MeshClient, keys: Path, namespace: str
) -> None:
    await serve(Whoami(), AgentSettings(require_user_token=True), token_issuers=["http"])
    payload = request_bytes(
        "message/send", "r-1", MessageSendParams(message=create_user_message([TextPart(text="who")]))
    )
    for case, token in forged_tokens(keys, namespace).items():
        answer = await answer_of(client, payload, MessageProperties(user_id="alice", auth_token=token), "whoami")
        error = answer["error"]
        assert error["code"] == -32020 and error["data"]["property"] == "authToken", case
        assert "require_user_token" in error["message"] and error["data"]["reason"], case
    good = minter(keys, "http", namespace).mint("alice")
    assert who(await ask(client, "whoami", user="alice", token=good))["verified"] is True


async def test_delegation_forwards_the_token_so_the_peer_verifies_the_same_user(
    serve: Serve, client: MeshClient, keys: Path, namespace: str
) -> None:
    required = AgentSettings(require_user_token=True)
    await serve(Whoami(), required, token_issuers=["http"])
    await serve(Relay(next_agent="whoami"), required, token_issuers=["http"])
    task = await ask(client, "relay", user="alice", token=minter(keys, "http", namespace).mint("alice"))
    assert task.status.message is not None
    relayed = text(task.status.message)
    assert relayed.startswith("relay<") and relayed.endswith(">"), relayed
    answer = json.loads(relayed[len("relay<") : -1])
    assert answer == {"user": "alice", "verified": True, "issuer": "http", "why": None}


async def test_the_timeout_cancel_of_a_sub_task_carries_the_token_an_agent_requires(
    serve: Serve, client: MeshClient, keys: Path, namespace: str
) -> None:
    required = AgentSettings(require_user_token=True)
    blocker = await serve(Blocker(), required, token_issuers=["http"])
    await serve(Relay(next_agent="blocker", timeout=0.3), required, token_issuers=["http"])
    task = await ask(client, "relay", user="alice", token=minter(keys, "http", namespace).mint("alice"))
    assert task.status.message is not None and "the task was canceled" in text(task.status.message)
    [record] = list(blocker.tasks._tasks.values())
    await asyncio.wait_for(record.settled.wait(), 5)
    assert record.state is TaskState.canceled


def test_require_user_token_without_trusted_issuers_is_a_config_error(broker_settings: BrokerSettings) -> None:
    with pytest.raises(ValueError, match="token_issuers"):
        AgentService(Whoami(), broker=broker_settings, namespace="ns", settings=AgentSettings(require_user_token=True))


# --- call properties -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "prop", "says"),
    [
        ({"call_depth": -1}, "callDepth", "negative"),
        ({"extra": [("callDepth", "deep")]}, "callDepth", "not an integer"),
        ({"extra": [("a2aCallChain", "relay")]}, "a2aCallChain", "not a JSON list"),
        ({"extra": [("a2aCallChain", '{"a": 1}')]}, "a2aCallChain", "not a JSON list"),
        ({"call_chain": ["relay", "#"]}, "a2aCallChain", "no agent name"),
        ({"call_chain": ["a"] * 11}, "a2aCallChain", "at most 10"),
    ],
)
async def test_malformed_call_depth_and_call_chain_are_refused_naming_the_property(
    serve: Serve, client: MeshClient, props: dict[str, Any], prop: str, says: str
) -> None:
    await serve(Whoami())
    payload = request_bytes("message/send", "c-1", MessageSendParams(message=create_user_message([TextPart(text="x")])))
    error = (await answer_of(client, payload, MessageProperties(**props), "whoami"))["error"]
    assert error["code"] == -32600 and error["data"]["property"] == prop and says in error["message"]


# --- signed cards and the orchestrator -------------------------------------------------------------


async def publish_hostile_cards(make_transport: TransportFactory, namespace: str, keys: Path) -> None:
    """An unsigned card with the tags of echo, a card named '#', one on another agent's topic."""
    attacker = await make_transport()
    base = f"{namespace}/a2a/v1/discovery/agentcards"
    bait = card("evil").model_copy(update={"skills": [AgentSkill(id="e", name="echo", description="", tags=["echo"])]})
    await attacker.publish(f"{base}/evil", bait.to_json_bytes(), retain=True)
    await attacker.publish(base, card("#").model_copy(update={"skills": bait.skills}).to_json_bytes())
    evil_signed = Trust("evil", signing_key=load_private_key(keys / "evil.jwk")).sign(bait)
    await attacker.publish(f"{base}/calculator", evil_signed.to_json_bytes(), retain=True)


async def test_the_orchestrator_with_trust_asks_only_signed_agents_and_keeps_answering(
    serve: Serve, client: MeshClient, make_transport: TransportFactory, namespace: str, keys: Path
) -> None:
    await publish_hostile_cards(make_transport, namespace, keys)
    await serve(EchoAgent())
    await serve(CalculatorAgent())
    orchestrator = await serve(OrchestratorAgent())
    for name in ("echo", "calculator"):
        await orchestrator.registry.wait_for(name, 5)
    await publish_hostile_cards(make_transport, namespace, keys)  # again, over the real cards
    for _ in range(3):
        task = await client.send("orchestrator", "echo hello and 2+2")
        assert isinstance(task, Task) and task.status.message is not None
        answer = text(task.status.message)
        assert answer.splitlines() == ["calculator: 4", "echo: echo hello and 2+2"], answer
    assert orchestrator.registry.agent_names() == ["calculator", "echo", "orchestrator"]
    assert orchestrator.registry.rejected >= 4


async def test_without_trust_a_card_named_hash_does_not_take_the_orchestrator_down(
    serve_agent: Callable[..., Awaitable[AgentService]],
    client: MeshClient,
    make_transport: TransportFactory,
    namespace: str,
    keys: Path,
) -> None:
    await serve_agent(EchoAgent())
    orchestrator = await serve_agent(OrchestratorAgent())
    await orchestrator.registry.wait_for("echo", 5)
    await publish_hostile_cards(make_transport, namespace, keys)
    await orchestrator.registry.wait_for("evil", 5)  # unsigned is fine without trust; '#' is not
    task = await client.send("orchestrator", "echo hello")
    assert isinstance(task, Task) and task.status.message is not None
    assert "echo: echo hello" in text(task.status.message).splitlines()
    assert "#" not in orchestrator.registry.agent_names()


async def test_the_orchestrator_with_an_allow_list_asks_no_other_agent(
    serve_agent: Callable[..., Awaitable[AgentService]], client: MeshClient
) -> None:
    await serve_agent(EchoAgent())
    await serve_agent(CalculatorAgent())
    orchestrator = await serve_agent(OrchestratorAgent(allow=["calc*"]))
    for name in ("echo", "calculator"):
        await orchestrator.registry.wait_for(name, 5)
    task = await client.send("orchestrator", "echo hello and 2+2")
    assert isinstance(task, Task) and task.status.message is not None
    assert text(task.status.message).splitlines() == ["calculator: 4"]
    tagged = await serve_agent(OrchestratorAgent(name="by-tag", allow_tags=["echo"]))
    await tagged.registry.wait_for("calculator", 5)
    task = await client.send("by-tag", "echo hello and 2+2")
    assert isinstance(task, Task) and task.status.message is not None
    assert text(task.status.message).splitlines() == ["echo: echo hello and 2+2"]


# --- the trust: section of a mesh config file --------------------------------------------------------


def test_a_config_files_trust_reaches_every_component_and_an_entry_overrides_it(
    tmp_path: Path, broker_settings: BrokerSettings
) -> None:
    from gateways.http.server import HttpGateway
    from mesh.config import load_config
    from mesh.config.sections import build_many
    from mesh.errors import ConfigError

    generate_keys(tmp_path / "keys", ["echo", "http"])
    (tmp_path / "mesh.yaml").write_text(
        "trust:\n  keys: keys/\n  token_issuers: [http]\n"
        "agents:\n"
        "  - class: agents.builtin.echo:EchoAgent\n    require_user_token: true\n"
        "  - class: agents.builtin.calculator:CalculatorAgent\n    trust: {token_issuers: []}\n"
        "gateways:\n  - kind: http\n    port: 0\n    trust: {token_ttl_s: 60}\n"
    )
    echo, calculator, gateway = build_many([load_config(tmp_path / "mesh.yaml")], broker_settings)
    assert isinstance(echo, AgentService) and isinstance(calculator, AgentService) and isinstance(gateway, HttpGateway)
    assert echo.trust is not None and echo.trust.signing_key is not None and echo.guard.tokens is not None
    assert calculator.trust is not None and calculator.trust.signing_key is None and calculator.guard.tokens is None
    assert gateway.runtime.tokens is not None and gateway.runtime.tokens.ttl_s == 60
    assert calculator.registry.verifier is not None  # unsigned itself, it still trusts only signed cards
    (tmp_path / "bad.yaml").write_text("trust:\n  key: keys/\n")
    with pytest.raises(ConfigError, match=r"trust\.key: unknown key 'key'; did you mean 'keys'"):
        load_config(tmp_path / "bad.yaml")
