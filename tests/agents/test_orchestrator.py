"""The orchestrator example agent: matching (pure), then routing the built-in agents on the real broker."""

from __future__ import annotations

from typing import Any

import pytest

from agents import Agent
from agents.builtin.calculator import CalculatorAgent
from agents.builtin.countdown import CountdownAgent
from agents.builtin.echo import EchoAgent
from agents.builtin.orchestrator import (
    OPT_OUT_TAG,
    Match,
    OrchestratorAgent,
    find_expression,
    match_agents,
    terms,
)
from mesh.a2a import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentSkill,
    DataPart,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
    get_text_from_message,
)
from mesh.client import MeshClient
from mesh.discovery.registry import GATEWAY_ROLE_EXTENSION
from tests.agents.service_agents import Blocker
from tests.conftest import ServeAgent


def card_of(agent: Agent) -> AgentCard:
    return agent.card(url=f"mqtt://localhost:1883/t/a2a/v1/agent/request/{agent.name}", push_notifications=False)


def card(name: str, *tags: str, skill: str = "Skill", extensions: list[AgentExtension] | None = None) -> AgentCard:
    skills = [AgentSkill(id=skill.lower(), name=skill, description="...", tags=list(tags))] if tags else []
    return AgentCard(
        name=name,
        description=name,
        version="1",
        url="mqtt://x/t",
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills,
        capabilities=AgentCapabilities(extensions=extensions),
    )


BUILTIN = [card_of(EchoAgent()), card_of(CalculatorAgent()), card_of(CountdownAgent()), card_of(OrchestratorAgent())]


def routed(text: str, cards: list[AgentCard] = BUILTIN, **options: Any) -> dict[str, str]:
    return {m.agent: m.message for m in match_agents(text, cards, **options)}


# --- matching, pure ---------------------------------------------------------------------------


def test_terms_are_lowercase_words_without_stop_words_or_numbers_plus_joined_pairs() -> None:
    assert terms("Please COUNT down from 5!") == ["count", "down", "countdown"]
    assert terms("what is the") == []
    assert terms("Ünïcode wörds") == ["ünïcode", "wörds", "ünïcodewörds"]


@pytest.mark.parametrize(
    ("text", "expression"),
    [
        ("what is 2+2", "2+2"),
        ("What is (1/3) * 3?", "(1/3) * 3"),
        ("echo hello and 2 + 2 please", "2 + 2"),
        ("compute sqrt(9) + 1", "sqrt(9) + 1"),
        ("2*pi", "2*pi"),
        ("what is -3 + 4", "-3 + 4"),
        ("max(1, 2) ^ 2, then stop", "max(1, 2) ^ 2"),
        ("17 // 5 =", "17 // 5"),
        ("echo 3 and 6×7", "6×7"),  # two numbers in a row are not one expression
        ("(see 1/0)", "1/0"),  # parentheses left open at the edges are dropped
        ("first 2^10, then 3*3", "2^10"),  # the first one
        ("count down from 5", None),
        ("hello - 2", None),
        ("well-known and/or", None),
        ("", None),
    ],
)
def test_find_expression(text: str, expression: str | None) -> None:
    assert find_expression(text) == expression


def test_an_expression_routes_to_the_calculator_with_the_expression_alone() -> None:
    [match] = match_agents("what is 2+2?", BUILTIN)
    assert match == Match("calculator", 1, ("2+2",), "2+2")


def test_names_tags_and_skill_names_match_and_everyone_else_gets_the_whole_text() -> None:
    assert routed("echo hello") == {"echo": "echo hello"}
    assert routed("count down from 3") == {"countdown": "count down from 3"}  # "count down" -> countdown
    assert routed("set a timer for 3") == {"countdown": "set a timer for 3"}  # a tag
    assert routed("echo hello and 2+2") == {"calculator": "2+2", "echo": "echo hello and 2+2"}


