"""One tool call's answer: the E2A frames of a mesh task -> MCP progress and one ``CallToolResult``.

What becomes what:

- a ``working`` status with text, in progress: one progress notification (its text the message,
  ``progress`` counting 1, 2, 3, ...); an artifact chunk: one too (``<name>: <its text>``);
- the final task ``completed``: its status text as text content, its data parts as
  ``structured_content`` (one data part: its object; several: ``{"data": [...]}``), its
  artifacts as embedded text resources (text parts), embedded blobs (inline files) or resource
  links (files by URI);
- ``input-required``: the question, and the ``task_id`` to send the answer with (text and
  ``structured_content``), not an error: the conversation goes on;
- ``failed`` / ``rejected`` / ``canceled``, or an ``e2a.error`` frame (agent gone, timeout, a
  refused request): ``is_error`` with the reason.

Every result carries the task's ids in ``_meta`` (``mesh/taskId``, ``mesh/contextId``,
``mesh/state``) so a client can follow the task with other tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types

from mesh.e2a import E2AResponse

__all__ = ["TaskAnswer"]

Content = types.TextContent | types.EmbeddedResource | types.ResourceLink
_ERROR_STATES = {"failed", "rejected", "canceled", "unknown"}
MAX_PROGRESS_MESSAGE = 1000  # a progress line is a status line, not a transcript


@dataclass(slots=True)
class TaskAnswer:
    """Reads one call's frames in order: :meth:`progress` for each, :meth:`result` for the last."""

    agent: str
    task_id: str | None = None
    context_id: str | None = None
    state: str | None = None
    steps: int = 0
    _artifacts: dict[str, dict[str, Any]] = field(default_factory=dict)  # artifact id -> artifact, chunks merged

    def progress(self, frame: E2AResponse) -> str | None:
        """The progress message of an in-progress frame (``None``: nothing to tell)."""
        payload = frame.body.get("payload") if frame.response_kind == "a2a.stream_event" else None
        if not isinstance(payload, Mapping):
            return None
        self._ids(payload)
        kind = payload.get("kind")
        if kind == "status-update":
            status = payload.get("status") or {}
            self.state = _text(status.get("state")) or self.state
            text = _joined(_parts(status.get("message") or {}), "text")
            if not text or self.state != "working":
                return None
            return self._step(text)
        if kind == "artifact-update":
            artifact = payload.get("artifact") or {}
            self._merge(artifact, append=bool(payload.get("append")))
            name = artifact.get("name") or artifact.get("artifactId") or "artifact"
            text = _joined(_parts(artifact), "text")
            return self._step(f"{name}: {text}" if text else f"{name} (artifact)")
        return None

    def approvals(self, frame: E2AResponse) -> list[dict[str, Any]]:
        """An LLM agent's tool calls the final frame's task waits to have approved (empty: none)."""
        answer = frame.body.get("result") if frame.response_kind == "e2a.complete" else frame.body
        if not isinstance(answer, Mapping) or answer.get("kind") == "message":
            return []
        status = answer.get("status") or {}
        if status.get("state") != "input-required":
            return []
        self._ids(answer)
        parts = _parts(status.get("message") or {})
        return [
            p["data"] for p in parts if p.get("kind") == "data" and (p.get("data") or {}).get("type") == "tool_approval"
        ]

    def result(self, frame: E2AResponse) -> types.CallToolResult:
        """The tool's result from the final frame."""
        if frame.response_kind == "e2a.error":
            return self._error(str(frame.body.get("message") or "the call failed"), frame.body.get("details"))
        answer = frame.body.get("result") if frame.response_kind == "e2a.complete" else frame.body
        if not isinstance(answer, Mapping):
            return self._ok([], None)
        if answer.get("kind") == "message":
            self.context_id = _text(answer.get("contextId")) or self.context_id
            parts = _parts(answer)
            return self._ok(_text_blocks(parts), _structured(parts))
        self._ids(answer)
        status = answer.get("status") or {}
        self.state = _text(status.get("state")) or self.state or "unknown"
        parts = _parts(status.get("message") or {})
        if self.state in _ERROR_STATES:
            reason = _joined(parts, "text") or f"the task ended {self.state}"
            return self._error(f"agent {self.agent!r}: task {self.state}: {reason}", None)
        for artifact in answer.get("artifacts") or []:
            if isinstance(artifact, Mapping):
                self._artifacts[str(artifact.get("artifactId") or len(self._artifacts))] = dict(artifact)
        if self.state == "input-required":
            asked = [
                p["data"]
                for p in parts
                if p.get("kind") == "data" and (p.get("data") or {}).get("type") == "tool_approval"
            ]
            calls = ", ".join(f"{a.get('function_name')}({a.get('arguments')})" for a in asked)
            approval = f"The agent waits for the approval of: {calls}. Answer yes or no." if asked else ""
            question = _joined(parts, "text") or approval or "The agent needs more input."
            hint = f"To answer, call this tool again with task_id {self.task_id!r} and the answer as message."
            structured = {"state": "input-required", "task_id": self.task_id, "context_id": self.context_id}
            structured["question"] = question
            return self._ok([types.TextContent(text=f"{question}\n\n{hint}")], structured)
        data = _structured(parts)
        content: list[Content] = [*_text_blocks(parts), *self._artifact_blocks()]
        if not content and data is None:
            content = [types.TextContent(text=f"(agent {self.agent!r} finished the task without a reply)")]
        return self._ok(content, data)

    # ------------------------------------------------------------------ internals

    def _step(self, message: str) -> str:
        self.steps += 1
        return message[:MAX_PROGRESS_MESSAGE]

    def _ids(self, payload: Mapping[str, Any]) -> None:
        key = "id" if payload.get("kind") == "task" else "taskId"
        self.task_id = self.task_id or _text(payload.get(key))
        self.context_id = self.context_id or _text(payload.get("contextId"))

    def _merge(self, artifact: Mapping[str, Any], *, append: bool) -> None:
        key = str(artifact.get("artifactId") or len(self._artifacts))
        known = self._artifacts.get(key)
        if append and known is not None:
            known["parts"] = [*(known.get("parts") or []), *_parts(artifact)]
        else:
            self._artifacts[key] = {**artifact, "parts": _parts(artifact)}

    def _artifact_blocks(self) -> list[Content]:
        blocks: list[Content] = []
        for key, artifact in self._artifacts.items():
            uri = f"mesh://{self.agent}/tasks/{self.task_id or '-'}/artifacts/{key}"
            name = str(artifact.get("name") or key)
            text = _joined(_parts(artifact), "text", sep="")
            if text:
                contents = types.TextResourceContents(uri=uri, mime_type="text/plain", text=text)
                blocks.append(types.EmbeddedResource(resource=contents))
            for part in _parts(artifact):
                if part.get("kind") == "file" and isinstance(part.get("file"), Mapping):
                    blocks.append(_file_block(part["file"], uri, name))
        return blocks

    def _meta(self) -> dict[str, Any]:
        meta = {"mesh/agent": self.agent, "mesh/taskId": self.task_id, "mesh/contextId": self.context_id}
        meta["mesh/state"] = self.state
        return {k: v for k, v in meta.items() if v is not None}

    def _ok(self, content: list[Content], structured: Any) -> types.CallToolResult:
        return types.CallToolResult(content=list(content), structured_content=structured, meta=self._meta())

    def _error(self, message: str, details: Any) -> types.CallToolResult:
        reason = details.get("errorType") if isinstance(details, Mapping) else None
        text = f"{message} ({reason})" if isinstance(reason, str) and reason not in message else message
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=True, meta=self._meta())


