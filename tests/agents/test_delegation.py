"""Agents delegating to agents, through the real broker."""

from __future__ import annotations

import asyncio
import json

from agents import AgentSettings, DelegationSettings
from agents.service import AgentService
from mesh.a2a import (
    Message,
    MessageSendParams,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
    create_user_message,
    get_text_from_message,
    request_bytes,
)
from mesh.client import MeshClient
from mesh.properties import MessageProperties
from tests.agents.service_agents import (
    Blocker,
    Broken,
    Decider,
    Echo,
    FanOut,
    Relay,
    Streamer,
    Ticker,
    Whoami,
)
from tests.conftest import ServeAgent
from tests.support import raw_request


def text_of(task: object) -> str:
    assert isinstance(task, Task) and task.status.message is not None
    return get_text_from_message(task.status.message)


def only_task(service: AgentService) -> Task:
    [record] = [service.tasks.get(i) for i in list(service.tasks._tasks)]
    assert record is not None
    return record.task


async def test_a_to_b_to_c_with_streaming_forwarded_to_the_client(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Streamer(steps=2, name="c"))
    await serve_agent(Relay(name="b", next_agent="c", forward=True, stream=True))
    await serve_agent(Relay(name="a", next_agent="b", forward=True))
    items = [item async for item in client.stream("a", "go")]
    statuses = [
        get_text_from_message(i.status.message)
        for i in items
        if isinstance(i, TaskStatusUpdateEvent) and i.status.message is not None
    ]
    assert statuses[:2] == ["step 0", "step 1"]  # c's progress, passed on by b and then a
    artifacts = [i for i in items if isinstance(i, TaskArtifactUpdateEvent)]
    assert [a.artifact.name for a in artifacts] == ["log", "log", "summary", "blob.bin"]
    assert all(a.artifact.artifact_id.startswith("b:c:") for a in artifacts)  # forwarded twice
    assert artifacts[0].artifact.metadata == {"forwardedFrom": "b"}
    assert text_of(items[-1]) == "a<b<done>>"


async def test_parallel_fan_out_to_five_peers(serve_agent: ServeAgent, client: MeshClient) -> None:
    for i in range(5):
        await serve_agent(Echo(name=f"echo{i}"))
    await serve_agent(FanOut(peers=[f"echo{i}" for i in range(5)]))
    task = await client.send("fanout", "hello")
    assert text_of(task) == " | ".join(f"hello to echo{i}" for i in range(5))


async def test_sub_task_carries_user_context_and_depth(
    serve_agent: ServeAgent, broker_settings: object, namespace: str
) -> None:
    whoami = await serve_agent(Whoami(name="c"))
    await serve_agent(Relay(name="a", next_agent="c"))
    async with MeshClient.connect(
        broker_settings,
        namespace,
        user_id="ada",  # type: ignore[arg-type]
        user_config={"role": "admin"},
        auth_token="tok",
    ) as caller:
        parent = await caller.send("a", "who?", context_id="conv-7")
    assert isinstance(parent, Task) and parent.status.state is TaskState.completed
    sub = only_task(whoami)
    assert sub.context_id == "conv-7"
    data = sub.status.message.parts[0].data  # type: ignore[union-attr]
    assert data["user"] == "ada" and data["config"] == {"role": "admin"} and data["depth"] == 1
    assert data["metadata"] == {"parentTaskId": parent.id, "delegatingAgent": "a"}


async def test_timeout_cancels_the_peers_own_task(serve_agent: ServeAgent, client: MeshClient) -> None:
    blocker = await serve_agent(Blocker())
    await serve_agent(Relay(name="a", next_agent="blocker", timeout=0.3))
    task = await client.send("a", "wait forever")
    assert isinstance(task, Task) and task.status.state is TaskState.failed
    assert "DelegationTimeoutError" in text_of(task) and "the task was canceled" in text_of(task)
    [record] = list(blocker.tasks._tasks.values())
    await asyncio.wait_for(record.settled.wait(), 5)
    assert record.state is TaskState.canceled
    assert record.id.startswith("a2a_subtask_")  # canceled by its exact id


async def test_the_idle_timeout_restarts_on_every_peer_event(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Ticker(ticks=6, every_s=0.1))  # 0.6 s in all, never 0.3 s silent
    await serve_agent(Relay(name="a", next_agent="ticker", timeout=0.3))
    assert text_of(await client.send("a", "tick")) == "a<ticked>"


