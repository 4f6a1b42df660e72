"""An LLM agent through the real task runtime (AgentHarness), with scripted models."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from agents import Agent, AgentSettings, DelegationSettings, Reply, TaskContext
from agents.builtin.echo import EchoAgent
from agents.llm.run import COALESCE_S
from agents.testing import AgentHarness, llm_agent
from mesh.a2a import DataPart, Message, Task, TaskState, TaskStatusUpdateEvent, get_text_from_message
from tests.agents.llm.scripts import call, scripted, tool_returns, user_texts

ARTIFACT_TOOLS = ["list_artifacts", "load_artifact", "save_artifact"]


def statuses(items: list[Any]) -> list[Message]:
    return [i.status.message for i in items if isinstance(i, TaskStatusUpdateEvent) and i.status.message is not None]


def data_of(message: Message) -> dict[str, Any]:
    [part] = message.parts
    assert isinstance(part, DataPart)
    return part.data


def peer_text(content: Any) -> str:
    """The text of a peer's answer, as the model got it."""
    return str(content["text"])


def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


def explode(text: str) -> str:
    """A tool that fails."""
    raise RuntimeError(f"cannot handle {text!r}")


async def test_a_peer_tool_call_streams_call_result_text_then_the_answer() -> None:
    model = scripted(
        [call("echo", {"message": "hi there"})],
        lambda messages: ["The peer said: ", peer_text(tool_returns(messages)[0].content)],
    )
    agent = llm_agent({"model": "test", "peers": ["ech*"]}, model)
    async with AgentHarness(agent, peers=[EchoAgent()]) as mesh:
        items = [item async for item in mesh.stream("ask echo")]
    messages = statuses(items)
    assert data_of(messages[0]) == {"type": "tool_call", "function_name": "echo", "arguments": {"message": "hi there"}}
    assert messages[0].parts[0].metadata == {"tool_call_id": "c1"}
    result = data_of(messages[1])
    assert result["type"] == "tool_result" and result["result"]["agent"] == "echo"
    assert "not instructions" in result["result"]["note"]
    streamed = "".join(get_text_from_message(m) for m in messages[2:-1])
    assert streamed == "The peer said: hi there"
    final = items[-1]
    assert isinstance(final, Task) and final.status.state is TaskState.completed
    assert mesh.text(final) == "The peer said: hi there"
    assert final.status.message is not None and final.status.message.metadata is not None
    assert final.status.message.metadata["llm"]["modelCalls"] == 2
    assert final.status.message.metadata["llm"]["toolCalls"] == 1


