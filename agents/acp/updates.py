"""From an ACP agent's ``session/update``s and ``stopReason`` to the task's updates and end.

- ``agent_message_chunk`` text: a status update (``metadata.acpUpdate`` names the kind, so a
  gateway can show it as answer text), and the text is collected for the final Reply;
  non-text content (files, images, resources) becomes an artifact;
- ``agent_thought_chunk``: a status update marked as a thought;
- ``tool_call`` / ``tool_call_update``: a status update with a data part ``{"toolCall": {...}}``
  (id, title, kind, status, content...); ``plan``: a data part ``{"plan": [...]}``;
- the other kinds (modes, commands, usage...) say nothing about the task and are skipped.

``stopReason``: ``end_turn`` completes the task with the collected text;
``max_tokens`` / ``max_turn_requests`` complete it with a note in a data part; ``refusal``
fails it, saying the agent refused; ``cancelled`` (without a cancel from the mesh) fails it.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import TypeAdapter

from agents.updates import PartsArtifact, Reply, Status, TaskFailed, Update
from mesh.a2a import Part
from mesh.e2a.acp_content import acp_block_to_a2a_part

__all__ = ["UpdateTranslator"]

log = logging.getLogger(__name__)

_NOTES = {
    "max_tokens": "the ACP agent stopped at its token limit; the answer may be cut short",
    "max_turn_requests": "the ACP agent stopped at its limit of model requests for one turn",
}


class UpdateTranslator:
    """One task's translation; :meth:`accept` per update, :meth:`outcome` at the end."""

    def __init__(self, agent: str, task_id: str) -> None:
        self.agent = agent
        self.task_id = task_id
        self._text: list[str] = []
        self._files = 0

    def accept(self, update: dict[str, Any]) -> Update | None:
        kind = update.get("sessionUpdate")
        mark = {"acpUpdate": kind}
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            content = update.get("content") or {}
            if content.get("type") == "text":
                text = str(content.get("text", ""))
                if kind == "agent_message_chunk":
                    self._text.append(text)
                return Status(text, metadata=mark)
            part = acp_block_to_a2a_part(content) if isinstance(content, dict) else None
            if part is None:
                return None
            self._files += 1
            name = str(content.get("name") or content.get("uri") or f"content-{self._files}")
            return PartsArtifact(name, [_part(part)], artifact_id=f"{self.task_id}-{self._files}", metadata=mark)
        if kind in ("tool_call", "tool_call_update"):
            tool = {k: v for k, v in update.items() if k != "sessionUpdate"}
            return Status(data={"toolCall": tool}, metadata=mark)
        if kind == "plan":
            return Status(data={"plan": update.get("entries") or []}, metadata=mark)
        log.debug("ACP agent %s (task %s): %s update skipped", self.agent, self.task_id, kind)
        return None

    def outcome(self, result: Any) -> Reply:
        """The task's end from the ``session/prompt`` result; raises :class:`TaskFailed` when it failed."""
        reason = result.get("stopReason") if isinstance(result, dict) else None
        text = "".join(self._text) or None
        if reason == "end_turn":
            return Reply(text)
        if reason in _NOTES:
            return Reply(text, data={"stopReason": reason, "note": _NOTES[reason]})
        if reason == "refusal":
            raise TaskFailed(f"ACP agent {self.agent!r} refused the prompt" + (f": {text}" if text else ""))
        if reason == "cancelled":
            raise TaskFailed(f"ACP agent {self.agent!r} cancelled the turn on its own")
        raise TaskFailed(f"ACP agent {self.agent!r} ended the turn with an unknown stopReason {reason!r}")


_PART: TypeAdapter[Part] = TypeAdapter(Part)


def _part(value: dict[str, Any]) -> Part:
    return _PART.validate_python(value)
