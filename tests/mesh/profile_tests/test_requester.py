"""Mesh clients as requesters of EMQX "A2A over MQTT" profile agents, on the real broker.

The other side is the official SDK's ``Responder`` (run in this process, or in a child process
to kill) and mesh agents serving the profile. Each test takes an org of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import textwrap
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a_over_mqtt import A2ARequest, MqttConfig, Responder, TopicSpace, build_card

from agents import AgentSettings
from agents.service import AgentService
from mesh.a2a import Message, RpcError, Task, TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent
from mesh.a2a import get_text_from_message as text_of
from mesh.broker import BrokerSettings
from mesh.cli.discovery_commands import agents_table
from mesh.client import MeshClient
from mesh.discovery.registry import DiscoveryRegistry
from mesh.profile.emqx import EmqxProfile
from mesh.transport import MqttTransport
from tests.agents.service_agents import Asker, Echo

pytestmark = pytest.mark.asyncio


class SdkEcho(Responder):
    """The SDK's responder, as its README writes one; counts the requests it ran."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.ran: list[A2ARequest] = []
        self.gate: asyncio.Event | None = None
        self.started = asyncio.Event()

    async def on_request(self, request: A2ARequest, stream: Any) -> str:
        self.ran.append(request)
        self.started.set()
        await stream("thinking")
        if self.gate is not None:
            await self.gate.wait()
        return f"sdk: {request.text}"


@pytest.fixture
def org() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@contextlib.asynccontextmanager
async def running_sdk_agent(
    broker_settings: BrokerSettings, org: str, agent_id: str = "sdk-echo", skills: list[dict[str, Any]] | None = None
) -> AsyncIterator[SdkEcho]:
    """The SDK's responder running in this process, once its card is out (it is subscribed then)."""
    mqtt = MqttConfig(host=broker_settings.host, port=broker_settings.port)
    card = build_card(name=agent_id, description="the SDK's echo", url=broker_settings.url, skills=skills)
    agent = SdkEcho(agent_id=agent_id, mqtt=mqtt, topics=TopicSpace(org=org, unit="ai"), card=card)
    watcher = MqttTransport(broker_settings)
    await watcher.connect()
    announced = asyncio.Event()  # run() has no ready signal: its card comes once it subscribed
    await watcher.subscribe(f"$a2a/v1/discovery/{org}/ai/{agent_id}", lambda message: announced.set())
    running = asyncio.create_task(agent.run())
    try:
        await asyncio.wait_for(announced.wait(), 10)
        await watcher.close()
        yield agent
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running


@pytest.fixture
async def sdk_agent(broker_settings: BrokerSettings, org: str) -> AsyncIterator[SdkEcho]:
    async with running_sdk_agent(broker_settings, org) as agent:
        yield agent


@pytest.fixture
async def client(broker_settings: BrokerSettings, namespace: str) -> AsyncIterator[MeshClient]:
    async with MeshClient.connect(broker_settings, namespace) as client:
        yield client


async def test_mesh_send_stream_and_cancel_reach_the_sdk_responder(
    client: MeshClient, sdk_agent: SdkEcho, org: str
) -> None:
    name = f"{org}/ai/sdk-echo"
    await client.wait_for_agent(name, timeout=5)  # its retained card: it is subscribed
    events: list[Any] = []
    task = await client.send(name, "hello", on_event=events.append)
    assert isinstance(task, Task) and task.status.state is TaskState.completed
    assert text_of(task.artifacts[0]) == "sdk: hello"
    assert any(isinstance(e, TaskStatusUpdateEvent) for e in events)

    items = [item async for item in client.stream(name, "streamed")]
    assert isinstance(items[-1], Task) and items[-1].status.state is TaskState.completed
    assert any(isinstance(i, TaskArtifactUpdateEvent) for i in items)

    # Cancel: the SDK answers with a canceled status, read as the Task.
    sdk_agent.gate = asyncio.Event()
    sdk_agent.started.clear()
    task_id = str(uuid.uuid4())
    sending = asyncio.create_task(client.send(name, "wait", task_id=task_id))
    await asyncio.wait_for(sdk_agent.started.wait(), 10)
    canceled = await client.cancel_task(name, task_id)
    assert canceled.status.state is TaskState.canceled
    sending.cancel()

    # GetTask: the SDK's responder reads every method but CancelTask as SendMessage (no Task.id: -32005).
    with pytest.raises(RpcError) as refused:
        await client.get_task(name, task_id)
    assert refused.value.code == -32005