async def test_a_peer_not_allowed_is_no_tool() -> None:
    seen_tools: list[list[str]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        seen_tools.append(sorted(t.name for t in info.function_tools))
        yield "ok"

    agent = llm_agent({"model": "test", "peers": ["calc*"]}, FunctionModel(stream_function=stream))
    async with AgentHarness(agent, peers=[EchoAgent()]) as mesh:
        await mesh.send("hi")
    assert seen_tools == [["ask_user", *ARTIFACT_TOOLS]]


async def test_python_tools_and_a_tool_that_raises_tells_the_model() -> None:
    model = scripted(
        [call("word_count", {"text": "a b c"}, "w"), call("explode", {"text": "x"}, "e", 1)],
        lambda messages: [f"results: {sorted(str(p.content) for p in tool_returns(messages))}"],
    )
    agent = llm_agent({"model": "test"}, model, tools=[word_count, explode])
    async with AgentHarness(agent) as mesh:
        task = await mesh.send("count")
    assert task.status.state is TaskState.completed
    assert "3" in mesh.text(task) and "RuntimeError: cannot handle 'x'" in mesh.text(task)


async def test_malformed_tool_arguments_go_back_to_the_model_as_a_retry() -> None:
    model = scripted(
        [call("word_count", '{"text": "a b', "bad")],
        [call("word_count", {"text": "a b"}, "good")],
        lambda messages: [f"count {tool_returns(messages)[0].content}"],
    )
    agent = llm_agent({"model": "test"}, model, tools=[word_count])
    async with AgentHarness(agent) as mesh:
        task = await mesh.send("count")
    assert task.status.state is TaskState.completed and mesh.text(task) == "count 2"


async def test_ask_user_waits_for_input_and_resumes_the_same_run() -> None:
    model = scripted(
        [call("ask_user", {"question": "Which city?"}, "q")],
        lambda messages: [f"Weather in {tool_returns(messages)[0].content}: sunny"],
    )
    agent = llm_agent({"model": "test"}, model)
    async with AgentHarness(agent) as mesh:
        task = await mesh.send("weather")
        assert task.status.state is TaskState.input_required and mesh.text(task) == "Which city?"
        task = await mesh.send("Paris", task_id=task.id, context_id=task.context_id)
    assert task.status.state is TaskState.completed and mesh.text(task) == "Weather in Paris: sunny"
    assert len(model.seen) == 2  # type: ignore[attr-defined]  # one run: the question, then the answer


async def test_a_context_continues_one_conversation() -> None:
    model = scripted(["Nice to meet you, Ada."], lambda messages: [" | ".join(user_texts(messages))])
    agent = llm_agent({"model": "test"}, model)
    async with AgentHarness(agent) as mesh:
        first = await mesh.send("I am Ada")
        second = await mesh.send("Who am I?", context_id=first.context_id)
    assert mesh.text(second) == "I am Ada | Who am I?"
    history = model.seen[1]  # type: ignore[attr-defined]
    assert any(isinstance(m, ModelResponse) and "Nice to meet you" in str(m.parts[0]) for m in history)


async def test_a_structured_answer_is_a_structured_output_data_part() -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    agent = llm_agent(
        {"model": "test", "output": schema}, TestModel(call_tools=[], custom_output_args={"city": "Paris"})
    )
    async with AgentHarness(agent) as mesh:
        task = await mesh.send("where?")
    assert task.status.message is not None
    assert data_of(task.status.message) == {"type": "structured_output", "content": {"city": "Paris"}}


async def test_max_model_calls_fails_the_task_naming_the_limit() -> None:
    model = scripted(lambda messages: [call("word_count", {"text": "a"}, f"c{len(messages)}")])
    agent = llm_agent({"model": "test", "max_model_calls": 2}, model, tools=[word_count])
    async with AgentHarness(agent) as mesh:
        task = await mesh.send("loop")
    assert task.status.state is TaskState.failed
    assert "llm.max_model_calls: 2" in mesh.text(task) and "Traceback" not in mesh.text(task)


def failing_model(*errors: Exception) -> FunctionModel:
    left = list(errors)

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        if left:
            raise left.pop(0)
        yield "fine"

    return FunctionModel(stream_function=stream)


@pytest.mark.parametrize(
    ("status", "fix"),
    [(401, "check the API key (MY_KEY)"), (404, "the provider does not know it")],
)
async def test_a_model_error_fails_the_task_naming_status_and_fix(
    status: int, fix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_KEY", "secret")
    model = failing_model(ModelHTTPError(status, "gpt-x", body={"error": "nope"}))
    agent = llm_agent({"model": "openai:gpt-x", "api_key_env": "MY_KEY"}, model)
    async with AgentHarness(agent) as mesh:
        task = await mesh.send("hi")
    assert task.status.state is TaskState.failed
    assert f"answered HTTP {status}" in mesh.text(task) and fix in mesh.text(task)
    assert "secret" not in mesh.text(task)


async def test_429_and_5xx_are_retried() -> None:
    model = failing_model(ModelHTTPError(429, "m", body="slow down"), ModelHTTPError(503, "m", body="busy"))
    agent = llm_agent({"model": "test", "retries": 2}, model)
    agent.engine.model.base_s = 0.01  # type: ignore[union-attr]
    async with AgentHarness(agent) as mesh:
        task = await mesh.send("hi")
    assert task.status.state is TaskState.completed and mesh.text(task) == "fine"


async def test_retries_are_bounded() -> None:
    model = failing_model(*[ModelHTTPError(500, "m", body="down")] * 5)
    agent = llm_agent({"model": "test", "retries": 1}, model)
    agent.engine.model.base_s = 0.01  # type: ignore[union-attr]
    async with AgentHarness(agent) as mesh:
        task = await mesh.send("hi")
    assert task.status.state is TaskState.failed and "retried 1 times" in mesh.text(task)


async def test_streamed_text_is_coalesced() -> None:
    chunks = [f"w{i} " for i in range(2000)]

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for index, chunk in enumerate(chunks):
            if index % 50 == 0:
                await asyncio.sleep(0.005)  # a model producing ~10,000 chunks a second
            yield chunk

    agent = llm_agent({"model": "test"}, FunctionModel(stream_function=stream))
    async with AgentHarness(agent) as mesh:
        started = time.monotonic()
        items = [item async for item in mesh.stream("talk")]
        elapsed = time.monotonic() - started
    texts = [get_text_from_message(m) for m in statuses(items)[:-1]]
    assert "".join(texts) == "".join(chunks)
    assert len(texts) <= 2 + elapsed / COALESCE_S  # not one event per chunk: at most ~20 a second


class Slow(Agent):
    name = "slow"
    description = "Never answers"
    started: asyncio.Event
    canceled: asyncio.Event

    async def handle(self, message: Message, ctx: TaskContext) -> Reply:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.canceled.set()
            raise
        return Reply("never")


async def test_cancel_interrupts_the_model_and_cascades_to_the_peer() -> None:
    slow = Slow()
    slow.started, slow.canceled = asyncio.Event(), asyncio.Event()
    agent = llm_agent({"model": "test", "peers": ["slow"]}, scripted([call("slow", {"message": "wait"})]))
    async with AgentHarness(agent, peers=[slow]) as mesh:
        task = await mesh.send("go", blocking=False)
        await slow.started.wait()
        canceled = await mesh.cancel(task.id)
        assert canceled.status.state is TaskState.canceled
        await asyncio.wait_for(slow.canceled.wait(), 5)


async def test_cancel_interrupts_a_model_request() -> None:
    requested, interrupted = asyncio.Event(), asyncio.Event()

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        requested.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            interrupted.set()
            raise
        yield "never"

    agent = llm_agent({"model": "test"}, FunctionModel(stream_function=stream))
    async with AgentHarness(agent) as mesh:
        task = await mesh.send("go", blocking=False)
        await requested.wait()
        canceled = await mesh.cancel(task.id)
        assert canceled.status.state is TaskState.canceled
        await asyncio.wait_for(interrupted.wait(), 5)


async def test_a_peer_failure_is_told_to_the_model() -> None:
    class Failing(Agent):
        name = "failing"

        async def handle(self, message: Message, ctx: TaskContext) -> str:
            raise ValueError("no such city")

    model = scripted([call("failing", {"message": "x"})], lambda messages: [str(tool_returns(messages)[0].content)])
    agent = llm_agent({"model": "test", "peers": ["*"]}, model)
    async with AgentHarness(agent, peers=[Failing()]) as mesh:
        task = await mesh.send("go")
    assert task.status.state is TaskState.completed
    assert "failing" in mesh.text(task) and "no such city" in mesh.text(task)


async def test_a_peer_call_is_a_delegation_with_its_depth_limit() -> None:
    model = scripted([call("echo", {"message": "x"})], lambda messages: [str(tool_returns(messages)[0].content)])
    agent = llm_agent({"model": "test", "peers": ["*"]}, model)
    settings = AgentSettings(delegation=DelegationSettings(max_call_depth=0))
    async with AgentHarness(agent, peers=[EchoAgent()], settings=settings) as mesh:
        task = await mesh.send("go")
    assert task.status.state is TaskState.completed
    assert "did not answer" in mesh.text(task) and "delegation.max_call_depth" in mesh.text(task)


async def test_peer_tools_are_named_as_model_apis_accept_and_never_take_a_builtin_name() -> None:
    offered: list[list[str]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        offered.append(sorted(t.name for t in info.function_tools))
        yield "ok"

    agent = llm_agent({"model": "test", "peers": ["*"]}, FunctionModel(stream_function=stream), tools=[word_count])
    peers = [EchoAgent(name=name) for name in ("weather.v2", "ask_user", "word_count")]
    async with AgentHarness(agent, peers=peers) as mesh:
        task = await mesh.send("hi")
    assert task.status.state is TaskState.completed  # a clash of names would fail every run
    assert offered == [sorted(["ask_user", *ARTIFACT_TOOLS, "word_count", "weather_v2"])]


def test_a_provider_failure_points_at_base_url_only_when_one_is_set() -> None:
    from pydantic_ai.exceptions import ModelAPIError, ModelConnectionError

    from agents.llm.config import LlmConfig
    from agents.llm.model import explain

    default = LlmConfig.model_validate({"model": "openai:gpt-x"})
    own = LlmConfig.model_validate({"model": "openai:gpt-x", "base_url": "http://127.0.0.1:11434/v1"})
    unreachable = ModelConnectionError("gpt-x", "connection refused")
    assert "base_url" not in explain(unreachable, default).replace("set base_url for a server", "")
    assert "check this machine's network" in explain(unreachable, default)
    assert "at http://127.0.0.1:11434/v1" in explain(unreachable, own) and "check base_url" in explain(unreachable, own)
    failed = ModelAPIError("gpt-x", "bad")
    assert explain(failed, default).endswith("check the model id and key")
    assert explain(failed, own).endswith("check the model id, key and base_url")
