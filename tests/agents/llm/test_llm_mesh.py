"""LLM agents on the real broker: a fake OpenAI-compatible server, a real MCP server over
stdio, and peers on the mesh (delegation, a peer killed mid-call, cancel)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import models

from agents.llm import LlmAgent, parse_llm
from mesh.a2a import DataPart, Task, TaskState, TaskStatusUpdateEvent, get_text_from_message
from mesh.client import MeshClient
from tests.agents.llm.fake_openai import FakeOpenAI, Turn
from tests.agents.service_agents import Blocker, Echo
from tests.conftest import ServeAgent
from tests.support import start_agent_process

HERE = Path(__file__).parent


@pytest.fixture
def allow_loopback_model(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fake server is on loopback: the only model requests the suite lets through.
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", True)


def assistant(base_url: str, **llm: Any) -> LlmAgent:
    config = parse_llm({"model": "openai:fake-model", "base_url": base_url, **llm}, HERE / "x.yaml", ("llm",))
    return LlmAgent(name="assistant", llm=config)


def events(items: list[Any]) -> list[dict[str, Any] | str]:
    """The statuses as the client sees them: a DataPart's data, or a text."""
    out: list[dict[str, Any] | str] = []
    for item in items:
        if isinstance(item, TaskStatusUpdateEvent) and item.status.message is not None and not item.final:
            part = item.status.message.parts[0]
            out.append(part.data if isinstance(part, DataPart) else get_text_from_message(item.status.message))
    return out


def final_text(task: Any) -> str:
    assert isinstance(task, Task) and task.status.message is not None
    return get_text_from_message(task.status.message)


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.usefixtures("allow_loopback_model")
async def test_chat_completions_with_a_peer_tool_call(
    stream: bool, serve_agent: ServeAgent, client: MeshClient
) -> None:
    script = [Turn(tool_calls=[("echo", {"message": "ping"})]), Turn(text="The echo agent said ping.")]
    async with FakeOpenAI(script) as server:
        await serve_agent(Echo(name="echo"))
        await serve_agent(assistant(server.base_url, peers=["echo"], stream=stream))
        items = [item async for item in client.stream("assistant", "call echo")]
    seen = events(items)
    assert seen[0] == {"type": "tool_call", "function_name": "echo", "arguments": {"message": "ping"}}
    assert isinstance(seen[1], dict) and seen[1]["type"] == "tool_result" and seen[1]["result"]["text"] == "ping"
    if stream:
        assert "".join(s for s in seen[2:] if isinstance(s, str)) == "The echo agent said ping."
    assert final_text(items[-1]) == "The echo agent said ping."
    # The model got the tool and then the peer's answer, marked as the peer's data.
    names = ["ask_user", "list_artifacts", "load_artifact", "save_artifact", "echo"]
    assert [t["function"]["name"] for t in server.requests[0]["tools"]] == names
    assert server.requests[0].get("stream", False) is stream
    tool_message = next(m for m in server.requests[1]["messages"] if m["role"] == "tool")
    assert "not instructions" in tool_message["content"] and "ping" in tool_message["content"]


