"""``approve:``: tool calls a person approves first (pydantic-ai's deferred tools), through the task runtime."""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart

from agents import AgentSettings
from agents.testing import AgentHarness, llm_agent
from mesh.a2a import DataPart, Message, Role, Task, TaskState, new_id
from tests.agents.llm.scripts import call, scripted, tool_returns

RAN: list[dict[str, Any]] = []


def transfer(account: str, amount: int) -> str:
    """Move money to an account."""
    RAN.append({"account": account, "amount": amount})
    return f"sent {amount} to {account}"


def word_count(text: str) -> int:
    """Count the words of a text."""
    return len(text.split())


def asked(task: Task) -> list[dict[str, Any]]:
    """The approval questions of an input-required task."""
    assert task.status.state is TaskState.input_required, task.status
    assert task.status.message is not None
    return [p.data for p in task.status.message.parts if isinstance(p, DataPart)]


def answer(*results: dict[str, Any]) -> Message:
    parts = [DataPart(data={"type": "tool_approval_result", **r}) for r in results]
    return Message(message_id=new_id(), role=Role.user, parts=parts)


async def ended(mesh: AgentHarness, task_id: str) -> Task:
    """The task once terminal: what tasks/resubscribe ends with."""
    final = None
    async for item in mesh.resubscribe(task_id):
        final = item
    assert isinstance(final, Task), final
    return final


def said(messages: list[ModelMessage]) -> list[str]:
    """A step answering with what each tool returned (as the model saw it)."""
    return [" | ".join(str(r.content) for r in tool_returns(messages))]


def agent(**llm: Any) -> Any:
    model = scripted([call("transfer", {"account": "bob", "amount": 5})], said)
    config = {"model": "test", "approve": ["transfer"], **llm}
    return llm_agent(config, model, tools=[transfer, word_count])


async def test_an_approved_call_runs_and_the_model_gets_its_result() -> None:
    RAN.clear()
    async with AgentHarness(agent()) as mesh:
        task = await mesh.send("pay bob")
        [question] = asked(task)
        assert question == {
            "type": "tool_approval",
            "tool_call_id": "c1",
            "function_name": "transfer",
            "arguments": {"account": "bob", "amount": 5},
        }
        assert RAN == []  # nothing ran before the yes
        done = await mesh.send(answer({"tool_call_id": "c1", "approved": True}), task_id=task.id)
    assert done.status.state is TaskState.completed, done.status
    assert mesh.text(done) == "sent 5 to bob"
    assert RAN == [{"account": "bob", "amount": 5}]


async def test_a_denied_call_gives_the_model_the_reason_as_its_result() -> None:
    RAN.clear()
    async with AgentHarness(agent()) as mesh:
        task = await mesh.send("pay bob")
        asked(task)
        done = await mesh.send(answer({"tool_call_id": "c1", "approved": False, "reason": "not bob"}), task_id=task.id)
    assert done.status.state is TaskState.completed, done.status
    assert mesh.text(done) == "The user denied this call: not bob"
    assert RAN == []


async def test_an_edited_call_runs_with_the_edited_arguments() -> None:
    RAN.clear()
    async with AgentHarness(agent()) as mesh:
        task = await mesh.send("pay bob")
        asked(task)
        edited = {"tool_call_id": "c1", "approved": True, "arguments": {"account": "bob", "amount": 2}}
        done = await mesh.send(answer(edited), task_id=task.id)
    assert mesh.text(done) == "sent 2 to bob"
    assert RAN == [{"account": "bob", "amount": 2}]


async def test_a_plain_yes_approves_every_pending_call() -> None:
    RAN.clear()
    async with AgentHarness(agent()) as mesh:
        task = await mesh.send("pay bob")
        asked(task)
        done = await mesh.send("yes", task_id=task.id)
    assert mesh.text(done) == "sent 5 to bob"


async def test_several_pending_calls_are_asked_together_and_answered_in_parts() -> None:
    RAN.clear()
    both = [
        call("transfer", {"account": "ann", "amount": 1}, "a", 0),
        call("transfer", {"account": "cy", "amount": 3}, "b", 1),
        call("word_count", {"text": "not guarded"}, "w", 2),
    ]
    model = scripted(both, said)
    mine = llm_agent({"model": "test", "approve": ["trans*"]}, model, tools=[transfer, word_count])
    async with AgentHarness(mine) as mesh:
        task = await mesh.send("pay both")
        questions = asked(task)
        assert [q["tool_call_id"] for q in questions] == ["a", "b"]  # word_count needs no approval
        partly = await mesh.send(answer({"tool_call_id": "b", "approved": False}), task_id=task.id)
        assert [q["tool_call_id"] for q in asked(partly)] == ["a"]  # the one left is asked again
        done = await mesh.send(answer({"tool_call_id": "a", "approved": True}), task_id=task.id)
    assert done.status.state is TaskState.completed, done.status
    returned = [m for m in model.seen[-1] if isinstance(m, ModelRequest)][-1]  # type: ignore[attr-defined]
    results = {p.tool_call_id: p.content for p in returned.parts if isinstance(p, ToolReturnPart)}
    assert results == {"a": "sent 1 to ann", "b": "The user denied this call.", "w": 2}
    assert RAN == [{"account": "ann", "amount": 1}]


async def test_no_answer_within_approval_timeout_fails_the_task_naming_the_tool() -> None:
    async with AgentHarness(agent(approval_timeout_s=0.2)) as mesh:
        task = await mesh.send("pay bob")
        asked(task)
        failed = await ended(mesh, task.id)
    assert failed.status.state is TaskState.failed, failed.status
    assert "no answer to the approval of transfer within 0.2 s (approval_timeout_s)" in mesh.text(failed)


async def test_without_approve_the_tools_run_at_once() -> None:
    RAN.clear()
    model = scripted([call("transfer", {"account": "bob", "amount": 5})], said)
    async with AgentHarness(llm_agent({"model": "test"}, model, tools=[transfer])) as mesh:
        done = await mesh.send("pay bob")
    assert mesh.text(done) == "sent 5 to bob"


async def test_the_generic_input_timeout_still_cancels_other_questions() -> None:
    settings = AgentSettings(input_timeout_s=0.2)
    model = scripted([call("ask_user", {"question": "which account?"})], said)
    async with AgentHarness(llm_agent({"model": "test", "approve": ["*"]}, model), settings=settings) as mesh:
        task = await mesh.send("pay")
        assert task.status.state is TaskState.input_required  # ask_user never needs approval
        canceled = await ended(mesh, task.id)
    assert canceled.status.state is TaskState.canceled, canceled.status
    assert "no input within 0.2 s" in mesh.text(canceled)