async def test_a_duplicate_task_id_runs_once_on_the_sdk_responder(
    client: MeshClient, sdk_agent: SdkEcho, org: str
) -> None:
    name = f"{org}/ai/sdk-echo"
    await client.wait_for_agent(name, timeout=5)
    task_id = str(uuid.uuid4())
    first = await client.send(name, "once", task_id=task_id)
    again = await client.send(name, "once", task_id=task_id)
    assert isinstance(first, Task) and isinstance(again, Task)
    assert again.status.state is TaskState.completed and text_of(again.artifacts[0]) == "sdk: once"
    assert len(sdk_agent.ran) == 1


async def test_mesh_client_reaches_a_mesh_agent_over_the_profile(
    client: MeshClient, broker_settings: BrokerSettings, namespace: str, org: str
) -> None:
    services = []
    for agent in (Asker(), Echo()):
        service = AgentService(
            agent,
            broker=broker_settings,
            namespace=namespace,
            settings=AgentSettings(task_store=":memory:", emqx=EmqxProfile(org=org, unit="ai")),
        )
        await service.start()
        services.append(service)
    try:
        first = await client.send(f"{org}/ai/asker", "hi")
        assert isinstance(first, Task) and first.status.state is TaskState.input_required
        second = await client.send(f"{org}/ai/asker", "Ada", task_id=first.id, context_id=first.context_id)
        assert isinstance(second, Task) and second.id == first.id
        assert second.status.state is TaskState.completed
        assert second.status.message is not None and text_of(second.status.message) == "Hello, Ada!"
        got = await client.get_task(f"{org}/ai/asker", first.id)
        assert got.status.state is TaskState.completed
        items = [item async for item in client.stream(f"{org}/ai/echo", "streamed")]
        assert isinstance(items[-1], Task | Message)
    finally:
        for service in services:
            await service.stop()


async def test_the_registry_lists_both_dialects_and_presence(
    broker_url: str, broker_settings: BrokerSettings, client: MeshClient, namespace: str, org: str
) -> None:
    service = AgentService(
        Echo(),
        broker=broker_settings,
        namespace=namespace,
        settings=AgentSettings(task_store=":memory:", emqx=EmqxProfile(org=org, unit="ai")),
    )
    await service.start()
    script = textwrap.dedent(
        f"""
        import asyncio
        from a2a_over_mqtt import MqttConfig, Responder, TopicSpace, build_card
        class Echo(Responder):
            async def on_request(self, request, stream):
                return request.text
        async def main():
            mqtt = MqttConfig(host={broker_settings.host!r}, port={broker_settings.port})
            card = build_card(name="sdk-echo", description="d", url="mqtt://x")
            agent = Echo(agent_id="sdk-echo", mqtt=mqtt, topics=TopicSpace(org={org!r}, unit="ai"), card=card)
            await agent.run()
        asyncio.run(main())
        """
    )
    proc = await asyncio.create_subprocess_exec(sys.executable, "-c", script, env={**os.environ})
    registry = DiscoveryRegistry(client.transport, namespace)
    sdk_card = asyncio.Event()  # the child process starts after the registry: wait for its card
    registry.add_listener(lambda event: sdk_card.set() if event.name == f"{org}/ai/sdk-echo" else None)
    await registry.start()
    try:
        await asyncio.wait_for(sdk_card.wait(), 20)
        await registry.wait_for(f"{org}/ai/echo", 5)
        await registry.wait_for("echo", 5)
        dialects = {e.name: e.dialect for e in registry.agents()}
        # The mesh agent serving the profile too is listed once, with both addresses.
        assert dialects == {"echo": "sam", f"{org}/ai/sdk-echo": "emqx"}
        echo = registry.get("echo")
        assert echo is not None and echo.profile == f"{org}/ai/echo"
        table = agents_table(registry.agents(), now=0)
        assert "DIALECT" in table.splitlines()[0] and "emqx" in table and "sam+emqx" in table
        # Presence: the killed SDK agent's will marks its card offline, and the registry drops it.
        gone = asyncio.Event()
        registry.add_listener(lambda event: gone.set() if event.name == f"{org}/ai/sdk-echo" else None)
        proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(gone.wait(), 10)  # the killed process's socket closes: the will at once
        assert registry.get(f"{org}/ai/sdk-echo") is None
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
        await registry.stop()
        await service.stop()


