"""The mesh side of a gateway: envelopes in, E2A frames out, against the real broker."""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from gateways.runtime import GatewayRuntime
from mesh.a2a import AgentCapabilities, AgentCard, TaskState
from mesh.broker import BrokerSettings
from mesh.discovery.registry import DiscoveryRegistry
from mesh.e2a import (
    E2AAuth,
    E2AEnvelope,
    E2AResponse,
    ResponseLog,
    envelope_from_a2a_send_message,
)
from tests.agents.service_agents import Blocker, Echo, Streamer
from tests.conftest import ServeAgent, TransportFactory
from tests.gateways.frames import validate_response_frames

Start = Callable[..., Awaitable[GatewayRuntime]]


def gateway_card() -> bytes:
    return AgentCard(
        name="gw",
        description="test gateway",
        version="1",
        url="http://127.0.0.1:1/a2a",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[],
    ).to_json_bytes()


@pytest.fixture
async def gateway(broker_settings: BrokerSettings, namespace: str) -> AsyncIterator[Start]:
    started: list[GatewayRuntime] = []

    async def start(**options: object) -> GatewayRuntime:
        runtime = GatewayRuntime("gw", broker=broker_settings, namespace=namespace, card=gateway_card, **options)  # type: ignore[arg-type]
        await runtime.start()
        started.append(runtime)
        return runtime

    yield start
    for runtime in started:
        await runtime.stop()


def send_envelope(text: str, *, stream: bool = False, task_id: str | None = None) -> E2AEnvelope:
    message = {"kind": "message", "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": text}]}
    if task_id:
        message["taskId"] = task_id
    envelope = envelope_from_a2a_send_message(
        task_id=task_id, context_id=None, message_body=message, metadata={"via": "test"}, channel="http"
    )
    envelope.request_id, envelope.jsonrpc_id, envelope.is_stream, envelope.user_id = "r1", 7, stream, "ada"
    return envelope


async def collect(runtime: GatewayRuntime, envelope: E2AEnvelope, agent: str, **kwargs: object) -> list[E2AResponse]:
    frames = [frame async for frame in runtime.forward(envelope, agent, **kwargs)]  # type: ignore[arg-type]
    validate_response_frames(frames)  # sequence 0.., one final frame, last
    return frames


async def test_send_yields_events_then_the_task(serve_agent: ServeAgent, gateway: Start) -> None:
    await serve_agent(Echo())
    runtime = await gateway()
    await runtime.registry.wait_for("echo", 2)
    frames = await collect(runtime, send_envelope("hello"), "echo")
    final = frames[-1]
    assert final.response_kind == "a2a.task" and final.status == "succeeded" and final.jsonrpc_id == 7
    assert final.body["status"]["state"] == "completed"
    assert final.body["status"]["message"]["parts"][0]["text"] == "hello"
    assert all(f.response_kind == "a2a.stream_event" and not f.is_final for f in frames[:-1])
    route = runtime.task_route(final.body["id"])
    assert route is not None and route.agent == "echo" and route.state == "completed" and route.owner is None


async def test_stream_yields_status_and_artifact_branches(serve_agent: ServeAgent, gateway: Start) -> None:
    await serve_agent(Streamer(steps=2))
    runtime = await gateway()
    await runtime.registry.wait_for("streamer", 2)
    frames = await collect(runtime, send_envelope("go", stream=True), "streamer")
    branches = [f.body["branch"] for f in frames[:-1]]
    assert set(branches) == {"status_update", "artifact_update"}
    assert frames[-2].body["payload"]["final"] is True
    assert frames[-1].body["status"]["state"] == "completed"


async def test_unknown_agent_is_one_error_frame_listing_the_agents(serve_agent: ServeAgent, gateway: Start) -> None:
    await serve_agent(Echo())
    runtime = await gateway()
    await runtime.registry.wait_for("echo", 2)
    [frame] = await collect(runtime, send_envelope("x"), "ghost")
    assert frame.response_kind == "e2a.error" and frame.status == "failed"
    assert frame.body["code"] == -32000 and frame.body["details"]["availableAgents"] == ["echo"]


async def test_an_idle_task_is_canceled_on_the_mesh_and_answered(serve_agent: ServeAgent, gateway: Start) -> None:
    blocker = await serve_agent(Blocker())
    runtime = await gateway(idle_timeout_s=0.3)
    await runtime.registry.wait_for("blocker", 2)
    [*_, final] = await collect(runtime, send_envelope("wait"), "blocker")
    assert final.body["code"] == -32030 and final.body["details"]["errorType"] == "Timeout"
    [record] = list(blocker.tasks._tasks.values())
    await asyncio.wait_for(record.settled.wait(), 5)
    assert record.state is TaskState.canceled


async def test_the_request_deadline_also_cancels(serve_agent: ServeAgent, gateway: Start) -> None:
    blocker = await serve_agent(Blocker())
    runtime = await gateway()
    await runtime.registry.wait_for("blocker", 2)
    [*_, final] = await collect(runtime, send_envelope("wait"), "blocker", deadline_s=0.3)
    assert final.body["code"] == -32030 and "timeout ran out" in final.body["message"]
    [record] = list(blocker.tasks._tasks.values())
    await asyncio.wait_for(record.settled.wait(), 5)
    assert record.state is TaskState.canceled


async def test_agent_errors_become_error_frames(serve_agent: ServeAgent, gateway: Start) -> None:
    await serve_agent(Echo())
    runtime = await gateway()
    await runtime.registry.wait_for("echo", 2)
    envelope = E2AEnvelope(method="tasks/get", params={"id": "nope"}, request_id="r2", jsonrpc_id="j2", channel="http")
    [frame] = await collect(runtime, envelope, "echo")
    assert frame.response_kind == "e2a.error" and frame.body["code"] == -32001


async def test_the_gateway_card_is_on_the_discovery_topic(
    gateway: Start, make_transport: TransportFactory, namespace: str
) -> None:
    await gateway()
    registry = DiscoveryRegistry(await make_transport(), namespace)
    await registry.start()
    try:
        entry = await registry.wait_for("gw", 2, kind="gateway")
        assert entry.card.description == "test gateway"
    finally:
        await registry.stop()


async def test_the_response_log_has_every_frame_and_no_secret(serve_agent: ServeAgent, gateway: Start) -> None:
    await serve_agent(Echo())
    sink = io.StringIO()
    runtime = await gateway(response_log=ResponseLog(sink))
    await runtime.registry.wait_for("echo", 2)
    envelope = send_envelope("secret-free")
    envelope.auth = E2AAuth(bearer_token="tok-123")
    frames = await collect(runtime, envelope, "echo")
    assert runtime.response_log is not None and await asyncio.to_thread(runtime.response_log.flush, 5)
    lines = [json.loads(line) for line in sink.getvalue().splitlines()]
    assert [line["sequence"] for line in lines] == [f.sequence for f in frames]
    assert lines[-1]["is_final"] is True and "tok-123" not in sink.getvalue()


async def test_the_facade_shows_the_connection_and_the_agents(serve_agent: ServeAgent, gateway: Start) -> None:
    runtime = await gateway()
    assert runtime.is_connected and runtime.broker_url == runtime.transport.url
    assert runtime.agent("echo") is None and runtime.agent_names() == [] and runtime.agents() == []
    await serve_agent(Echo())
    await runtime.registry.wait_for("echo", 2)
    entry = runtime.agent("echo")
    assert entry is not None and entry.name == "echo" and entry.card.name == "echo"
    assert runtime.agent_names() == ["echo"] and [e.name for e in runtime.agents()] == ["echo"]
