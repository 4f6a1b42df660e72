"""Unit tests of the built-in agents with the agent authors' harness (agents.testing): no broker.

The same agents are tested on a real Mosquitto in test_builtin.py and test_orchestrator.py.
"""

from __future__ import annotations

import pytest

from agents import AgentSettings, MessageLimits
from agents.builtin.calculator import CalculatorAgent
from agents.builtin.countdown import CountdownAgent
from agents.builtin.echo import EchoAgent
from agents.builtin.orchestrator import OrchestratorAgent
from agents.testing import AgentHarness
from mesh.a2a import DataPart, RpcError, Task, TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent


async def test_echo_repeats_the_text_with_its_prefix() -> None:
    async with AgentHarness(EchoAgent(prefix="squawk: ")) as mesh:
        task = await mesh.send("hi")
        assert task.status.state is TaskState.completed
        assert mesh.text(task) == "squawk: hi"
        events = [item async for item in mesh.stream("again")]
        assert [type(e) for e in events] == [TaskStatusUpdateEvent, TaskStatusUpdateEvent, Task]
        states = [e.status.state for e in events if isinstance(e, (Task, TaskStatusUpdateEvent))]
        assert states == [TaskState.working, TaskState.completed, TaskState.completed]
        assert mesh.text(events[-1]) == "squawk: again"


async def test_echo_keeps_the_conversation_of_a_context() -> None:
    async with AgentHarness(EchoAgent()) as mesh:
        first = await mesh.send("one")
        second = await mesh.send("two", context_id=first.context_id)
        assert second.context_id == first.context_id and second.id != first.id
        got = await mesh.get_task(second.id)
        assert got.id == second.id and mesh.text(got) == "two"


async def test_calculator_answers_exactly_with_data() -> None:
    async with AgentHarness(CalculatorAgent()) as mesh:
        assert mesh.text(await mesh.send("What is 0.1 + 0.2?")) == "0.3"
        task = await mesh.send("17 // 5")
        assert task.status.message is not None
        data = task.status.message.parts[1]
        assert isinstance(data, DataPart) and data.data == {"expression": "17 // 5", "result": "3"}


async def test_calculator_fails_the_task_on_bad_input() -> None:
    async with AgentHarness(CalculatorAgent()) as mesh:
        failed = await mesh.send("1 / 0")
        assert failed.status.state is TaskState.failed
        assert mesh.text(failed).startswith("cannot evaluate '1 / 0': division by zero")
        refused = await mesh.send("__import__('os')")
        assert refused.status.state is TaskState.failed


async def test_countdown_asks_for_a_number_until_it_gets_one() -> None:
    async with AgentHarness(CountdownAgent(interval_s=0)) as mesh:
        asked = await mesh.send("please count down")
        assert asked.status.state is TaskState.input_required
        assert "how many" in mesh.text(asked)
        still = await mesh.send("a million", task_id=asked.id)
        assert still.id == asked.id and still.status.state is TaskState.input_required
        done = await mesh.send("2", task_id=asked.id)
        assert done.status.state is TaskState.completed
        assert mesh.text(done) == "Liftoff! Counted down from 2."


async def test_countdown_streams_steps_and_one_appended_artifact() -> None:
    async with AgentHarness(CountdownAgent(interval_s=0)) as mesh:
        items = [item async for item in mesh.stream("count down from 3")]
        steps = [mesh.text(i) for i in items if isinstance(i, TaskStatusUpdateEvent) and i.status.message]
        assert steps == ["3...", "2...", "1...", "Liftoff! Counted down from 3."]
        chunks = [i for i in items if isinstance(i, TaskArtifactUpdateEvent)]
        assert [mesh.text(c) for c in chunks] == ["3\n", "2\n", "1\n", "0\n"]
        assert [bool(c.append) for c in chunks] == [False, True, True, True] and chunks[-1].last_chunk
        final = items[-1]
        assert isinstance(final, Task) and final.status.state is TaskState.completed
        [artifact] = final.artifacts or []
        assert mesh.text(artifact) == "3\n2\n1\n0\n"


async def test_countdown_is_canceled_while_it_waits() -> None:
    async with AgentHarness(CountdownAgent(interval_s=60)) as mesh:
        stream = mesh.stream("10")
        first_step = None
        async for item in stream:
            if isinstance(item, TaskStatusUpdateEvent) and mesh.text(item) == "10...":
                first_step = item
                break
        assert first_step is not None
        canceled = await mesh.cancel(first_step.task_id)
        assert canceled.status.state is TaskState.canceled
        rest = [item async for item in stream]
        assert isinstance(rest[-1], Task) and rest[-1].status.state is TaskState.canceled
        with pytest.raises(RpcError, match="canceled"):
            await mesh.cancel(canceled.id)  # a task that ended cannot be canceled again


async def test_resubscribe_picks_up_a_running_countdown() -> None:
    async with AgentHarness(CountdownAgent(interval_s=60)) as mesh:
        started = await mesh.send("5", blocking=False)
        assert started.status.state in (TaskState.submitted, TaskState.working)
        watch = mesh.resubscribe(started.id)
        current = await anext(watch)
        assert isinstance(current, Task) and current.id == started.id
        await mesh.cancel(started.id)
        rest = [item async for item in watch]
        assert isinstance(rest[-1], Task) and rest[-1].status.state is TaskState.canceled


async def test_settings_apply_to_the_agent_under_test() -> None:
    settings = AgentSettings(limits=MessageLimits(max_text_part_bytes=10))
    async with AgentHarness(EchoAgent(), settings=settings) as mesh:
        assert mesh.service.settings is settings
        with pytest.raises(RpcError, match="10"):
            await mesh.send("far more than ten bytes")
        assert mesh.text(await mesh.send("short")) == "short"


async def test_orchestrator_asks_its_peers_on_the_same_hub() -> None:
    async with AgentHarness(OrchestratorAgent(), peers=[EchoAgent(), CalculatorAgent()]) as mesh:
        task = await mesh.send("echo hi and 6*7")
        assert task.status.state is TaskState.completed
        assert mesh.text(task) == "calculator: 42\necho: echo hi and 6*7"
        direct = await mesh.send("2+2", agent="calculator")  # peers answer directly too
        assert mesh.text(direct) == "4"


async def test_orchestrator_alone_says_there_is_nobody_to_ask() -> None:
    async with AgentHarness(OrchestratorAgent()) as mesh:
        assert "there are no other agents on the mesh" in mesh.text(await mesh.send("echo hi"))


def test_two_agents_of_one_name_are_refused() -> None:
    with pytest.raises(ValueError, match="two agents named 'echo'"):
        AgentHarness(EchoAgent(), peers=[EchoAgent()])