async def test_canceling_the_parent_cascades_two_levels_down(serve_agent: ServeAgent, client: MeshClient) -> None:
    c = Blocker(name="c")
    c_service = await serve_agent(c)
    b_service = await serve_agent(Relay(name="b", next_agent="c"))
    await serve_agent(Relay(name="a", next_agent="b"))
    parent = await client.send("a", "deep work", blocking=False)
    await asyncio.wait_for(c.started.wait(), 5)
    canceled = await client.cancel_task("a", parent.id)
    assert canceled.status.state is TaskState.canceled
    for service in (b_service, c_service):
        [record] = list(service.tasks._tasks.values())
        await asyncio.wait_for(record.settled.wait(), 5)
        assert record.state is TaskState.canceled, service.name
    assert c.cancellations == 1


async def test_call_depth_beyond_the_maximum_is_refused(serve_agent: ServeAgent, client: MeshClient) -> None:
    shallow = AgentSettings(delegation=DelegationSettings(max_call_depth=1))
    await serve_agent(Echo(name="c"))
    await serve_agent(Relay(name="b", next_agent="c"), shallow)
    await serve_agent(Relay(name="a", next_agent="b"))
    task = await client.send("a", "go deep")
    assert isinstance(task, Task) and task.status.state is TaskState.failed
    # a sees b's failure, which says why: b refused to go a level deeper.
    assert text_of(task).startswith("PeerFailedError: delegation to 'b' failed")
    assert "CallDepthExceededError" in text_of(task) and "2 calls deep; the maximum is 1" in text_of(task)


async def test_the_receiving_agent_refuses_a_request_too_deep(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Echo())
    payload = request_bytes(
        "message/send", "deep-1", MessageSendParams(message=create_user_message([TextPart(text="x")]))
    )
    reply = await raw_request(
        client.transport,
        client.namespace,
        f"{client.namespace}/a2a/v1/agent/request/echo",
        payload,
        timeout=5,
        properties=MessageProperties(call_depth=11),
        correlation_id="deep-1",
    )
    error = json.loads(reply.payload)["error"]
    assert error["code"] == -32600 and "call depth 11 exceeds" in error["message"]


async def test_a_cycle_is_refused(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Relay(name="b", next_agent="a"))
    await serve_agent(Relay(name="a", next_agent="b"))
    task = await client.send("a", "loop")
    assert isinstance(task, Task) and task.status.state is TaskState.failed
    assert "a -> b -> a" in text_of(task) and "allow_cycles" in text_of(task)


async def test_unknown_and_forbidden_peers(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Echo())
    await serve_agent(Relay(name="a", next_agent="ghost"))
    lost = await client.send("a", "hello?")
    assert "no such agent on the mesh" in text_of(lost) and "available agents: a, echo" in text_of(lost)
    await serve_agent(Relay(name="b", next_agent="echo"), AgentSettings(delegation=DelegationSettings(deny=("ech*",))))
    denied = await client.send("b", "hello?")
    assert "may not delegate to 'echo'" in text_of(denied)


async def test_a_failed_peer_fails_the_delegation(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Broken())
    await serve_agent(Relay(name="a", next_agent="broken"))
    task = await client.send("a", "this")
    assert isinstance(task, Task) and task.status.state is TaskState.failed
    assert "ended failed: RuntimeError: cannot handle 'this'" in text_of(task)


async def test_every_ending_of_a_peer_reaches_the_delegating_agent(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Decider())
    await serve_agent(Relay(name="a", next_agent="decider"))
    await serve_agent(Relay(name="s", next_agent="decider", stream=True))
    for relay in ("a", "s"):
        message = await client.send(relay, "message")  # a bare Message: a completed task for the caller
        assert text_of(message) == f"{relay}<just a message>"
        done = await client.send(relay, "now")
        assert text_of(done) == f"{relay}<done: now>"
        waiting = await client.send(relay, "auth")  # interrupted: the delegating agent gets the Task
        assert text_of(waiting) == f"{relay}<sign in first>"
        rejected = await client.send(relay, "reject")
        assert isinstance(rejected, Task) and rejected.status.state is TaskState.failed
        assert "ended rejected: not my job" in text_of(rejected), text_of(rejected)


async def test_a_client_gets_each_ending(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Decider())
    message = await client.send("decider", "message")
    assert isinstance(message, Message) and get_text_from_message(message) == "just a message"
    streamed = [item async for item in client.stream("decider", "message")]
    assert [type(item) for item in streamed] == [Message]
    now = [item async for item in client.stream("decider", "now")]
    assert [type(item) for item in now] == [TaskStatusUpdateEvent, Task]  # completed, no working before
    assert [item.status.state for item in now] == [TaskState.completed, TaskState.completed]  # type: ignore[union-attr]
    asked = await client.send("decider", "auth")
    assert isinstance(asked, Task) and asked.status.state is TaskState.auth_required
    signed = await client.send("decider", "ada", task_id=asked.id, context_id=asked.context_id)
    assert isinstance(signed, Task) and text_of(signed) == "signed in: ada"
    rejected = await client.send("decider", "reject")
    assert isinstance(rejected, Task) and rejected.status.state is TaskState.rejected