def test_best_first_then_by_name_and_at_most_max_peers() -> None:
    text = "arithmetic test: echo 2+2"  # calculator: arithmetic + the expression; echo: test + echo
    assert [(m.agent, m.score) for m in match_agents(text, BUILTIN)] == [("calculator", 2), ("echo", 2)]
    text = "math countdown echo repeat"
    assert [(m.agent, m.score) for m in match_agents(text, BUILTIN)] == [
        ("echo", 2),
        ("calculator", 1),
        ("countdown", 1),
    ]
    assert [m.agent for m in match_agents(text, BUILTIN, max_peers=1)] == ["echo"]


def test_nothing_matches() -> None:
    assert match_agents("tell me a joke", BUILTIN) == []
    assert match_agents("what is 2+2", [card_of(EchoAgent())]) == []  # nobody does arithmetic


def test_never_itself_gateways_opted_out_or_excluded_peers() -> None:
    gateway = card("web", "route", extensions=[AgentExtension(uri=GATEWAY_ROLE_EXTENSION)])
    shy = card("shy", "route", OPT_OUT_TAG)
    assert match_agents("route orchestrate fan-out", [*BUILTIN, gateway, shy]) == []  # the orchestrator opts out too
    assert routed("echo hi", exclude=["ech*"]) == {}


def test_an_opted_out_skill_is_ignored_but_the_peers_other_skills_count() -> None:
    both = card("multi", "weather")
    both = both.model_copy(
        update={"skills": [*both.skills, AgentSkill(id="x", name="X", description="", tags=["secret", OPT_OUT_TAG])]}
    )
    assert routed("weather", [both]) == {"multi": "weather"}
    assert routed("secret", [both]) == {}
    assert routed("multi", [card("multi")]) == {"multi": "multi"}  # no skills: the name still counts


# --- on the broker ----------------------------------------------------------------------------


async def builtin_mesh(serve_agent: ServeAgent) -> None:
    await serve_agent(EchoAgent())
    await serve_agent(CalculatorAgent())
    await serve_agent(CountdownAgent(interval_s=0.01))
    await serve_agent(OrchestratorAgent())  # last: the others' retained cards reach it before any request


def text_of(task: object) -> str:
    assert isinstance(task, Task) and task.status.message is not None
    return get_text_from_message(task.status.message)


def answers_of(task: object) -> dict[str, Any]:
    assert isinstance(task, Task)
    [artifact] = [a for a in task.artifacts or [] if a.name == "answers"]
    [part] = artifact.parts
    assert isinstance(part, DataPart)
    return part.data


async def test_routes_arithmetic_to_the_calculator(serve_agent: ServeAgent, client: MeshClient) -> None:
    await builtin_mesh(serve_agent)
    task = await client.send("orchestrator", "what is 2+2")
    assert isinstance(task, Task) and task.status.state is TaskState.completed
    assert text_of(task) == "calculator: 4"
    answer = answers_of(task)["calculator"]
    assert answer["ok"] is True and answer["text"] == "4" and answer["sent"] == "2+2"
    assert answer["matched"] == ["2+2"] and answer["state"] == "completed"
    assert answer["data"] == {"expression": "2+2", "result": "4"}
    assert answer["taskId"].startswith("a2a_subtask_")


async def test_fans_out_and_combines_with_attribution(serve_agent: ServeAgent, client: MeshClient) -> None:
    await builtin_mesh(serve_agent)
    task = await client.send("orchestrator", "countdown from 2, echo this and 6*7")
    assert text_of(task) == (
        "calculator: 42\ncountdown: Liftoff! Counted down from 2.\necho: countdown from 2, echo this and 6*7"
    )
    answers = answers_of(task)
    assert list(answers) == ["calculator", "countdown", "echo"]
    assert all(a["ok"] and a["state"] == "completed" for a in answers.values())
    assert answers["calculator"]["sent"] == "6*7" and answers["echo"]["sent"] == "countdown from 2, echo this and 6*7"
    assert answers["echo"]["matched"] == ["echo"]


