"""The example agents `mesh up` runs, on the real broker."""

from __future__ import annotations

import asyncio

from agents.builtin.calculator import CalculatorAgent
from agents.builtin.countdown import CountdownAgent
from agents.builtin.echo import EchoAgent
from mesh.a2a import (
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
    get_text_from_message,
)
from mesh.client import MeshClient
from tests.conftest import ServeAgent


def text_of(task: object) -> str:
    assert isinstance(task, Task) and task.status.message is not None
    return get_text_from_message(task.status.message)


async def test_echo_repeats_with_an_optional_prefix(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(EchoAgent())
    await serve_agent(EchoAgent(name="parrot", prefix="squawk: "))
    assert text_of(await client.send("echo", "hi")) == "hi"
    assert text_of(await client.send("parrot", "hi")) == "squawk: hi"


async def test_calculator_answers_exactly_and_fails_bad_input(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(CalculatorAgent())
    assert text_of(await client.send("calculator", "What is 0.1 + 0.2?")) == "0.3"
    assert text_of(await client.send("calculator", "(1/3) * 3")) == "1"
    assert text_of(await client.send("calculator", "2^100")) == str(2**100)
    result = await client.send("calculator", "17 // 5")
    assert isinstance(result, Task) and result.status.message is not None
    assert result.status.message.parts[1].data == {"expression": "17 // 5", "result": "3"}  # type: ignore[union-attr]
    failed = await client.send("calculator", "1 / 0")
    assert isinstance(failed, Task) and failed.status.state is TaskState.failed
    assert text_of(failed).startswith("cannot evaluate '1 / 0': division by zero")
    refused = await client.send("calculator", "__import__('os')")
    assert isinstance(refused, Task) and refused.status.state is TaskState.failed


async def test_countdown_streams_progress_and_an_artifact(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(CountdownAgent(interval_s=0.01))
    items = [item async for item in client.stream("countdown", "count down from 3")]
    progress = [
        get_text_from_message(i.status.message)
        for i in items
        if isinstance(i, TaskStatusUpdateEvent) and i.status.message is not None
    ]
    assert progress == ["3...", "2...", "1...", "Liftoff! Counted down from 3."]
    chunks = [i for i in items if isinstance(i, TaskArtifactUpdateEvent)]
    assert [c.artifact.parts[0].text for c in chunks] == ["3\n", "2\n", "1\n", "0\n"]  # type: ignore[union-attr]
    assert chunks[-1].last_chunk is True
    final = items[-1]
    assert isinstance(final, Task) and final.status.state is TaskState.completed
    [artifact] = final.artifacts or []
    assert "".join(p.text for p in artifact.parts) == "3\n2\n1\n0\n"  # type: ignore[union-attr]


async def test_countdown_honours_cancel(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(CountdownAgent(interval_s=30))
    stream = client.stream("countdown", "10")
    first_step = None
    async for item in stream:
        if isinstance(item, TaskStatusUpdateEvent) and item.status.message is not None:
            first_step = item
            break
    assert first_step is not None and get_text_from_message(first_step.status.message) == "10..."
    canceled = await asyncio.wait_for(client.cancel_task("countdown", first_step.task_id), 5)
    assert canceled.status.state is TaskState.canceled
    rest = [item async for item in stream]
    assert isinstance(rest[-1], Task) and rest[-1].status.state is TaskState.canceled


async def test_countdown_asks_for_a_number(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(CountdownAgent(interval_s=0.01))
    asked = await client.send("countdown", "please count down")
    assert isinstance(asked, Task) and asked.status.state is TaskState.input_required
    assert "how many" in text_of(asked)
    still = await client.send("countdown", "a million", task_id=asked.id)
    assert isinstance(still, Task) and still.status.state is TaskState.input_required
    done = await client.send("countdown", "2", task_id=asked.id)
    assert text_of(done) == "Liftoff! Counted down from 2."
