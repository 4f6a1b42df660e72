"""A chat turn's answer, streamed to the page and written down as it goes
(:mod:`gateways.http.chat`): the bindings through which the chat's calls take the gateway's
A2A path, text chunks merged, each artifact recorded once, download links kept unsigned.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import anyio
from starlette.responses import JSONResponse, Response

from gateways.chat.store import Conversations
from gateways.http.rpc import RpcCall, error_of, result_of
from mesh.a2a import RpcError
from mesh.artifacts import ArtifactRef
from mesh.e2a import E2AResponse

__all__ = ["CANCEL_BINDING", "SAVE_EVERY_S", "CancelBinding", "ChatBinding", "chat_problem", "download_path"]

SAVE_EVERY_S = 1.0  # a running answer is written down at least this often


def chat_problem(message: str, status: int = 400) -> JSONResponse:
    """A chat API refusal: ``{"error": message}`` with ``status``."""
    return JSONResponse({"error": message}, status_code=status)


def download_path(uri: str) -> str:
    """The gateway's download path of an ``artifact://`` URI (relative: the page's own origin)."""
    ref = ArtifactRef.parse(uri)
    query = f"?version={ref.version}" if ref.version is not None else ""
    return f"/a2a/artifacts/{quote(ref.context_id)}/{quote(ref.name)}{query}"


def _unsigned(value: Any) -> Any:
    """Wire JSON with every gateway download link as a bare path (no signature: the owner's
    session opens it, nobody else's), in place of the signed absolute link."""
    if isinstance(value, dict):
        file = value.get("file")
        if isinstance(file, dict) and isinstance(file.get("uri"), str) and "/a2a/artifacts/" in file["uri"]:
            url = urlsplit(file["uri"])
            kept = [(k, v) for k, v in parse_qsl(url.query) if k == "version"]
            value = {**value, "file": {**file, "uri": url.path + (f"?{urlencode(kept)}" if kept else "")}}
        return {k: _unsigned(v) if isinstance(v, dict | list) else v for k, v in value.items()}
    if isinstance(value, list):
        return [_unsigned(v) for v in value]
    return value


def _is_text_chunk(item: Any) -> bool:
    if not isinstance(item, dict) or item.get("kind") != "status-update":
        return False
    message = (item.get("status") or {}).get("message") or {}
    return (message.get("metadata") or {}).get("llmEvent") == "text"


def _artifact_event_at(events: list[Any], artifact_id: str) -> int | None:
    for index, event in enumerate(events):
        artifact = event.get("artifact") if isinstance(event, dict) and event.get("kind") == "artifact-update" else None
        if isinstance(artifact, dict) and artifact.get("artifactId") == artifact_id:
            return index
    return None


def _record_artifact(events: list[Any], item: Any) -> bool:
    """Keep each artifact once in a turn: a streamed chunk goes into the artifact's one
    ``artifact-update`` (A2A's ``append`` adds its parts, else it replaces them, ``lastChunk``
    is the latest); a Task's whole artifact replaces that event's and leaves the stored Task
    (those it streamed). True when ``item`` was merged in (nothing to append)."""
    if not isinstance(item, dict):
        return False
    kind = item.get("kind")
    if kind == "artifact-update":
        artifact = item.get("artifact")
        artifact_id = artifact.get("artifactId") if isinstance(artifact, dict) else None
        at = _artifact_event_at(events, artifact_id) if isinstance(artifact_id, str) else None
        if at is None or not isinstance(artifact, dict):
            return False
        stored = events[at]
        if item.get("append") is True:  # new dicts and lists: what was sent stays as it was
            parts = [*stored["artifact"].get("parts", []), *artifact.get("parts", [])]
            artifact = {**stored["artifact"], "parts": parts}
        events[at] = {**stored, "artifact": artifact, "lastChunk": item.get("lastChunk")}
        return True
    if kind == "task" and isinstance(item.get("artifacts"), list):
        kept = []
        for artifact in item["artifacts"]:
            artifact_id = artifact.get("artifactId") if isinstance(artifact, dict) else None
            at = _artifact_event_at(events, artifact_id) if isinstance(artifact_id, str) else None
            if at is None:
                kept.append(artifact)
            else:
                events[at] = {**events[at], "artifact": artifact, "lastChunk": True}
        if len(kept) < len(item["artifacts"]):
            events.append({**item, "artifacts": kept})
            return True
    return False


def _sse(name: str, data: Any) -> bytes:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False, separators=(',', ':'))}\n\n".encode()