async def test_no_match_lists_the_agents_and_their_skills(serve_agent: ServeAgent, client: MeshClient) -> None:
    await builtin_mesh(serve_agent)
    task = await client.send("orchestrator", "tell me a joke")
    assert isinstance(task, Task) and task.status.state is TaskState.completed
    lines = text_of(task).splitlines()
    assert lines[0].startswith("No agent matches 'tell me a joke'.")
    assert [line.split(":")[0] for line in lines[1:]] == ["- calculator", "- countdown", "- echo"]
    assert "Arithmetic [math, calculator, arithmetic, compute]" in lines[1]
    assert task.status.message is not None
    data = task.status.message.parts[1]
    assert isinstance(data, DataPart) and data.data["matched"] == []
    assert sorted(data.data["available"]) == ["calculator", "countdown", "echo"]


async def test_no_other_agent_on_the_mesh(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(OrchestratorAgent())
    assert "there are no other agents on the mesh" in text_of(await client.send("orchestrator", "echo hi"))


async def test_a_failing_peer_is_reported_with_attribution(serve_agent: ServeAgent, client: MeshClient) -> None:
    await builtin_mesh(serve_agent)
    task = await client.send("orchestrator", "echo this and 1/0")
    assert isinstance(task, Task) and task.status.state is TaskState.completed  # echo answered
    calculator, echo = text_of(task).splitlines()
    assert calculator.startswith("calculator (failed): cannot evaluate '1/0': division by zero")
    assert echo == "echo: echo this and 1/0"
    failed = answers_of(task)["calculator"]
    assert failed["ok"] is False and failed["state"] == "failed" and failed["error"].startswith("cannot evaluate")


async def test_a_silent_peer_times_out_and_is_reported(serve_agent: ServeAgent, client: MeshClient) -> None:
    blocker = Blocker()  # no skills: matched by its name
    await serve_agent(blocker)
    await serve_agent(EchoAgent())
    await serve_agent(OrchestratorAgent(timeout_s=0.2))
    task = await client.send("orchestrator", "blocker and echo")
    assert isinstance(task, Task) and task.status.state is TaskState.completed
    silent, echo = text_of(task).splitlines()
    assert silent.startswith("blocker (failed): agent 'blocker' sent nothing on task 'a2a_subtask_")
    assert silent.endswith("for 0.2 s; the task was canceled") and echo == "echo: blocker and echo"
    assert "state" not in answers_of(task)["blocker"]  # no final Task from it
    assert blocker.started.is_set()


async def test_the_task_fails_when_every_peer_failed(serve_agent: ServeAgent, client: MeshClient) -> None:
    await builtin_mesh(serve_agent)
    task = await client.send("orchestrator", "what is 1/0")
    assert isinstance(task, Task) and task.status.state is TaskState.failed
    assert text_of(task).startswith("every agent asked failed:\ncalculator (failed): cannot evaluate '1/0'")
    assert answers_of(task)["calculator"]["ok"] is False


async def test_streams_its_plan_and_the_peers_progress(serve_agent: ServeAgent, client: MeshClient) -> None:
    await builtin_mesh(serve_agent)
    items = [item async for item in client.stream("orchestrator", "countdown from 3 and echo it")]
    statuses = [i.status.message for i in items if isinstance(i, TaskStatusUpdateEvent) and i.status.message]
    assert [get_text_from_message(m) for m in statuses] == [
        "asking countdown, echo",
        "3...",
        "2...",
        "1...",
        "countdown: Liftoff! Counted down from 3.\necho: countdown from 3 and echo it",
    ]
    plan = statuses[0].parts[1]
    assert isinstance(plan, DataPart) and plan.data["plan"]["countdown"] == {
        "sent": "countdown from 3 and echo it",
        "matched": ["countdown"],
    }
    assert all(m.metadata == {"forwardedFrom": "countdown"} for m in statuses[1:4])
    artifacts = [i.artifact for i in items if isinstance(i, TaskArtifactUpdateEvent)]
    assert [a.name for a in artifacts] == ["countdown"] * 4 + ["answers"]
    assert artifacts[0].artifact_id.startswith("countdown:")
    final = items[-1]
    assert isinstance(final, Task) and final.status.state is TaskState.completed
