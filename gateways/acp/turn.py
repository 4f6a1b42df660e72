"""One ``session/prompt`` turn: the E2A frames of the mesh's answer -> ACP ``session/update``s and the end.

What becomes what:

- a ``working`` status: its text as ``agent_thought_chunk`` (progress), or ``agent_message_chunk``
  when the status says it is answer text (``metadata.acpUpdate``, set by the ACP agent bridge);
- a status or artifact forwarded from a delegated peer (``metadata.forwardedFrom``, a
  delegation with ``forward=True``): a ``tool_call`` for that peer, then ``tool_call_update``s,
  completed when the turn ends; a data part ``{"toolCall": {...}}``: that tool call;
- an artifact: its parts as ``agent_message_chunk``s (text, ``resource`` or ``resource_link``);
- the final status: its text as ``agent_message_chunk``; ``completed`` / ``input-required`` end
  the turn (``end_turn``), ``canceled`` ends it ``cancelled``, ``failed`` / ``rejected`` / an
  ``e2a.error`` become a JSON-RPC error with the agent's message.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mesh.e2a import E2AResponse, e2a_response_to_acp_jsonrpc_response
from mesh.e2a.acp_content import a2a_part_to_acp_block

__all__ = ["PromptTurn", "TurnEnd"]

_INTERNAL_ERROR = -32603
_TOOL_STATUSES = {"pending", "in_progress", "completed", "failed"}


@dataclass(slots=True)
class TurnEnd:
    """How a turn ended: a stop reason, or a JSON-RPC error object."""

    stop_reason: str | None = None
    error: dict[str, Any] | None = None
    input_required: bool = False
    #: An LLM agent's tool calls waiting for approval (``tool_approval`` data): permission requests.
    approvals: list[dict[str, Any]] = field(default_factory=list)


@dataclass(slots=True)
class PromptTurn:
    """Translates the frames of one turn; ``task_id`` is known from the first event on."""

    images: bool = True
    task_id: str | None = None
    state: str | None = None
    _delegations: dict[str, str] = field(default_factory=dict)  # peer -> tool call id
    _tool_calls: set[str] = field(default_factory=set)
    _final_text_sent: bool = False

    def updates(self, frame: E2AResponse) -> list[dict[str, Any]]:
        """The ``session/update`` objects for one in-progress frame."""
        body = frame.body
        payload = body.get("payload") if frame.response_kind == "a2a.stream_event" else None
        if not isinstance(payload, Mapping):
            return []
        kind = payload.get("kind")
        if kind == "task":
            self.task_id = str(payload.get("id") or self.task_id or "") or None
            return []
        self.task_id = self.task_id or _str(payload.get("taskId"))
        if kind == "artifact-update":
            artifact = payload.get("artifact") or {}
            peer = (artifact.get("metadata") or {}).get("forwardedFrom")
            if isinstance(peer, str):
                return [self._delegation(peer, _parts(artifact))]
            return [_chunk("agent_message_chunk", self._block(p)) for p in _parts(artifact)]
        if kind == "status-update":
            return self._status(payload.get("status") or {})
        return []

    def end(self, frame: E2AResponse) -> tuple[list[dict[str, Any]], TurnEnd]:
        """The last updates and the turn's end, from the final frame."""
        if frame.response_kind == "e2a.error":
            answer = e2a_response_to_acp_jsonrpc_response(frame) or {}
            return [], TurnEnd(error=dict(answer.get("error") or {"code": _INTERNAL_ERROR, "message": "failed"}))
        result = frame.body.get("result") if frame.response_kind == "e2a.complete" else frame.body
        if not isinstance(result, Mapping):
            return [], TurnEnd(stop_reason="end_turn")
        if result.get("kind") == "message":
            return [_chunk("agent_message_chunk", self._block(p)) for p in _parts(result)], TurnEnd("end_turn")
        self.task_id = self.task_id or _str(result.get("id"))
        status = result.get("status") or {}
        updates = [] if self._final_text_sent else self._status(status)
        return updates, self._ending(str(status.get("state") or self.state or ""), status)

    # ------------------------------------------------------------------ internals

    def _status(self, status: Mapping[str, Any]) -> list[dict[str, Any]]:
        self.state = _str(status.get("state")) or self.state
        message = status.get("message") or {}
        metadata = message.get("metadata") or {}
        parts = _parts(message)
        peer = metadata.get("forwardedFrom")
        if isinstance(peer, str):
            return [self._delegation(peer, parts)]
        out: list[dict[str, Any]] = []
        rest = []
        for part in parts:
            data = part.get("data", {}) if part.get("kind") == "data" else {}
            if data.get("type") == "tool_approval":
                continue  # asked as session/request_permission, not shown as text
            tool = data.get("toolCall")
            if isinstance(tool, Mapping) and tool.get("toolCallId"):
                out.append(self._tool_call(tool))
            else:
                rest.append(part)
        if self.state == "working":
            kind = (
                "agent_message_chunk" if metadata.get("acpUpdate") == "agent_message_chunk" else "agent_thought_chunk"
            )
        else:
            kind = "agent_message_chunk"
            self._final_text_sent = True
        out.extend(_chunk(kind, self._block(p)) for p in rest)
        return out

    def _delegation(self, peer: str, parts: list[dict[str, Any]]) -> dict[str, Any]:
        content = [{"type": "content", "content": self._block(p)} for p in parts]
        if peer in self._delegations:
            update = {"sessionUpdate": "tool_call_update", "toolCallId": self._delegations[peer]}
            return {**update, "status": "in_progress", "content": content}
        call_id = self._delegations[peer] = f"delegate-{peer}-{len(self._delegations) + 1}"
        update = {"sessionUpdate": "tool_call", "toolCallId": call_id, "title": f"Delegated to {peer}"}
        return {**update, "kind": "other", "status": "in_progress", "content": content, "rawInput": {"agent": peer}}

    def _tool_call(self, tool: Mapping[str, Any]) -> dict[str, Any]:
        call = {k: v for k, v in tool.items() if k != "sessionUpdate"}
        if call.get("status") not in _TOOL_STATUSES:
            call.pop("status", None)
        call_id = str(call["toolCallId"])
        if call_id in self._tool_calls:
            return {"sessionUpdate": "tool_call_update", **call}
        self._tool_calls.add(call_id)
        return {"sessionUpdate": "tool_call", "title": call_id, **call}

    def _ending(self, state: str, status: Mapping[str, Any]) -> TurnEnd:
        if state in ("completed", "input-required"):
            asked = [
                p["data"]
                for p in _parts(status.get("message") or {})
                if p.get("kind") == "data"
                and isinstance(p.get("data"), dict)
                and p["data"].get("type") == "tool_approval"
            ]
            return TurnEnd("end_turn", input_required=state == "input-required", approvals=asked)
        if state == "canceled":
            return TurnEnd("cancelled")
        text = " ".join(p.get("text", "") for p in _parts(status.get("message") or {}) if p.get("kind") == "text")
        message = text or f"the task ended {state or 'without a state'}"
        return TurnEnd(
            error={"code": _INTERNAL_ERROR, "message": message, "data": {"taskId": self.task_id, "state": state}}
        )

    def closing_updates(self) -> list[dict[str, Any]]:
        """Delegations still shown as running are over once the turn ends."""
        done = "failed" if self.state in ("failed", "rejected", "canceled") else "completed"
        return [
            {"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": done}
            for call_id in self._delegations.values()
        ]

    def _block(self, part: Mapping[str, Any]) -> dict[str, Any]:
        return a2a_part_to_acp_block(part, images=self.images)


def _chunk(kind: str, block: dict[str, Any]) -> dict[str, Any]:
    return {"sessionUpdate": kind, "content": block}


def _parts(holder: Mapping[str, Any]) -> list[dict[str, Any]]:
    parts = holder.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
