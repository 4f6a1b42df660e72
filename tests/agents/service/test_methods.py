"""Every A2A method an agent serves, through the real broker."""

from __future__ import annotations

import asyncio
import base64

import pytest

from mesh.a2a import (
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskNotCancelable,
    TaskNotFound,
    TaskState,
    TaskStatusUpdateEvent,
    UnsupportedOperation,
    get_text_from_message,
)
from mesh.client import MeshClient
from tests.agents.service_agents import Asker, Blocker, Echo, Streamer, TwoStep, Whoami
from tests.conftest import ServeAgent
from tests.support import raw_request


def reply_text(task: Task | Message) -> str:
    assert isinstance(task, Task) and task.status.message is not None
    return get_text_from_message(task.status.message)


async def test_send_blocks_until_the_task_is_done(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Echo())
    task = await client.send("echo", "hello mesh")
    assert isinstance(task, Task)
    assert task.status.state is TaskState.completed
    assert reply_text(task) == "hello mesh"
    assert [m.role.value for m in task.history or []] == ["user", "agent"]


async def test_non_blocking_send_answers_submitted_at_once(serve_agent: ServeAgent, client: MeshClient) -> None:
    agent = Blocker()
    await serve_agent(agent)
    task = await client.send("blocker", "wait", blocking=False)
    assert isinstance(task, Task) and task.status.state is TaskState.submitted
    await asyncio.wait_for(agent.started.wait(), 5)
    running = await client.get_task("blocker", task.id)
    assert running.status.state is TaskState.working
    canceled = await client.cancel_task("blocker", task.id)
    assert canceled.status.state is TaskState.canceled


async def test_stream_delivers_every_event_in_order_then_the_task(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Streamer(steps=3))
    items = [item async for item in client.stream("streamer", "go")]
    statuses = [i for i in items if isinstance(i, TaskStatusUpdateEvent)]
    artifacts = [i for i in items if isinstance(i, TaskArtifactUpdateEvent)]
    final = items[-1]
    assert isinstance(final, Task) and final.status.state is TaskState.completed
    assert [s.status.state for s in statuses] == [TaskState.working] * 4 + [TaskState.completed]
    assert [get_text_from_message(s.status.message) for s in statuses[1:4]] == ["step 0", "step 1", "step 2"]
    assert [s.final for s in statuses] == [False, False, False, False, True]
    assert [a.artifact.name for a in artifacts] == ["log", "log", "log", "summary", "blob.bin"]
    assert [bool(a.append) for a in artifacts[:3]] == [False, True, True]
    # The final task holds the merged artifacts.
    by_name = {a.name: a for a in final.artifacts or []}
    assert [p.text for p in by_name["log"].parts] == ["line 0\n", "line 1\n", "line 2\n"]  # type: ignore[union-attr]
    assert by_name["summary"].parts[0].data == {"steps": 3}  # type: ignore[union-attr]
    assert base64.b64decode(by_name["blob.bin"].parts[0].file.bytes) == b"\x00\x01"  # type: ignore[union-attr]


async def test_get_trims_history_to_history_length(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Echo())
    task = await client.send("echo", "one")
    full = await client.get_task("echo", task.id)
    last = await client.get_task("echo", task.id, history_length=1)
    none = await client.get_task("echo", task.id, history_length=0)
    assert len(full.history or []) == 2
    assert [m.role.value for m in last.history or []] == ["agent"]
    assert not none.history


async def test_get_and_cancel_of_an_unknown_task(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Echo())
    with pytest.raises(TaskNotFound, match="no task 'nope'"):
        await client.get_task("echo", "nope")
    with pytest.raises(TaskNotFound):
        await client.cancel_task("echo", "nope")


async def test_cancel_of_a_finished_task_is_refused(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Echo())
    task = await client.send("echo", "done")
    with pytest.raises(TaskNotCancelable) as caught:
        await client.cancel_task("echo", task.id)
    assert caught.value.code == -32002 and "already completed" in str(caught.value)