def _file_block(file: Mapping[str, Any], uri: str, name: str) -> Content:
    mime = _text(file.get("mimeType")) or "application/octet-stream"
    title = _text(file.get("name")) or name
    if isinstance(file.get("uri"), str):
        return types.ResourceLink(name=title, uri=str(file["uri"]), mime_type=mime)
    blob = types.BlobResourceContents(uri=f"{uri}/{title}", mime_type=mime, blob=str(file.get("bytes") or ""))
    return types.EmbeddedResource(resource=blob)


def _text_blocks(parts: list[dict[str, Any]]) -> list[Content]:
    return [types.TextContent(text=str(p.get("text"))) for p in parts if p.get("kind") == "text" and p.get("text")]


def _structured(parts: list[dict[str, Any]]) -> Any:
    data = [p.get("data") for p in parts if p.get("kind") == "data"]
    if not data:
        return None
    return data[0] if len(data) == 1 and isinstance(data[0], dict) else {"data": data}


def _joined(parts: list[dict[str, Any]], kind: str, *, sep: str = " ") -> str:
    return sep.join(str(p.get("text") or "") for p in parts if p.get("kind") == kind).strip()


def _parts(holder: Any) -> list[dict[str, Any]]:
    parts = holder.get("parts") if isinstance(holder, Mapping) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
