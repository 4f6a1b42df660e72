"""The official a2a-sdk client, in A2A 1.0 and in 0.3 mode, through the gateway to mesh agents.

The client is a2a-sdk 1.3 from PyPI, used as any A2A user would: it reads the agent card the
gateway serves and picks the interface. For 0.3 mode the card is cut to its 0.3 interface,
which makes the client use its 0.3 (compat) JSON-RPC transport.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator, Iterator

import grpc
import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.client.client import Client
from a2a.types import (
    AuthenticationInfo,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)
from a2a.utils.errors import TaskNotFoundError
from google.protobuf import json_format

from agents.settings import AgentSettings
from gateways.http.server import HttpGateway
from mesh.a2a import Task as MeshTask
from tests.agents.service_agents import Asker, Blocker, Decider, Echo, Streamer
from tests.conftest import ServeAgent
from tests.gateways.conftest import StartGateway
from tests.http_receiver import Receiver, serve

MODES = ["1.0", "0.3", "rest", "grpc"]  # 1.0 JSON-RPC, 0.3 JSON-RPC, 1.0 HTTP+JSON, 1.0 gRPC


BINDINGS = {"1.0": ("JSONRPC", "1.0"), "0.3": ("JSONRPC", "0.3"), "rest": ("HTTP+JSON", "1.0"), "grpc": ("GRPC", "1.0")}


def user_message(text: str) -> Message:
    return Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)])


async def sdk_client(gateway: HttpGateway, agent: str, mode: str, *, streaming: bool) -> Client:
    """An a2a-sdk client built from the card the gateway serves for ``agent``."""
    async with httpx.AsyncClient() as http:
        card = (await http.get(f"{gateway.public_url}/a2a/agents/{agent}/card")).json()
    offered = {(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]}
    assert offered == {("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("GRPC", "1.0"), ("JSONRPC", "0.3")}
    binding, version = BINDINGS[mode]
    card["supportedInterfaces"] = [
        i for i in card["supportedInterfaces"] if (i["protocolBinding"], i["protocolVersion"]) == (binding, version)
    ]
    config = ClientConfig(
        streaming=streaming, supported_protocol_bindings=[binding], grpc_channel_factory=grpc.aio.insecure_channel
    )
    return await create_client(parse_agent_card(card), client_config=config)


async def collect(events: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    return [event async for event in events]


def text_of(message: Message) -> str:
    return "".join(part.text for part in message.parts)


@pytest.mark.parametrize("mode", MODES)
async def test_send(serve_agent: ServeAgent, start_gateway: StartGateway, mode: str) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(grpc_port=0, wait_for=("echo",))
    async with await sdk_client(gateway, "echo", mode, streaming=False) as client:
        [response] = await collect(client.send_message(SendMessageRequest(message=user_message("hello sdk"))))
    task = response.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(task.status.message) == "hello sdk"
    assert [m.role for m in task.history] == [Role.ROLE_USER, Role.ROLE_AGENT]


@pytest.mark.parametrize("mode", MODES)
async def test_stream(serve_agent: ServeAgent, start_gateway: StartGateway, mode: str) -> None:
    await serve_agent(Streamer(steps=2))
    gateway = await start_gateway(grpc_port=0, wait_for=("streamer",))
    async with await sdk_client(gateway, "streamer", mode, streaming=True) as client:
        events = await collect(client.send_message(SendMessageRequest(message=user_message("go"))))
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds[0] == "task"  # 1.0: a stream starts with the Task
    progress = [
        text_of(e.status_update.status.message)
        for e in events
        if e.WhichOneof("payload") == "status_update" and e.status_update.status.HasField("message")
    ]
    assert progress[:2] == ["step 0", "step 1"]
    names = [e.artifact_update.artifact.name for e in events if e.WhichOneof("payload") == "artifact_update"]
    assert names == ["log", "log", "summary", "blob.bin"]
    last = events[-1]
    state = last.status_update.status.state if kinds[-1] == "status_update" else last.task.status.state
    assert state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.parametrize("mode", MODES)
async def test_get(serve_agent: ServeAgent, start_gateway: StartGateway, mode: str) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(grpc_port=0, wait_for=("echo",))
    async with await sdk_client(gateway, "echo", mode, streaming=False) as client:
        [response] = await collect(client.send_message(SendMessageRequest(message=user_message("remember me"))))
        task = await client.get_task(GetTaskRequest(id=response.task.id, history_length=1))
    assert task.id == response.task.id and task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [text_of(m) for m in task.history] == ["remember me"]  # the last message only


@pytest.mark.parametrize("mode", MODES)
async def test_cancel(serve_agent: ServeAgent, start_gateway: StartGateway, mode: str) -> None:
    agent = Blocker()
    service = await serve_agent(agent)
    gateway = await start_gateway(grpc_port=0, wait_for=("blocker",))
    async with await sdk_client(gateway, "blocker", mode, streaming=False) as client:
        request = SendMessageRequest(message=user_message("work until canceled"))
        request.configuration.return_immediately = True
        [response] = await collect(client.send_message(request))
        assert response.task.status.state == TaskState.TASK_STATE_SUBMITTED
        await asyncio.wait_for(agent.started.wait(), 5)
        canceled = await client.cancel_task(CancelTaskRequest(id=response.task.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    record = service.tasks.get(response.task.id)
    assert record is not None and record.state.value == "canceled"  # canceled on the agent itself


@pytest.mark.parametrize("mode", MODES)
async def test_subscribe(serve_agent: ServeAgent, start_gateway: StartGateway, mode: str) -> None:
    agent = Streamer(steps=3)
    agent.gate = asyncio.Event()
    await serve_agent(agent)
    gateway = await start_gateway(grpc_port=0, wait_for=("streamer",))
    async with await sdk_client(gateway, "streamer", mode, streaming=True) as client:
        first_stream = client.send_message(SendMessageRequest(message=user_message("go")))
        first = await anext(first_stream)
        task_id = first.task.id
        await first_stream.aclose()  # the client drops its stream; the task goes on

        resumed = client.subscribe(SubscribeToTaskRequest(id=task_id))
        snapshot = await anext(resumed)
        assert snapshot.WhichOneof("payload") == "task" and snapshot.task.id == task_id
        assert snapshot.task.status.state == TaskState.TASK_STATE_WORKING
        agent.gate.set()
        rest = []
        async for event in resumed:
            rest.append(event)
            agent.gate.set()
    states = [e.status_update.status.state for e in rest if e.WhichOneof("payload") == "status_update"]
    assert states and states[-1] == TaskState.TASK_STATE_COMPLETED
    assert any(e.WhichOneof("payload") == "artifact_update" for e in rest)


def payloads(events: list[StreamResponse]) -> list[tuple[str, str]]:
    """Each event as (payload kind, task state), to assert whole sequences."""
    out = []
    for event in events:
        kind = event.WhichOneof("payload")
        status = (
            event.task.status if kind == "task" else event.status_update.status if kind == "status_update" else None
        )
        out.append((kind, TaskState.Name(status.state) if status is not None else ""))
    return out


@pytest.mark.parametrize("mode", MODES)
async def test_subscribe_to_an_input_required_task_follows_it_to_the_end(
    serve_agent: ServeAgent, start_gateway: StartGateway, mode: str
) -> None:
    await serve_agent(Asker())
    gateway = await start_gateway(grpc_port=0, wait_for=("asker",))
    async with (
        await sdk_client(gateway, "asker", mode, streaming=False) as sender,
        await sdk_client(gateway, "asker", mode, streaming=True) as watcher,
    ):
        [asked] = await collect(sender.send_message(SendMessageRequest(message=user_message("hi"))))
        task = asked.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED

        subscription = watcher.subscribe(SubscribeToTaskRequest(id=task.id))
        events = [await anext(subscription)]  # the snapshot: the subscription is in place
        reply = user_message("Ada")
        reply.task_id, reply.context_id = task.id, task.context_id
        [answered] = await collect(sender.send_message(SendMessageRequest(message=reply)))
        events += await collect(subscription)
    assert answered.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert payloads(events) == [
        ("task", "TASK_STATE_INPUT_REQUIRED"),  # one snapshot, and the stream stays open
        ("status_update", "TASK_STATE_WORKING"),
        ("status_update", "TASK_STATE_COMPLETED"),
    ]
    assert text_of(events[-1].status_update.status.message) == "Hello, Ada!"


@pytest.mark.parametrize("mode", MODES)
async def test_a_stream_ends_with_its_final_event(
    serve_agent: ServeAgent, start_gateway: StartGateway, mode: str
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(grpc_port=0, wait_for=("echo",))
    async with await sdk_client(gateway, "echo", mode, streaming=True) as client:
        events = await collect(client.send_message(SendMessageRequest(message=user_message("once"))))
    # The task (as the agent's first status-update left it), then the final event: nothing after.
    assert payloads(events) == [("task", "TASK_STATE_WORKING"), ("status_update", "TASK_STATE_COMPLETED")]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    yield from serve(Receiver())


@pytest.mark.parametrize("mode", MODES)
async def test_push_notifications_come_in_the_version_of_the_client(
    serve_agent: ServeAgent, start_gateway: StartGateway, receiver: Receiver, mode: str
) -> None:
    await serve_agent(Asker(), AgentSettings(allow_private_push_urls=True))
    gateway = await start_gateway(grpc_port=0, wait_for=("asker",))
    async with await sdk_client(gateway, "asker", mode, streaming=False) as client:
        [asked] = await collect(client.send_message(SendMessageRequest(message=user_message("hi"))))
        task = asked.task
        config = TaskPushNotificationConfig(
            task_id=task.id,
            id="hook-1",
            url=receiver.url(),
            token="tok-1",
            authentication=AuthenticationInfo(scheme="Bearer", credentials="push-secret"),
        )
        created = await client.create_task_push_notification_config(config)
        assert (created.id, created.url) == ("hook-1", receiver.url())
        reply = user_message("Ada")
        reply.task_id, reply.context_id = task.id, task.context_id
        await collect(client.send_message(SendMessageRequest(message=reply)))
    received = await receiver.wait_for(2)  # working, then completed
    for request in received:
        assert request.headers["authorization"] == "Bearer push-secret"
        assert request.headers["x-a2a-notification-token"] == "tok-1"
        assert request.headers["content-type"] == "application/json"
    bodies = [json.loads(r.body) for r in received]
    if mode != "0.3":  # a StreamResponse, as a2a-sdk's push sender writes it
        events = [json_format.ParseDict(body, StreamResponse()) for body in bodies]
        assert payloads(events) == [("task", "TASK_STATE_WORKING"), ("task", "TASK_STATE_COMPLETED")]
        assert events[-1].task.id == task.id and text_of(events[-1].task.status.message) == "Hello, Ada!"
    else:  # the 0.3 Task
        tasks = [MeshTask.model_validate(body) for body in bodies]
        assert [t.status.state.value for t in tasks] == ["working", "completed"]
        assert all(t.id == task.id for t in tasks)


# ---------------------------------------------------------------- every ending of the agent API


@pytest.mark.parametrize("mode", MODES)
async def test_a_bare_message_answer_is_a_message_not_a_task(
    serve_agent: ServeAgent, start_gateway: StartGateway, mode: str
) -> None:
    await serve_agent(Decider())
    gateway = await start_gateway(grpc_port=0, wait_for=("decider",))
    async with await sdk_client(gateway, "decider", mode, streaming=False) as client:
        [sent] = await collect(client.send_message(SendMessageRequest(message=user_message("message"))))
    async with await sdk_client(gateway, "decider", mode, streaming=True) as client:
        streamed = await collect(client.send_message(SendMessageRequest(message=user_message("message"))))
    assert sent.WhichOneof("payload") == "message" and text_of(sent.message) == "just a message"
    assert sent.message.role == Role.ROLE_AGENT and not sent.message.task_id
    assert [e.WhichOneof("payload") for e in streamed] == ["message"]
    assert text_of(streamed[0].message) == "just a message"


@pytest.mark.parametrize("mode", MODES)
async def test_rejected_and_done_at_once_have_no_working_state(
    serve_agent: ServeAgent, start_gateway: StartGateway, mode: str
) -> None:
    await serve_agent(Decider())
    gateway = await start_gateway(grpc_port=0, wait_for=("decider",))
    async with await sdk_client(gateway, "decider", mode, streaming=False) as client:
        [rejected] = await collect(client.send_message(SendMessageRequest(message=user_message("reject"))))
    assert rejected.task.status.state == TaskState.TASK_STATE_REJECTED
    assert text_of(rejected.task.status.message) == "not my job"
    async with await sdk_client(gateway, "decider", mode, streaming=True) as client:
        rejecting = await collect(client.send_message(SendMessageRequest(message=user_message("reject"))))
        done = await collect(client.send_message(SendMessageRequest(message=user_message("now"))))
    assert payloads(rejecting) == [("task", "TASK_STATE_REJECTED")]
    assert payloads(done) == [("task", "TASK_STATE_COMPLETED")]
    assert text_of(done[0].task.status.message) == "done: now"


@pytest.mark.parametrize("mode", MODES)
async def test_auth_required_waits_then_resumes_on_the_same_task(
    serve_agent: ServeAgent, start_gateway: StartGateway, mode: str
) -> None:
    await serve_agent(Decider())
    gateway = await start_gateway(grpc_port=0, wait_for=("decider",))
    async with (
        await sdk_client(gateway, "decider", mode, streaming=False) as sender,
        await sdk_client(gateway, "decider", mode, streaming=True) as watcher,
    ):
        [asked] = await collect(sender.send_message(SendMessageRequest(message=user_message("auth"))))
        task = asked.task
        assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED
        assert text_of(task.status.message) == "sign in first"
        subscription = watcher.subscribe(SubscribeToTaskRequest(id=task.id))
        events = [await anext(subscription)]
        reply = user_message("ada")
        reply.task_id, reply.context_id = task.id, task.context_id
        [answered] = await collect(sender.send_message(SendMessageRequest(message=reply)))
        events += await collect(subscription)
    assert answered.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert text_of(answered.task.status.message) == "signed in: ada"
    assert payloads(events) == [
        ("task", "TASK_STATE_AUTH_REQUIRED"),
        ("status_update", "TASK_STATE_WORKING"),
        ("status_update", "TASK_STATE_COMPLETED"),
    ]


@pytest.mark.parametrize("mode", ["1.0", "rest", "grpc"])
async def test_list_tasks_and_task_not_found(serve_agent: ServeAgent, start_gateway: StartGateway, mode: str) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(grpc_port=0, wait_for=("echo",))
    async with await sdk_client(gateway, "echo", mode, streaming=False) as client:
        [first] = await collect(client.send_message(SendMessageRequest(message=user_message("one"))))
        [second] = await collect(client.send_message(SendMessageRequest(message=user_message("two"))))
        listed = await client.list_tasks(ListTasksRequest(page_size=10))
        with pytest.raises(TaskNotFoundError) as refused:
            await client.get_task(GetTaskRequest(id="no-such-task"))
    assert sorted(t.id for t in listed.tasks) == sorted([first.task.id, second.task.id])
    assert listed.total_size == 2
    assert refused.value.message == "Task not found"