async def test_cancel_during_a_stream_ends_it_canceled(serve_agent: ServeAgent, client: MeshClient) -> None:
    agent = Streamer(steps=5)
    agent.gate = asyncio.Event()
    await serve_agent(agent)
    seen: list[object] = []
    first_status: asyncio.Future[TaskStatusUpdateEvent] = asyncio.get_running_loop().create_future()

    async def follow() -> None:
        async for item in client.stream("streamer", "go"):
            seen.append(item)
            if isinstance(item, TaskStatusUpdateEvent) and not first_status.done():
                first_status.set_result(item)

    following = asyncio.create_task(follow())
    first = await asyncio.wait_for(first_status, 5)
    canceled = await client.cancel_task("streamer", first.task_id)
    await asyncio.wait_for(following, 5)
    assert canceled.status.state is TaskState.canceled
    assert agent.cancelled_seen.is_set()
    final_event = [i for i in seen if isinstance(i, TaskStatusUpdateEvent)][-1]
    assert final_event.final and final_event.status.state is TaskState.canceled
    assert isinstance(seen[-1], Task) and seen[-1].status.state is TaskState.canceled


async def test_resubscribe_after_a_dropped_stream(serve_agent: ServeAgent, client: MeshClient) -> None:
    agent = Streamer(steps=4)
    agent.gate = asyncio.Event()
    await serve_agent(agent)
    stream = client.stream("streamer", "go")
    first = await anext(stream)  # working
    assert isinstance(first, TaskStatusUpdateEvent)
    await stream.aclose()  # the client lost its stream

    resumed = client.resubscribe("streamer", first.task_id)
    snapshot = await anext(resumed)
    assert isinstance(snapshot, Task) and snapshot.status.state is TaskState.working
    agent.gate.set()
    rest = []
    async for item in resumed:
        rest.append(item)
        agent.gate.set()
    assert isinstance(rest[-1], Task) and rest[-1].status.state is TaskState.completed
    finals = [i for i in rest if isinstance(i, TaskStatusUpdateEvent) and i.final]
    assert len(finals) == 1 and finals[0].status.state is TaskState.completed


async def test_resubscribe_to_a_finished_task_is_refused(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Echo())
    task = await client.send("echo", "x")
    with pytest.raises(UnsupportedOperation, match="tasks/get"):
        async for _ in client.resubscribe("echo", task.id):
            pass


async def test_input_required_continuation_resumes_the_generator(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Asker())
    asked = await client.send("asker", "hi")
    assert isinstance(asked, Task) and asked.status.state is TaskState.input_required
    assert reply_text(asked) == "What is your name?"
    answered = await client.send("asker", "Ada", task_id=asked.id)
    assert isinstance(answered, Task) and answered.id == asked.id
    assert answered.status.state is TaskState.completed
    assert reply_text(answered) == "Hello, Ada!"
    assert [m.role.value for m in answered.history or []] == ["user", "agent", "user", "agent"]


