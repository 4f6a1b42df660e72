"""``model: demo``: the scripted demo model plans from the user's text and calls the mesh's agents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.tools import ToolDefinition

from agents.builtin.calculator import CalculatorAgent
from agents.builtin.countdown import CountdownAgent
from agents.builtin.echo import EchoAgent
from agents.llm.config import LlmConfig
from agents.llm.demo import Call, demo_model, plan, step
from agents.llm.model import build_model
from agents.testing import AgentHarness, llm_agent
from mesh.a2a import DataPart, Task, TaskState, TaskStatusUpdateEvent, get_text_from_message

ASK = "what is 7 times 6, then count down from 3"


def tool(name: str, description: str = "") -> ToolDefinition:
    return ToolDefinition(name=name, description=description, parameters_json_schema={"type": "object"})


MESH_TOOLS = [
    tool("ask_user", "Ask the user a question"),
    tool("calculator", "Ask the agent 'calculator' on the mesh. Evaluates arithmetic"),
    tool("countdown", "Ask the agent 'countdown' on the mesh. Counts down from a number"),
    tool("echo", "Ask the agent 'echo' on the mesh. Repeats what it is told"),
    tool("orchestrator", "Ask the agent 'orchestrator' on the mesh."),
    tool("save_artifact", "Save text as a file"),
]


def test_model_demo_is_the_demo_model() -> None:
    model = build_model(LlmConfig(model="demo"))
    assert isinstance(model, FunctionModel) and model.model_name == "demo"
    assert model.function is not None and model.stream_function is not None  # stream: false works too


@pytest.mark.parametrize(
    ("text", "calls"),
    [
        (ASK, [Call("calculator", "7*6", "arithmetic"), Call("countdown", "3", "countdown")]),
        ("What's 2 plus 2?", [Call("calculator", "2+2", "arithmetic")]),
        (
            "compute (1/3) * 3 and then 10 divided by 4",
            [Call("calculator", "(1/3)*3", "arithmetic"), Call("calculator", "10/4", "arithmetic")],
        ),
        ("countdown 5", [Call("countdown", "5", "named")]),
        ("echo hi and 6*7", [Call("echo", "hi", "named"), Call("calculator", "6*7", "arithmetic")]),
        ("ask the echo agent about the weather", [Call("echo", "the weather", "named")]),
    ],
)
def test_the_plan_follows_the_words(text: str, calls: list[Call]) -> None:
    assert plan(text, MESH_TOOLS) == (calls, [])


def test_a_clause_it_cannot_map_is_named_and_the_rest_is_done() -> None:
    assert plan("what is 7 times 6 and write me a poem", MESH_TOOLS) == (
        [Call("calculator", "7*6", "arithmetic")],
        ["write me a poem"],
    )


def test_tools_are_found_by_description_and_only_among_peers() -> None:
    tools = [tool("calc_eu", "Evaluates arithmetic"), tool("ticker", "Counts down from N"), tool("ask_user")]
    assert plan("6 x 7 then count down from 2", tools) == (
        [Call("calc_eu", "6*7", "arithmetic"), Call("ticker", "2", "countdown")],
        [],
    )
    assert plan("ask_user who are you", tools) == ([], ["ask_user who are you"])


def returned(name: str, call_id: str, text: str, state: str = "completed") -> ToolReturnPart:
    content = {"note": "output of the agent", "agent": name, "state": state, "text": text}
    return ToolReturnPart(tool_name=name, content=content, tool_call_id=call_id)


def test_each_request_is_one_step_plan_call_result_next_call_answer() -> None:
    asked = ModelRequest(parts=[UserPromptPart(ASK)])
    first = step([asked], MESH_TOOLS)
    assert first.text == 'Plan: calculator "7*6", then countdown "3".'
    assert first.call == Call("calculator", "7*6", "arithmetic")
    calculated = ModelRequest(parts=[returned("calculator", first.call_id, "42")])
    called = ModelResponse(parts=[ToolCallPart("calculator", {"message": "7*6"}, first.call_id)])
    second = step([asked, called, calculated], MESH_TOOLS)
    assert second.text == '7*6 = 42. Next: countdown "3".'
    assert second.call == Call("countdown", "3", "countdown") and second.call_id != first.call_id
    counted = ModelRequest(parts=[returned("countdown", second.call_id, "Liftoff! Counted down from 3.\n3\n2\n1\n0")])
    last = step([asked, called, calculated, called, counted], MESH_TOOLS)
    assert last.call is None
    assert last.text == "7*6 = 42; countdown: Liftoff! Counted down from 3. (3 2 1 0)."


def test_a_new_turn_plans_afresh() -> None:
    earlier = [
        ModelRequest(parts=[UserPromptPart("echo hi")]),
        ModelResponse(parts=[TextPart("echo: hi.")]),
        ModelRequest(parts=[UserPromptPart("2 + 3")]),
    ]
    assert step(earlier, MESH_TOOLS).call == Call("calculator", "2+3", "arithmetic")


def test_a_failed_call_is_said_plainly() -> None:
    asked = ModelRequest(parts=[UserPromptPart("what is 1/0")])
    failed = ToolReturnPart(tool_name="calculator", content="division by zero", tool_call_id="demo-1", outcome="failed")
    answer = step([asked, ModelRequest(parts=[failed])], MESH_TOOLS)
    assert answer.call is None and answer.text == "calculator failed: division by zero."


@pytest.mark.parametrize("tools", [MESH_TOOLS, [tool("ask_user")]], ids=["mesh tools", "no peers"])
def test_what_it_cannot_map_it_says_what_it_is_and_what_it_can_do(tools: list[ToolDefinition]) -> None:
    answer = step([ModelRequest(parts=[UserPromptPart("write me a poem")])], tools)
    assert answer.call is None
    assert 'I cannot map "write me a poem" to a tool.' in answer.text
    assert "demo model, a scripted stand-in: no provider, no network, no API key" in answer.text
    if len(tools) > 1:
        assert "calculator, countdown, echo, orchestrator" in answer.text and '"what is 7 times 6"' in answer.text
    else:
        assert "no agents as tools" in answer.text


def statuses(items: list[Any]) -> list[Any]:
    return [i.status.message for i in items if isinstance(i, TaskStatusUpdateEvent) and i.status.message is not None]


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "stream: false"])
async def test_the_demo_model_calls_calculator_then_countdown_and_answers_from_them(stream: bool) -> None:
    agent = llm_agent({"model": "demo", "peers": ["*"], "stream": stream}, demo_model())
    peers = [CalculatorAgent(), CountdownAgent(interval_s=0.01), EchoAgent()]
    async with AgentHarness(agent, peers=peers) as mesh:
        items = [item async for item in mesh.stream(ASK)]
    shown = []
    for message in statuses(items):
        part = message.parts[0]
        shown.append(part.data if isinstance(part, DataPart) else get_text_from_message(message))
    calls = [(s["function_name"], s["arguments"]) for s in shown if isinstance(s, dict) and s["type"] == "tool_call"]
    assert calls == [("calculator", {"message": "7*6"}), ("countdown", {"message": "3"})]
    results = [s["result"] for s in shown if isinstance(s, dict) and s["type"] == "tool_result"]
    assert [(r["agent"], r["state"], r["text"].split("\n")[0]) for r in results] == [
        ("calculator", "completed", "42"),
        ("countdown", "completed", "Liftoff! Counted down from 3."),
    ]
    final = items[-1]
    assert isinstance(final, Task) and final.status.state is TaskState.completed
    assert mesh.text(final) == "7*6 = 42; countdown: Liftoff! Counted down from 3. (3 2 1 0)."
    if stream:  # the thinking is streamed before each call: plan, result and next call, answer
        texts = [s for s in shown if isinstance(s, str)]
        assert texts[:2] == ['Plan: calculator "7*6", then countdown "3".', '7*6 = 42. Next: countdown "3".']


async def test_an_llm_agent_declared_with_model_demo_runs(tmp_path: Path) -> None:
    """From the YAML, no model handed in: ``model: demo`` needs no key and no network."""
    agent = llm_agent({"model": "demo"}, None)
    async with AgentHarness(agent) as mesh:
        task = await mesh.send("hello")
    assert task.status.state is TaskState.completed
    assert "demo model" in mesh.text(task) and "no agents as tools" in mesh.text(task)