async def test_the_retry_profile_same_task_id_new_correlation_and_retryable_errors(
    make_transport: Any, broker_settings: BrokerSettings, org: str
) -> None:
    """A responder that ignores the first attempt and answers the second -32004: the third gets it."""
    import json as _json

    from mesh.profile.requester import ProfileRequester
    from mesh.properties import MessageProperties
    from mesh.transport import InboundMessage

    seen: list[tuple[str, bytes]] = []
    responder = await make_transport()
    requester_transport = await make_transport()

    def on_request(message: InboundMessage) -> None:
        doc = _json.loads(message.payload)
        seen.append((doc["params"]["message"]["taskId"], message.properties.correlation_data or b""))
        props = MessageProperties(correlation_data=message.properties.correlation_data)
        reply_to = message.properties.reply_to
        assert reply_to is not None
        if len(seen) == 2:
            error = {"code": -32004, "message": "busy", "data": {"a2a_error": "responder_unavailable"}}
            body = {"jsonrpc": "2.0", "id": doc["id"], "error": error}
        elif len(seen) == 3:
            task = {"id": seen[-1][0], "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}
            body = {"jsonrpc": "2.0", "id": doc["id"], "result": {"task": task}}
        else:
            return  # the first attempt goes unanswered
        responder.publish_nowait(reply_to, _json.dumps(body).encode(), properties=props)

    await responder.subscribe(f"$a2a/v1/request/{org}/ai/flaky", on_request)
    requester = ProfileRequester(requester_transport, "tester", first_reply_timeout_s=0.3, backoff_s=(0.05, 0.05))
    from mesh.a2a import MessageSendParams, TextPart, create_user_message

    params = MessageSendParams(message=create_user_message([TextPart(text="x")]))
    items = [item async for item in requester.items(f"{org}/ai/flaky", "message/send", params)]
    assert isinstance(items[-1], Task) and items[-1].status.state is TaskState.completed
    assert len(seen) == 3
    assert len({task_id for task_id, _ in seen}) == 1  # the same Task.id on every attempt
    assert len({correlation for _, correlation in seen}) == 3  # new Correlation Data each time
    # -32005 is not retried: it is raised at once.
    seen.clear()

    def refuse(message: InboundMessage) -> None:
        seen.append(("", b""))
        error = {"code": -32005, "message": "no", "data": {"a2a_error": "transport_protocol_error"}}
        body = {"jsonrpc": "2.0", "id": 1, "error": error}
        props = MessageProperties(correlation_data=message.properties.correlation_data)
        assert message.properties.reply_to is not None
        responder.publish_nowait(message.properties.reply_to, _json.dumps(body).encode(), properties=props)

    await responder.subscribe(f"$a2a/v1/request/{org}/ai/strict", refuse)
    with pytest.raises(RpcError) as refused:
        _ = [item async for item in requester.items(f"{org}/ai/strict", "message/send", params)]
    assert refused.value.code == -32005 and len(seen) == 1


async def test_delegation_reaches_profile_agents(
    client: MeshClient, sdk_agent: SdkEcho, broker_settings: BrokerSettings, namespace: str, org: str
) -> None:
    from tests.agents.service_agents import Relay

    echo = AgentService(
        Echo(),
        broker=broker_settings,
        namespace=namespace,
        settings=AgentSettings(task_store=":memory:", emqx=EmqxProfile(org=org, unit="ai")),
    )
    relays = [
        AgentService(
            Relay(next_agent=f"{org}/ai/echo", name="relay-mesh", forward=True),
            broker=broker_settings,
            namespace=namespace,
        ),
        AgentService(
            Relay(next_agent=f"{org}/ai/sdk-echo", name="relay-sdk"), broker=broker_settings, namespace=namespace
        ),
    ]
    for service in (echo, *relays):
        await service.start()
    try:
        to_mesh = await client.send("relay-mesh", "via the profile")
        assert isinstance(to_mesh, Task) and to_mesh.status.state is TaskState.completed
        assert to_mesh.status.message is not None and text_of(to_mesh.status.message) == "relay-mesh<via the profile>"
        to_sdk = await client.send("relay-sdk", "to the sdk")
        assert isinstance(to_sdk, Task) and to_sdk.status.state is TaskState.completed
        assert [r.text for r in sdk_agent.ran] == ["to the sdk"]
    finally:
        for service in (*relays, echo):
            await service.stop()


async def test_mesh_client_cancels_and_reaches_a_pool_over_the_profile(
    client: MeshClient, broker_settings: BrokerSettings, namespace: str, org: str
) -> None:
    from tests.agents.service_agents import Blocker

    blocker = Blocker()
    services = [
        AgentService(
            blocker,
            broker=broker_settings,
            namespace=namespace,
            settings=AgentSettings(task_store=":memory:", emqx=EmqxProfile(org=org, unit="ai")),
        )
    ]
    pool = AgentSettings(shared_subscription=True, emqx=EmqxProfile(org=org, unit="ai", pool="echoes"))
    services += [AgentService(Echo(), broker=broker_settings, namespace=namespace, settings=pool) for _ in range(2)]
    for service in services:
        await service.start()
    try:
        task_id = str(uuid.uuid4())
        submitted = await client.send(f"{org}/ai/blocker", "block", task_id=task_id, blocking=False)
        assert isinstance(submitted, Task) and submitted.id == task_id
        await asyncio.wait_for(blocker.started.wait(), 5)
        canceled = await client.cancel_task(f"{org}/ai/blocker", task_id)
        assert canceled.status.state is TaskState.canceled
        pooled = await client.send(f"{org}/ai/pool/echoes", "pooled")
        assert isinstance(pooled, Task) and pooled.status.state is TaskState.completed
    finally:
        for service in services:
            await service.stop()


async def test_the_orchestrator_asks_a_profile_agent(
    client: MeshClient, broker_settings: BrokerSettings, namespace: str, org: str
) -> None:
    from agents.builtin.orchestrator import OrchestratorAgent

    skills = [{"id": "parrot", "name": "Parrot", "description": "repeats", "tags": ["parrot"]}]
    async with running_sdk_agent(broker_settings, org, "parrot", skills) as parrot:
        orchestrator = AgentService(
            OrchestratorAgent(allow=[f"{org}/ai/*"]), broker=broker_settings, namespace=namespace
        )
        await orchestrator.start()
        try:
            task = await client.send("orchestrator", "parrot this please")
            assert isinstance(task, Task) and task.status.state is TaskState.completed, task
            assert [r.text for r in parrot.ran] == ["parrot this please"]
        finally:
            await orchestrator.stop()
