"""The remote agent as a peer: an LLM agent (the project's fake OpenAI server) and a workflow call it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents import AgentSettings
from agents.workflow import WorkflowAgent, load_workflow
from mesh.a2a import DataPart, Task, TaskState, get_text_from_message
from mesh.client import MeshClient
from tests.agents.remote.conftest import Remote, ServeRemote
from tests.conftest import ServeAgent

pytest.importorskip("pydantic_ai", reason="the llm extra is not installed")
from pydantic_ai import models

from agents.llm import LlmAgent, parse_llm
from tests.agents.llm.fake_openai import FakeOpenAI, Turn

MEMORY = AgentSettings(task_store=":memory:")


async def test_an_llm_agent_calls_the_remote_agent_as_a_tool(
    remote: Remote,
    serve_remote: ServeRemote,
    serve_agent: ServeAgent,
    client: MeshClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(models, "ALLOW_MODEL_REQUESTS", True)  # the fake server is on loopback
    await serve_remote(card_url=remote.card_url)
    await client.wait_for_agent("weather", timeout=5)
    script = [Turn(tool_calls=[("weather", {"message": "Lima"})]), Turn(text="The remote said: echo: Lima.")]
    async with FakeOpenAI(script) as server:
        config = parse_llm(
            {"model": "openai:fake-model", "base_url": server.base_url, "peers": ["weather"]},
            Path(__file__).parent / "x.yaml",
            ("llm",),
        )
        await serve_agent(LlmAgent(name="assistant", llm=config), MEMORY)
        task = await client.send("assistant", "ask the weather agent", timeout=30)
    assert isinstance(task, Task) and task.status.state is TaskState.completed, task
    assert task.status.message is not None
    assert get_text_from_message(task.status.message) == "The remote said: echo: Lima."
    tool_message = next(m for m in server.requests[1]["messages"] if m["role"] == "tool")
    assert "echo: Lima" in tool_message["content"]  # the remote's answer, reached through the mesh


async def test_a_workflow_calls_the_remote_agent_as_a_node(
    remote: Remote, serve_remote: ServeRemote, serve_agent: ServeAgent, client: MeshClient
) -> None:
    await serve_remote(card_url=remote.card_url)
    text = """
        nodes:
          - {id: first, agent: weather, input: "{{ input.text }}"}
          - {id: second, agent: weather, input: "again {{ first.output.text }}"}
        output: {said: "{{ second.output.text }}"}
    """
    await serve_agent(WorkflowAgent(name="twice", graph=load_workflow(text, name="twice")), MEMORY)
    task = await client.send("twice", "hi", timeout=30)
    assert isinstance(task, Task) and task.status.state is TaskState.completed, task
    assert task.status.message is not None
    data = next(p.data for p in task.status.message.parts if isinstance(p, DataPart))
    assert data == {"said": "echo: again echo: hi"}
