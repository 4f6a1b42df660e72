"""Approvals, usage and cost on the real broker with the fake OpenAI-compatible server: a restart
while a call waits for approval keeps the question, and the usage figures are the server's."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from genai_prices import Usage, calc_price
from prometheus_client.parser import text_string_to_metric_families
from pydantic_ai import models

from agents import AgentSettings
from agents.llm import LlmAgent, parse_llm
from mesh.a2a import DataPart, Message, Role, Task, TaskState, TextPart, get_text_from_message, new_id
from mesh.client import MeshClient
from mesh.telemetry.exposition import render
from mesh.telemetry.usage import COMMIT_DELAY_S, SqliteUsageStore
from tests.agents.llm.fake_openai import FakeOpenAI, Turn
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent
from tests.support import within
from tests.whole_product_clients import eventually

HERE = Path(__file__).parent


@pytest.fixture(autouse=True)
def allow_loopback_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", True)  # the fake server on loopback only


def assistant(base_url: str, model: str = "openai:fake-model", **llm: Any) -> LlmAgent:
    config = parse_llm({"model": model, "base_url": base_url, **llm}, HERE / "x.yaml", ("llm",))
    return LlmAgent(name="assistant", llm=config)


def approval(task: Task) -> dict[str, Any]:
    assert task.status.state is TaskState.input_required, task.status
    assert task.status.message is not None
    [part] = task.status.message.parts
    assert isinstance(part, DataPart)
    return part.data


async def test_a_restart_while_waiting_keeps_the_question_and_the_answer_goes_on(
    serve_agent: ServeAgent, client: MeshClient, tmp_path: Path
) -> None:
    script = [Turn(tool_calls=[("echo", {"message": "ping"})]), Turn(text="echo said ping")]
    settings = AgentSettings(task_store=str(tmp_path / "tasks.sqlite3"))
    async with FakeOpenAI(script) as server:
        await serve_agent(Echo(name="echo"))
        llm = {"peers": ["echo"], "approve": ["peer:echo"], "usage_store": ":memory:"}
        first = await serve_agent(assistant(server.base_url, **llm), settings)
        task = await client.send("assistant", "call echo")
        asked = approval(task)
        assert asked["function_name"] == "echo" and asked["arguments"] == {"message": "ping"}
        await first.stop()
        await serve_agent(assistant(server.base_url, **llm), settings)  # a new process, the same journal
        still = await client.get_task("assistant", task.id)
        assert approval(still) == asked
        yes = {"type": "tool_approval_result", "tool_call_id": asked["tool_call_id"], "approved": True}
        reply = Message(message_id=new_id(), role=Role.user, parts=[DataPart(data=yes)])
        done = await client.send("assistant", reply, task_id=task.id)
    assert done.status.state is TaskState.completed, done.status
    assert done.status.message is not None and get_text_from_message(done.status.message) == "echo said ping"
    # The model got the peer's answer to the approved call, after the restart.
    tool_message = next(m for m in server.requests[1]["messages"] if m["role"] == "tool")
    assert "ping" in tool_message["content"]
    assert done.status.message.metadata is not None
    assert done.status.message.metadata["llm"]["modelCalls"] == 2  # the usage went on across the restart


async def test_usage_and_cost_are_the_servers_figures(
    serve_agent: ServeAgent, client: MeshClient, tmp_path: Path, namespace: str
) -> None:
    script = [
        Turn(tool_calls=[("echo", {"message": "ping"})], usage=(1200, 30, 1000)),
        Turn(text="done", usage=(1300, 20, 1100)),
    ]
    store = tmp_path / "usage.sqlite3"
    async with FakeOpenAI(script) as server:
        await serve_agent(Echo(name="echo"))
        await serve_agent(assistant(server.base_url, "openai:gpt-4o-mini", peers=["echo"], usage_store=str(store)))
        done = await client.send("assistant", "call echo")
    assert done.status.message is not None and done.status.message.metadata is not None
    meta = done.status.message.metadata["llm"]
    assert (meta["inputTokens"], meta["outputTokens"], meta["cacheReadTokens"]) == (2500, 50, 2100)
    price = sum(
        calc_price(
            Usage(input_tokens=i, output_tokens=o, cache_read_tokens=c), "gpt-4o-mini", provider_id="openai"
        ).total_price
        for i, o, c in [(1200, 30, 1000), (1300, 20, 1100)]
    )
    assert price > 0 and meta["costUsd"] == pytest.approx(float(price))
    expected = [("assistant", "gpt-4o-mini", 1200, 30), ("assistant", "gpt-4o-mini", 1300, 20)]
    reader = SqliteUsageStore(store)  # another process's view: the agent commits its rows within 50 ms

    async def stored() -> tuple[bool, str]:
        rows = [(r.agent, r.model, r.input_tokens, r.output_tokens) for r in reader.rows(0)]
        return rows == expected, f"the usage rows: {rows}"

    try:
        await eventually(stored, timeout=within(COMMIT_DELAY_S + 1), what="the answer's usage rows in the file")
        rows = reader.rows(0)
    finally:
        reader.close()
    assert sum(r.cost_usd or 0 for r in rows) == pytest.approx(float(price))
    scraped = {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(render().decode())
        for s in family.samples
    }
    labels = frozenset({"namespace": namespace, "agent": "assistant", "model": "openai:gpt-4o-mini"}.items())
    assert scraped[("mesh_llm_cost_usd_total", labels)] == pytest.approx(float(price))


async def test_an_mcp_tool_is_named_by_its_server_and_a_peer_by_its_agent(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    script = [
        Turn(tool_calls=[("shout", {"text": "hi"}), ("fail", {"reason": "no"}), ("echo", {"message": "ping"})]),
        Turn(text="done"),
    ]
    mcp = {"mcp": {"name": "loud", "command": [sys.executable, str(HERE / "mcp_server.py")]}}
    approve = ["mcp:loud/shout", "peer:ech*"]
    async with FakeOpenAI(script) as server:
        await serve_agent(Echo(name="echo"))
        llm = {"tools": [mcp], "peers": ["echo"], "approve": approve, "usage_store": ":memory:"}
        await serve_agent(assistant(server.base_url, **llm))
        task = await client.send("assistant", "shout hi")
        assert task.status.state is TaskState.input_required, task.status
        assert task.status.message is not None
        asked = [p.data["function_name"] for p in task.status.message.parts if isinstance(p, DataPart)]
        assert sorted(asked) == ["echo", "shout"]  # fail is not listed: it ran at once
        reply = Message(message_id=new_id(), role=Role.user, parts=[TextPart(text="yes")])
        done = await client.send("assistant", reply, task_id=task.id)
    assert done.status.state is TaskState.completed, done.status
    returned = {m.get("tool_call_id"): m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"}
    assert "HI!" in returned["call_0"] and "ping" in returned["call_2"]


async def test_the_approval_timeout_holds_across_a_restart(
    serve_agent: ServeAgent, client: MeshClient, tmp_path: Path
) -> None:
    script = [Turn(tool_calls=[("echo", {"message": "ping"})]), Turn(text="never")]
    settings = AgentSettings(task_store=str(tmp_path / "tasks.sqlite3"))
    llm = {"peers": ["echo"], "approve": ["peer:echo"], "approval_timeout_s": 2, "usage_store": ":memory:"}
    async with FakeOpenAI(script) as server:
        await serve_agent(Echo(name="echo"))
        first = await serve_agent(assistant(server.base_url, **llm), settings)
        task = await client.send("assistant", "call echo")
        approval(task)
        assert task.status.message is not None and task.status.message.metadata is not None
        assert task.status.message.metadata["inputDeadline"]["reason"].startswith("no answer to the approval of echo")
        await first.stop()
        await serve_agent(assistant(server.base_url, **llm), settings)
        final = None
        async for item in client.resubscribe("assistant", task.id, idle_timeout=30):
            final = item
    assert isinstance(final, Task) and final.status.state is TaskState.failed, final
    assert final.status.message is not None
    assert get_text_from_message(final.status.message) == (
        "no answer to the approval of echo within 2 s (approval_timeout_s)"
    )
    assert len(server.requests) == 1  # the model was not asked again