async def test_input_required_continuation_calls_a_plain_handler_again(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    await serve_agent(TwoStep())
    asked = await client.send("twostep", "paint it")
    assert isinstance(asked, Task) and asked.status.state is TaskState.input_required
    answered = await client.send("twostep", "blue", task_id=asked.id)
    assert reply_text(answered) == "blue after 2 earlier messages"


async def test_input_required_ends_a_stream_and_a_new_stream_resumes(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    await serve_agent(Asker())
    first = [i async for i in client.stream("asker", "hi")]
    assert isinstance(first[-1], Task) and first[-1].status.state is TaskState.input_required
    second = [i async for i in client.stream("asker", "Grace", task_id=first[-1].id)]
    assert isinstance(second[-1], Task) and reply_text(second[-1]) == "Hello, Grace!"


async def test_message_to_a_working_task_is_refused(serve_agent: ServeAgent, client: MeshClient) -> None:
    agent = Blocker()
    await serve_agent(agent)
    task = await client.send("blocker", "x", blocking=False)
    await asyncio.wait_for(agent.started.wait(), 5)
    with pytest.raises(Exception, match="input-required") as caught:
        await client.send("blocker", "more", task_id=task.id)
    assert getattr(caught.value, "code", None) == -32602
    await client.cancel_task("blocker", task.id)


async def test_context_history_and_caller_identity_reach_the_handler(
    serve_agent: ServeAgent, broker_settings: object, namespace: str
) -> None:
    await serve_agent(Whoami())
    async with MeshClient.connect(
        broker_settings,
        namespace,
        user_id="ada",  # type: ignore[arg-type]
        user_config={"scopes": ["read"]},
    ) as caller:
        first = await caller.send("whoami", "one", context_id="ctx-1", metadata={"trace": "t1"})
        second = await caller.send("whoami", "two", context_id="ctx-1")
    data = first.status.message.parts[0].data  # type: ignore[union-attr]
    assert data == {
        "user": "ada",
        "config": {"scopes": ["read"]},
        "depth": 0,
        "metadata": {"trace": "t1"},
        "history": 0,
    }
    assert second.status.message.parts[0].data["history"] == 2  # type: ignore[union-attr]
    assert second.context_id == "ctx-1"


async def test_sam_alias_methods_are_served(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Echo())
    from mesh.a2a import MessageSendParams, TextPart, create_user_message, request_bytes

    params = MessageSendParams(message=create_user_message([TextPart(text="via SAM")]))
    reply = await raw_request(
        client.transport,
        client.namespace,
        f"{client.namespace}/a2a/v1/agent/request/echo",
        request_bytes("agent/sendMessage", "sam-1", params),
        timeout=5,
        correlation_id="sam-1",
    )
    assert b'"state":"completed"' in reply.payload and b"via SAM" in reply.payload


async def test_a_task_left_input_required_is_canceled_after_the_input_timeout(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    from agents import AgentSettings

    service = await serve_agent(Asker(), AgentSettings(input_timeout_s=0.2))
    asked = await client.send("asker", "hi")
    assert isinstance(asked, Task) and asked.status.state is TaskState.input_required
    record = service.tasks.get(asked.id)
    assert record is not None
    await asyncio.wait_for(record.cancelled.wait(), 5)
    task = await client.get_task("asker", asked.id)
    assert task.status.state is TaskState.canceled
    assert reply_text(task) == "no input within 0.2 s"


async def test_replicas_share_the_requests_of_one_agent_name(serve_agent: ServeAgent, client: MeshClient) -> None:
    from agents import AgentSettings

    shared = AgentSettings(shared_subscription=True)
    first = await serve_agent(Echo(), shared)
    second = await serve_agent(Echo(), shared)
    tasks = await asyncio.gather(*(client.send("echo", f"n{i}") for i in range(40)))
    assert sorted(reply_text(t) for t in tasks) == sorted(f"n{i}" for i in range(40))
    served = (len(first.tasks), len(second.tasks))
    assert sum(served) == 40 and min(served) > 0  # each request went to exactly one replica


async def test_a_send_with_a_status_topic_gets_only_the_progress(
    serve_agent: ServeAgent, client: MeshClient, make_transport: object, namespace: str
) -> None:
    import json

    from mesh.a2a import MessageSendParams, TextPart, create_user_message, request_bytes
    from mesh.properties import MessageProperties
    from tests.support import Inbox

    await serve_agent(Streamer(steps=2))
    watcher = await make_transport()  # type: ignore[operator]
    events = Inbox()
    await watcher.subscribe(f"{namespace}/a2a/v1/client/status/watcher/+", events)
    payload = request_bytes(
        "message/send", "p-1", MessageSendParams(message=create_user_message([TextPart(text="go")]))
    )
    reply = await raw_request(
        client.transport,
        namespace,
        f"{namespace}/a2a/v1/agent/request/streamer",
        payload,
        timeout=5,
        correlation_id="p-1",
        properties=MessageProperties(status_topic=f"{namespace}/a2a/v1/client/status/watcher/p-1"),
    )
    assert json.loads(reply.payload)["result"]["status"]["state"] == "completed"
    # Everything the agent sent before its answer reaches the watcher before this marker.
    await watcher.publish(f"{namespace}/a2a/v1/client/status/watcher/marker", b"{}")
    await events.wait_until_topic(f"{namespace}/a2a/v1/client/status/watcher/marker")
    kinds = []
    for message in events.messages[:-1]:
        result = json.loads(message.payload)["result"]
        kinds.append(
            result["kind"] if result["kind"] == "artifact-update" else result["status"]["message"]["parts"][0]["text"]
        )
    assert kinds == ["step 0", "artifact-update", "step 1", "artifact-update", "artifact-update", "artifact-update"]
