"""An agent's memory and work are bounded: nesting, concurrent tasks, stalls, retention."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from agents import AgentSettings, MessageLimits
from mesh.a2a import (
    DataPart,
    MessageSendConfiguration,
    MessageSendParams,
    Task,
    TaskNotFound,
    TaskState,
    TextPart,
    create_user_message,
    get_text_from_message,
    request_bytes,
)
from mesh.client import MeshClient
from mesh.properties import MessageProperties
from tests.agents.service_agents import Blocker, Echo, Stubborn
from tests.conftest import ServeAgent
from tests.support import answer_of


def nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


def data_request(request_id: str, depth: int) -> bytes:
    message = create_user_message([DataPart(data=nested(depth))])
    return request_bytes("message/send", request_id, MessageSendParams(message=message))


async def test_params_nested_past_the_limit_are_refused_naming_the_place(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    service = await serve_agent(Echo(), AgentSettings(limits=MessageLimits(max_nesting_depth=8)))
    # params(1) > message(2) > parts(3) > part(4) > data(5..8): four objects nested fit.
    ok = await answer_of(client, data_request("d-ok", 4))
    assert ok["result"]["status"]["state"] == "completed"
    refused = await answer_of(client, data_request("d-deep", 5))
    assert refused["id"] == "d-deep" and refused["error"]["code"] == -32602
    [error] = refused["error"]["data"]["errors"]
    assert error["path"] == "params.message.parts.0.data.a.a.a.a"
    assert error["reason"] == "nested deeper than 8 levels (limits.max_nesting_depth)"
    assert service.tasks.get("d-deep") is None


async def test_the_default_depth_is_32_and_deeper_data_is_refused(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Echo())
    assert MessageLimits().max_nesting_depth == 32
    refused = await answer_of(client, data_request("d-1", 40))
    assert refused["error"]["code"] == -32602 and "nested deeper than 32 levels" in refused["error"]["message"]


async def test_a_user_config_nested_past_the_limit_is_refused(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Echo(), AgentSettings(limits=MessageLimits(max_nesting_depth=4)))
    payload = request_bytes(
        "message/send", "u-1", MessageSendParams(message=create_user_message([TextPart(text="hi")]))
    )
    fine = await answer_of(client, payload, properties=MessageProperties(user_config=nested(4)))
    assert fine["result"]["status"]["state"] == "completed"
    payload = request_bytes(
        "message/send", "u-2", MessageSendParams(message=create_user_message([TextPart(text="hi")]))
    )
    refused = await answer_of(client, payload, properties=MessageProperties(user_config=nested(5)))
    assert refused["error"]["code"] == -32600
    assert (
        refused["error"]["message"] == "a2aUserConfig.a.a.a.a: nested deeper than 4 levels (limits.max_nesting_depth)"
    )


async def test_beyond_max_concurrent_tasks_a_new_task_waits_for_a_place_unacknowledged(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    service = await serve_agent(Blocker(), AgentSettings(max_concurrent_tasks=2))
    for n in range(2):
        task = await client.send("blocker", f"job {n}", blocking=False)
        assert isinstance(task, Task)
    config = MessageSendConfiguration(blocking=False)
    params = MessageSendParams(message=create_user_message([TextPart(text="one more")]), configuration=config)
    waiting = asyncio.create_task(
        answer_of(client, request_bytes("message/send", "x-3", params), agent="blocker", timeout=10)
    )
    async with asyncio.timeout(5):
        while service.admission.held == 0:  # held, neither answered nor acknowledged
            await asyncio.sleep(0.01)
    assert not waiting.done() and service.tasks.get("x-3") is None
    # A finished task frees its place: the held request runs.
    running = list(service.tasks.active())
    await client.cancel_task("blocker", running[0].id)
    answer = await waiting
    assert answer["id"] == "x-3" and answer["result"]["status"]["state"] in ("submitted", "working")
    assert service.admission.held == 0 and service.admission.refused_total == 0


async def test_a_held_request_whose_expiry_runs_out_is_answered_busy(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    service = await serve_agent(Blocker(), AgentSettings(max_concurrent_tasks=1))
    assert isinstance(await client.send("blocker", "job", blocking=False), Task)
    params = MessageSendParams(message=create_user_message([TextPart(text="cannot wait")]))
    busy = await answer_of(
        client,
        request_bytes("message/send", "x-2", params),
        properties=MessageProperties(message_expiry_s=1),
        agent="blocker",
    )
    assert busy["id"] == "x-2" and busy["error"]["code"] == -32050
    assert "max_concurrent_tasks" in busy["error"]["message"] and "Message Expiry" in busy["error"]["message"]
    assert busy["error"]["data"] == {"maxConcurrentTasks": 1, "expired": True}  # for a profile requester: -32003
    assert service.tasks.get("x-2") is None and service.admission.held == 0


async def test_a_task_without_progress_is_failed_saying_so(
    serve_agent: ServeAgent, client: MeshClient, caplog: pytest.LogCaptureFixture
) -> None:
    agent = Blocker()
    service = await serve_agent(agent, AgentSettings(stall_timeout_s=0.2))
    with caplog.at_level(logging.WARNING):
        task = await client.send("blocker", "hang", timeout=10)
    assert isinstance(task, Task) and task.status.state is TaskState.failed
    assert get_text_from_message(task.status.message) == (  # type: ignore[arg-type]
        "the task made no progress for 0.2 s (stall_timeout_s) and was failed"
    )
    assert agent.cancellations == 1  # the handler was canceled, not left running
    assert "made no progress for 0.2 s; failing it" in caplog.text
    assert list(service.tasks.active()) == []
    again = await client.send("blocker", "hang again", timeout=10)  # the watchdog restarts
    assert isinstance(again, Task) and again.status.state is TaskState.failed


async def test_retention_by_bytes_keeps_the_store_within_its_bound(serve_agent: ServeAgent, client: MeshClient) -> None:
    bound = 5_000_000
    service = await serve_agent(Echo(), AgentSettings(max_retained_bytes=bound))
    text = "x" * 90_000  # a text part of at most 100 KB (the JAF limit); ten of them: ~0.9 MB
    ids = []
    for n in range(30):
        message = create_user_message([TextPart(text=text) for _ in range(10)])
        payload = request_bytes("message/send", f"big-{n}", MessageSendParams(message=message))
        assert len(payload) > 900_000
        answer = await answer_of(client, payload)
        assert answer["result"]["status"]["state"] == "completed"
        ids.append(answer["result"]["id"])
        assert service.tasks.retained_bytes <= bound
    kept = [task_id for task_id in ids if service.tasks.get(task_id) is not None]
    assert 1 <= len(kept) < len(ids) and kept == ids[-len(kept) :]  # the oldest went first
    per_task = service.tasks.retained_bytes / len(kept)
    assert service.tasks.retained_bytes + per_task > bound  # filled: one more would not fit
    assert len(service.contexts) == len(kept)  # the conversations of forgotten tasks went with them
    with pytest.raises(TaskNotFound):
        await client.get_task("echo", ids[0])


async def test_retention_by_count_and_by_age(serve_agent: ServeAgent, client: MeshClient) -> None:
    service = await serve_agent(Echo(), AgentSettings(max_retained_tasks=3))
    tasks = [await client.send("echo", f"n{n}") for n in range(6)]
    assert all(isinstance(t, Task) for t in tasks)
    assert [service.tasks.get(t.id) is not None for t in tasks if isinstance(t, Task)] == [False] * 3 + [True] * 3
    aged = await serve_agent(Echo(name="aged"), AgentSettings(task_retention_s=1e-9))
    first = await client.send("aged", "first")
    second = await client.send("aged", "second")
    assert isinstance(first, Task) and isinstance(second, Task)  # its finish forgets the one older than the retention
    assert aged.tasks.get(first.id) is None and aged.tasks.get(second.id) is not None


async def test_beyond_its_bound_a_method_that_must_wait_is_answered_busy(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    agent = Stubborn()
    service = await serve_agent(agent, AgentSettings(max_concurrent_tasks=1))
    task = await client.send("stubborn", "work", blocking=False)
    assert isinstance(task, Task)
    first_cancel = asyncio.create_task(
        answer_of(client, request_bytes("tasks/cancel", "c-1", {"id": task.id}), agent="stubborn")
    )
    async with asyncio.timeout(5):
        while not service.dispatcher._waiting:
            await asyncio.sleep(0.01)
    busy = await answer_of(client, request_bytes("tasks/cancel", "c-2", {"id": task.id}), agent="stubborn")
    assert busy["id"] == "c-2" and busy["error"]["code"] == -32050
    assert "requests waiting" in busy["error"]["message"]
    agent.release.set()
    canceled = await first_cancel
    assert canceled["result"]["status"]["state"] == "canceled"
