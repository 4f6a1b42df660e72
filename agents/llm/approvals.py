"""A person's yes before an LLM agent's tool call: ``approve:`` on pydantic-ai's deferred tools.

Each toolset is wrapped in pydantic-ai's :class:`~pydantic_ai.toolsets.ApprovalRequiredToolset`;
a call whose name matches an ``approve:`` pattern (fnmatch) raises ``ApprovalRequired``, and the
run ends with :class:`~pydantic_ai.DeferredToolRequests`. The names the patterns see: a Python
tool (or a built-in one) by its function name, an MCP tool as ``mcp:<server>/<tool>`` (the
server's ``name:``, else ``mcp-<index>``), a peer as ``peer:<agent>``. ``ask_user`` never asks.

The task turns ``input-required`` with one DataPart per pending call
``{"type": "tool_approval", "tool_call_id", "function_name", "arguments"}``; the next message
answers them, one DataPart each ``{"type": "tool_approval_result", "tool_call_id", "approved",
"arguments"?, "reason"?}`` (the text ``yes`` / ``no`` answers all; other text denies all, the
text as the reason). Calls left unanswered are asked again. A new pydantic-ai run then goes on
from the run's messages with :class:`~pydantic_ai.DeferredToolResults`: an approved call runs
(with the edited arguments), a denied one gives the model its reason as the tool's result.

The run's messages travel in the question's metadata (``llmApproval``), which the task journal
keeps: an agent restarted while waiting finds them in the task's history and goes on.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai import messages as pm
from pydantic_ai.tools import RunContext, ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, ApprovalRequiredToolset
from pydantic_ai.usage import RunUsage

from agents.llm.config import LlmConfig
from agents.updates import InputRequired
from mesh.a2a import DataPart, Message, Role, get_text_from_message

__all__ = [
    "APPROVAL",
    "APPROVAL_RESULT",
    "PENDING_KEY",
    "Pending",
    "approval_label",
    "guarded",
    "is_approval_answer",
    "pending_in",
]

APPROVAL = "tool_approval"
APPROVAL_RESULT = "tool_approval_result"
#: The metadata key of the question's message holding the run to go on with.
PENDING_KEY = "llmApproval"
_EVENT_KEY = "llmEvent"
_YES = frozenset({"y", "yes", "approve", "approved", "ok"})
_NO = frozenset({"n", "no", "deny", "denied"})
_MESSAGES = pm.ModelMessagesTypeAdapter
_USAGE: TypeAdapter[RunUsage] = TypeAdapter(RunUsage)


def guarded(toolset: AbstractToolset[Any], config: LlmConfig, label: Callable[[ToolDefinition], str]) -> Any:
    """``toolset`` whose calls named (by ``label``) as an ``approve:`` pattern says need approval."""
    patterns = config.approve

    def needs(_ctx: RunContext[Any], tool_def: ToolDefinition, _args: dict[str, Any]) -> bool:
        name = label(tool_def)
        return name != "ask_user" and any(fnmatchcase(name, p) for p in patterns)

    return ApprovalRequiredToolset(toolset, approval_required_func=needs)


def approval_label(toolset: AbstractToolset[Any], config: LlmConfig) -> Callable[[ToolDefinition], str]:
    """How ``approve:`` patterns name the tools of ``toolset`` (see the module docstring)."""
    from agents.llm.tools import PeerToolset

    if isinstance(toolset, PeerToolset):
        return lambda tool: f"peer:{(tool.metadata or {}).get('agent', tool.name)}"
    if config.mcp_servers:  # (pydantic-ai's MCP module is imported only for an agent with MCP servers)
        from pydantic_ai.mcp import MCPToolset

        if isinstance(toolset, MCPToolset):
            index = int(str(toolset.id).rpartition("-")[2] or 0)
            server = config.mcp_servers[index].name or str(toolset.id)
            return lambda tool: f"mcp:{server}/{tool.name}"
    return lambda tool: tool.name


@dataclass
class Pending:
    """Calls waiting for a person, and the run they belong to."""

    calls: list[pm.ToolCallPart]
    messages: list[pm.ModelMessage]
    usage: RunUsage
    #: Answers given so far (tool_call_id -> the result part's data), when some calls are left.
    answered: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, requests: DeferredToolRequests, messages: list[pm.ModelMessage], usage: RunUsage) -> Pending:
        return cls(calls=list(requests.approvals), messages=messages, usage=usage)

    def question(self, timeout_s: float | None) -> InputRequired:
        """The input-required update: one DataPart per call; the run in its metadata."""
        parts = [DataPart(data=_asked(call), metadata={"tool_call_id": call.tool_call_id}) for call in self.calls]
        names = ", ".join(sorted({c.tool_name for c in self.calls}))
        state = {
            "messages": _MESSAGES.dump_python([_private(m) for m in self.messages], mode="json"),
            "usage": _USAGE.dump_python(self.usage, mode="json"),
            "calls": [c.tool_call_id for c in self.calls],
            "answered": self.answered,
        }
        return InputRequired(
            parts=parts,
            metadata={_EVENT_KEY: "approval", PENDING_KEY: state},
            timeout_s=timeout_s,
            timeout_reason=f"no answer to the approval of {names} within {timeout_s:g} s (approval_timeout_s)"
            if timeout_s
            else "",
        )

    def answer(self, reply: Message | None) -> DeferredToolResults | None:
        """The results once every call is answered (None: some are left, ask again)."""
        self.answered.update(_answers(reply, self.calls))
        left = [c for c in self.calls if c.tool_call_id not in self.answered]
        if left:
            self.calls = left
            return None
        results = DeferredToolResults()
        for call_id, given in self.answered.items():
            results.approvals[call_id] = _result(given)
        return results


def pending_in(history: Sequence[Message], task_id: str) -> Pending | None:
    """The approval the task waits for, from its last message in ``history`` (after a restart)."""
    for message in reversed(history):
        if message.task_id != task_id or message.role is not Role.agent:
            continue
        state = (message.metadata or {}).get(PENDING_KEY)
        if not isinstance(state, dict):
            return None
        messages = _MESSAGES.validate_python(state["messages"])
        calls = {c.tool_call_id: c for m in messages if isinstance(m, pm.ModelResponse) for c in m.tool_calls}
        asked = [calls[i] for i in state.get("calls", ()) if i in calls]
        answered = state.get("answered") or {}
        return Pending(calls=asked, messages=messages, usage=_USAGE.validate_python(state["usage"]), answered=answered)
    return None


def is_approval_answer(message: Message) -> bool:
    return any(isinstance(p, DataPart) and p.data.get("type") == APPROVAL_RESULT for p in message.parts)


def _asked(call: pm.ToolCallPart) -> dict[str, Any]:
    try:
        arguments: Any = call.args_as_dict()
    except Exception:  # malformed JSON from the model: shown as it came
        arguments = {"raw": str(call.args)}
    return {
        "type": APPROVAL,
        "tool_call_id": call.tool_call_id,
        "function_name": call.tool_name,
        "arguments": arguments,
    }


def _answers(reply: Message | None, calls: Sequence[pm.ToolCallPart]) -> dict[str, dict[str, Any]]:
    """The reply's answers by tool_call_id: its result parts, or its text for every call."""
    if reply is None:
        return {}
    asked = {c.tool_call_id for c in calls}
    given: dict[str, dict[str, Any]] = {}
    for part in reply.parts:
        if isinstance(part, DataPart) and part.data.get("type") == APPROVAL_RESULT:
            call_id = part.data.get("tool_call_id")
            if isinstance(call_id, str) and call_id in asked:
                given[call_id] = dict(part.data)
    if given:
        return given
    text = (get_text_from_message(reply) or "").strip()
    if not text:
        return {}
    word = text.lower().rstrip(".!")
    if word in _YES:
        return {i: {"approved": True} for i in asked}
    reason = None if word in _NO else f"the user answered instead: {text}"
    return {i: {"approved": False, "reason": reason} for i in asked}


def _result(given: dict[str, Any]) -> ToolApproved | ToolDenied:
    if given.get("approved") is True:
        edited = given.get("arguments")
        return ToolApproved(override_args=edited if isinstance(edited, dict) else None)
    reason = given.get("reason")
    text = (
        f"The user denied this call: {reason}" if isinstance(reason, str) and reason else "The user denied this call."
    )
    return ToolDenied(text)


def _private(message: pm.ModelMessage) -> pm.ModelMessage:
    """The message without the agent's instructions (the client sees the question's metadata;
    each new request is given the instructions afresh)."""
    if isinstance(message, pm.ModelRequest) and message.instructions is not None:
        return dataclasses.replace(message, instructions=None)
    return message