class ChatBinding:
    """Serves the chat's SSE and writes the answer down as it comes (a :class:`Binding`)."""

    errors_in_stream = False

    def __init__(self, store: Conversations, conversation: str, seq: int, events: list[Any]) -> None:
        self.store = store
        self.conversation = conversation
        self.seq = seq
        self.events = events
        self.task_id: str | None = None
        self.state: str | None = None
        self.failure: str | None = None
        self._dirty = asyncio.Event()
        self._done = False
        self._writer: asyncio.Task[None] | None = None

    def _changed(self) -> None:
        """Write the turn down soon, off the stream's path: the next event goes out meanwhile."""
        self._dirty.set()
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._write())

    async def _write(self) -> None:
        while not self._done:
            await self._dirty.wait()
            self._dirty.clear()
            await self.save()

    async def _finish(self) -> None:
        """The last write, after any the writer has under way (so the last state wins)."""
        if self._done:
            return
        self._done = True
        if self._writer is not None:
            self._dirty.set()
            await self._writer
        await self.save()

    async def save(self, state: str | None = None) -> None:
        if state is not None:
            self.state = state
        body: dict[str, Any] = {"events": self.events}
        if self.failure is not None:
            body["error"] = self.failure
        await self.store.update_turn(self.conversation, self.seq, body, task_id=self.task_id, state=self.state)

    def _record(self, item: Any) -> None:
        if isinstance(item, dict):
            self.task_id = (
                item.get("taskId") or (item.get("id") if item.get("kind") == "task" else None) or self.task_id
            )
            status = item.get("status")
            if isinstance(status, dict) and isinstance(status.get("state"), str):
                self.state = status["state"]
            elif item.get("kind") == "message":
                self.state = "completed"
        if _record_artifact(self.events, item):
            return
        if _is_text_chunk(item) and self.events and _is_text_chunk(self.events[-1]):
            last = self.events[-1]
            merged = json.loads(json.dumps(last))  # a copy: the stored one changes, not the sent one
            parts = merged["status"]["message"]["parts"]
            new_text = "".join(p.get("text", "") for p in item["status"]["message"].get("parts", []))
            parts[:] = [{"kind": "text", "text": "".join(p.get("text", "") for p in parts) + new_text}]
            self.events[-1] = merged
        else:
            self.events.append(item)

    def result(self, call: RpcCall, result: Any) -> Response:  # pragma: no cover - no local methods here
        return JSONResponse(result)

    def error(self, version: str, call: RpcCall | None, error: RpcError) -> Response:
        self.failure = error.error.message
        status = 404 if error.code in (-32001, -32000) else 409 if error.code == -32002 else 400
        return chat_problem(error.error.message, status)

    def unary(self, call: RpcCall, frame: E2AResponse) -> Response:  # pragma: no cover - streams only
        return JSONResponse(result_of(frame))

    def stream(self, call: RpcCall, frames: AsyncIterator[E2AResponse]) -> AsyncIterator[bytes]:
        return self._stream(frames)

    async def _stream(self, frames: AsyncIterator[E2AResponse]) -> AsyncIterator[bytes]:
        saved_at = time.monotonic()
        try:
            async for frame in frames:
                if frame.response_kind == "e2a.error":
                    error = error_of(frame)
                    self.failure = error.error.message
                    self.state = "failed"
                    await self._finish()
                    yield _sse("error", {"message": error.error.message})
                    return
                item = frame.body["payload"] if frame.response_kind == "a2a.stream_event" else result_of(frame)
                item = _unsigned(item)
                yield _sse("item", item)  # first out, then written down
                self._record(item)
                if not _is_text_chunk(item) or time.monotonic() - saved_at > SAVE_EVERY_S:
                    self._changed()
                    saved_at = time.monotonic()
                if frame.is_final:
                    break
            await self._finish()  # written down before the page hears the end
            yield _sse("end", {"state": self.state})
        finally:
            with anyio.CancelScope(shield=True):  # the page left (its request canceled): keep what came
                await self._finish()
            await frames.aclose()  # type: ignore[attr-defined]


class CancelBinding:
    """``tasks/cancel``'s answer as plain JSON."""

    errors_in_stream = False

    def result(self, call: RpcCall, result: Any) -> Response:  # pragma: no cover
        return JSONResponse(result)

    def error(self, version: str, call: RpcCall | None, error: RpcError) -> Response:
        return chat_problem(error.error.message, 409 if error.code == -32002 else 404 if error.code == -32001 else 400)

    def unary(self, call: RpcCall, frame: E2AResponse) -> Response:
        if frame.response_kind == "e2a.error":
            return self.error("0.3", call, error_of(frame))
        return JSONResponse({"task": _unsigned(result_of(frame))})

    def stream(self, call: RpcCall, frames: AsyncIterator[E2AResponse]) -> AsyncIterator[bytes]:  # pragma: no cover
        raise TypeError("tasks/cancel does not stream")


CANCEL_BINDING = CancelBinding()
