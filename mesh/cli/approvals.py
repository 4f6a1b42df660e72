"""``mesh send --approve``: answering an LLM agent's tool approvals from the command line.

A task that waits for approvals is ``input-required`` with one DataPart per call
``{"type": "tool_approval", "tool_call_id", "function_name", "arguments"}`` (docs/llm-agents.md).
``--approve ask`` (the default) asks y/n for each call when standard input and standard error
are a terminal, else leaves the task waiting (and says how to answer); ``all`` approves every
call, ``none`` denies every call. The answer is one message of ``tool_approval_result`` parts;
``mesh send AGENT --task ID --approve all`` answers a task that is already waiting.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

from mesh.a2a import DataPart, Message, Role, Task, TaskState, new_id

__all__ = ["APPROVE_CHOICES", "approval_answer", "decide", "pending_approvals"]

APPROVE_CHOICES = ("ask", "all", "none")
_SHOWN = 2000  # characters of a call's arguments shown at the prompt


def pending_approvals(result: Task | Message) -> list[dict[str, Any]]:
    """The calls an input-required task waits to have approved (empty: none)."""
    if not isinstance(result, Task) or result.status.state is not TaskState.input_required:
        return []
    message = result.status.message
    if message is None:
        return []
    return [p.data for p in message.parts if isinstance(p, DataPart) and p.data.get("type") == "tool_approval"]


def decide(
    calls: list[dict[str, Any]],
    approve: str,
    *,
    agent: str,
    ask: Callable[[str], str] | None = None,
) -> list[dict[str, Any]] | None:
    """The answers to ``calls`` (None: ``ask`` without a terminal, the task keeps waiting)."""
    if approve == "all":
        return [_result(c, True) for c in calls]
    if approve == "none":
        return [_result(c, False, "denied from the command line (mesh send --approve none)") for c in calls]
    if ask is None:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            return None
        ask = _prompt
    answers = []
    for call in calls:
        arguments = json.dumps(call.get("arguments"), ensure_ascii=False)
        if len(arguments) > _SHOWN:
            arguments = arguments[:_SHOWN] + "..."
        said = ask(f"{agent} wants to call {call.get('function_name')}({arguments}). Approve? [y/N] ").strip()
        yes = said.lower() in ("y", "yes")
        answers.append(_result(call, yes, None if yes or not said or said.lower() in ("n", "no") else said))
    return answers


def approval_answer(answers: list[dict[str, Any]], task: Task) -> Message:
    """The message answering a task's approvals."""
    return Message(
        message_id=new_id(),
        role=Role.user,
        parts=[DataPart(data=a) for a in answers],
        task_id=task.id,
        context_id=task.context_id,
    )


def waiting_hint(agent: str, task: Task) -> str:
    return (
        f"(task {task.id} waits for the approval of {len(pending_approvals(task))} tool call(s): "
        f"mesh send {agent} --task {task.id} --approve all|none, or run mesh send on a terminal to be asked)"
    )


def _result(call: dict[str, Any], approved: bool, reason: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": "tool_approval_result",
        "tool_call_id": call.get("tool_call_id"),
        "approved": approved,
    }
    if reason:
        out["reason"] = reason
    return out


def _prompt(question: str) -> str:
    print(question, end="", file=sys.stderr, flush=True)
    return sys.stdin.readline()