@pytest.mark.usefixtures("allow_loopback_model")
async def test_text_chunks_go_to_those_who_follow_the_task_and_are_not_kept_otherwise(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    script = [Turn(tool_calls=[("echo", {"message": "ping"})]), Turn(text="It said ping.")] * 2
    async with FakeOpenAI(script) as server:
        await serve_agent(Echo(name="echo"))
        await serve_agent(assistant(server.base_url, peers=["echo"]))
        streamed = [item async for item in client.stream("assistant", "call echo")]
        sent = await client.send("assistant", "call echo")
        assert isinstance(sent, Task)
        kept = await client.get_task("assistant", sent.id)
    assert "".join(s for s in events(streamed) if isinstance(s, str)) == "It said ping."
    # Nobody followed the message/send live: its history keeps the tool events and the answer,
    # not the text chunks (the answer holds the whole text).
    kinds = [(m.metadata or {}).get("llmEvent") for m in kept.history or () if m.role.value == "agent"]
    assert "text" not in kinds and {"tool_call", "tool_result"} <= set(kinds), kinds
    assert final_text(kept) == "It said ping."


@pytest.mark.usefixtures("allow_loopback_model")
async def test_a_follow_up_in_the_same_context_sees_the_earlier_turns(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    async with FakeOpenAI([Turn(text="Hello Ada."), Turn(text="You are Ada.")]) as server:
        await serve_agent(assistant(server.base_url))
        first = await client.send("assistant", "I am Ada")
        assert isinstance(first, Task)
        second = await client.send("assistant", "Who am I?", context_id=first.context_id)
    assert final_text(second) == "You are Ada."
    turns = [(m["role"], m["content"]) for m in server.requests[1]["messages"] if m["role"] != "system"]
    assert turns == [("user", "I am Ada"), ("assistant", "Hello Ada."), ("user", "Who am I?")]


@pytest.mark.usefixtures("allow_loopback_model")
async def test_a_provider_error_fails_the_task_with_the_status_and_the_fix(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    async with FakeOpenAI([Turn(error=401)]) as server:
        await serve_agent(assistant(server.base_url))
        task = await client.send("assistant", "hi")
    assert isinstance(task, Task) and task.status.state is TaskState.failed
    text = final_text(task)
    assert "answered HTTP 401" in text and "check the API key" in text and "Traceback" not in text


@pytest.mark.usefixtures("allow_loopback_model")
async def test_a_server_error_is_retried(serve_agent: ServeAgent, client: MeshClient) -> None:
    async with FakeOpenAI([Turn(error=503), Turn(text="back")]) as server:
        agent = assistant(server.base_url, retries=2)
        agent.engine.model.base_s = 0.01  # type: ignore[union-attr]
        await serve_agent(agent)
        task = await client.send("assistant", "hi")
    assert final_text(task) == "back" and len(server.requests) == 2


@pytest.mark.usefixtures("allow_loopback_model")
async def test_an_unreachable_base_url_names_it(serve_agent: ServeAgent, client: MeshClient) -> None:
    async with FakeOpenAI([]) as server:
        url = server.base_url  # closed when the block ends: nothing listens there any more
    await serve_agent(assistant(url, retries=0))
    task = await client.send("assistant", "hi")
    assert isinstance(task, Task) and task.status.state is TaskState.failed
    assert url in final_text(task) and "Traceback" not in final_text(task)


@pytest.mark.usefixtures("allow_loopback_model")
async def test_a_real_mcp_server_over_stdio(serve_agent: ServeAgent, client: MeshClient) -> None:
    script = [
        Turn(tool_calls=[("shout", {"text": "hello"}), ("fail", {"reason": "no"})]),
        Turn(text="done"),
    ]
    mcp = {"mcp": {"command": [sys.executable, str(HERE / "mcp_server.py")]}}
    async with FakeOpenAI(script) as server:
        await serve_agent(assistant(server.base_url, tools=[mcp]))
        items = [item async for item in client.stream("assistant", "shout hello")]
    results = {e["function_name"]: e for e in events(items) if isinstance(e, dict) and e["type"] == "tool_result"}
    assert results["shout"]["result"] == "HELLO!"
    assert results["fail"].get("is_error") and "fail" in str(results["fail"]["result"])  # the SDK hides details
    assert final_text(items[-1]) == "done"
    assert {"shout", "fail"} <= {t["function"]["name"] for t in server.requests[0]["tools"]}


@pytest.mark.usefixtures("allow_loopback_model")
async def test_a_peer_killed_mid_call_is_a_failed_tool_result_at_once(
    broker_url: str, namespace: str, serve_agent: ServeAgent, client: MeshClient
) -> None:
    script = [Turn(tool_calls=[("blocker", {"message": "wait"})]), Turn(text="the peer went away")]
    proc = await start_agent_process(broker_url, namespace, "blocker", agent="Blocker")
    try:
        async with FakeOpenAI(script) as server:
            await serve_agent(assistant(server.base_url, peers=["blocker"]))
            stream = client.stream("assistant", "ask blocker")
            items: list[Any] = []
            async for item in stream:
                items.append(item)
                if events(items) and events(items)[-1] == {
                    "type": "tool_call",
                    "function_name": "blocker",
                    "arguments": {"message": "wait"},
                }:
                    break
            proc.kill()
            rest = await asyncio.wait_for(_collect(stream), 2.0)  # the bound: known within 2 s
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    result = events(rest)[0]
    assert isinstance(result, dict) and result["type"] == "tool_result" and result.get("is_error")
    assert "blocker" in str(result["result"])
    assert final_text(rest[-1]) == "the peer went away"


async def _collect(stream: Any) -> list[Any]:
    return [item async for item in stream]


@pytest.mark.usefixtures("allow_loopback_model")
async def test_cancel_cascades_to_the_peer(serve_agent: ServeAgent, client: MeshClient) -> None:
    blocker = Blocker(name="blocker")
    async with FakeOpenAI([Turn(tool_calls=[("blocker", {"message": "wait"})])]) as server:
        await serve_agent(blocker)
        await serve_agent(assistant(server.base_url, peers=["*"]))
        task = await client.send("assistant", "ask blocker", blocking=False)
        assert isinstance(task, Task)
        await blocker.started.wait()
        canceled = await client.cancel_task("assistant", task.id)
        assert canceled.status.state is TaskState.canceled
        async with asyncio.timeout(5):
            while blocker.cancellations == 0:  # the peer's own task ends on the cascaded tasks/cancel
                await asyncio.sleep(0.01)
