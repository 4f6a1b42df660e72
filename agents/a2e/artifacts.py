"""Artifacts for A2E workers: the worker asks the mesh to save or load one (an extension of A2E
1.0, as ``skill/cancel``; documented in docs/artifacts.md).

Worker -> mesh, during a ``skill/call`` (``call_id`` is that call's ``id``)::

    {"type": "artifact/save/req", "id": "...", "call_id": "<skill call id>", "name": "report.pdf",
     "mime": "application/pdf", "path": "/tmp/report.pdf"}            # or "data": "<base64>"
    {"type": "artifact/load/req", "id": "...", "call_id": "...", "uri": "artifact://ctx/report.pdf?version=1",
     "path": "/tmp/in.pdf"}                                            # without path: base64 "data"

Mesh -> worker, ``req_id`` = the request's ``id``::

    {"type": "artifact/save/resp", "req_id": "...", "uri": "artifact://...?version=1", "artifact_version": 1,
     "size": 1048576}
    {"type": "artifact/load/resp", "req_id": "...", "uri": "...", "mime": "...", "size": 1048576, "path": "/tmp/in.pdf"}
    {"type": "artifact/save/resp", "req_id": "...", "error": {"code": "artifact_error", "message": "..."}}

A save by ``path`` is read in chunks (never whole), stored for the call's task, and announced
as the task's artifact-update, exactly as ``ctx.save_artifact``; a load by ``path`` is written
there (temporary name, then rename). ``data`` is for small files: a load answers it only up
to :data:`MAX_INLINE_LOAD_BYTES`. The worker runs as the agent's own user, so the paths it names
are files it could read and write itself.
"""

from __future__ import annotations

import base64
import binascii
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from agents.a2e.messages import A2EMessage
from mesh.artifacts import ArtifactError, ArtifactRef
from mesh.artifacts.parts import write_file_atomically
from mesh.background import BackgroundTasks

if TYPE_CHECKING:
    from agents.a2e.process import WorkerProcess
    from agents.context import TaskContext

__all__ = [
    "ARTIFACT_TYPE_MAP",
    "MAX_INLINE_LOAD_BYTES",
    "ArtifactLoadRequest",
    "ArtifactLoadResponse",
    "ArtifactRequests",
    "ArtifactSaveRequest",
    "ArtifactSaveResponse",
]

log = logging.getLogger(__name__)

#: A load answered inline (base64 in the line) at most this large; larger ones need ``path``.
MAX_INLINE_LOAD_BYTES = 512 * 1024


class ArtifactSaveRequest(A2EMessage):
    TYPE = "artifact/save/req"

    call_id: str
    name: str
    mime: str | None = None
    path: str | None = None
    data: str | None = None


class ArtifactLoadRequest(A2EMessage):
    TYPE = "artifact/load/req"

    call_id: str
    uri: str
    path: str | None = None


class ArtifactSaveResponse(A2EMessage):
    TYPE = "artifact/save/resp"

    req_id: str
    uri: str | None = None
    artifact_version: int | None = None
    size: int | None = None
    error: dict[str, Any] | None = None


class ArtifactLoadResponse(A2EMessage):
    TYPE = "artifact/load/resp"

    req_id: str
    uri: str | None = None
    mime: str | None = None
    size: int | None = None
    artifact_version: int | None = None
    path: str | None = None
    data: str | None = None
    error: dict[str, Any] | None = Field(default=None)


ARTIFACT_TYPE_MAP = {
    m.TYPE: m for m in (ArtifactSaveRequest, ArtifactLoadRequest, ArtifactSaveResponse, ArtifactLoadResponse)
}
REQUEST_TYPES = frozenset((ArtifactSaveRequest.TYPE, ArtifactLoadRequest.TYPE))


class ArtifactRequests:
    """Answers a worker's artifact requests with the task context of the call they name."""

    def __init__(self, worker: str) -> None:
        self.worker = worker
        #: The task context of each skill call in flight, by the call's request id.
        self.contexts: dict[str, TaskContext] = {}
        self._answering = BackgroundTasks(log, f"worker {worker}'s artifact calls")

    def handle(self, process: WorkerProcess, message: A2EMessage) -> None:
        """Answer ``message`` in the background (called from the process's reader)."""
        self._answering.spawn(self._answer(process, message), name="artifact call")

    async def _answer(self, process: WorkerProcess, message: A2EMessage) -> None:
        reply: A2EMessage
        try:
            if isinstance(message, ArtifactSaveRequest):
                reply = await self._save(message)
            elif isinstance(message, ArtifactLoadRequest):
                reply = await self._load(message)
            else:
                return
        except (ArtifactError, OSError, ValueError) as exc:
            error = {"code": "artifact_error", "message": str(exc)}
            model = ArtifactSaveResponse if isinstance(message, ArtifactSaveRequest) else ArtifactLoadResponse
            reply = model(req_id=message.id, error=error)
        await process.answer(reply)

    def _context(self, call_id: str) -> TaskContext:
        ctx = self.contexts.get(call_id)
        if ctx is None:
            raise ValueError(f"call_id {call_id[:64]!r} names no skill call in flight; send the skill/call/req's id")
        return ctx

    async def _save(self, request: ArtifactSaveRequest) -> ArtifactSaveResponse:
        ctx = self._context(request.call_id)
        if (request.path is None) == (request.data is None):
            raise ValueError("artifact/save/req needs exactly one of 'path' (a file) or 'data' (base64)")
        if request.path is not None:
            source: Path | bytes = Path(request.path)
        else:
            try:
                source = base64.b64decode(request.data or "", validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ValueError(f"'data' is not base64: {exc}") from exc
        uri = await ctx.save_artifact(request.name, source, request.mime)
        info = await ctx.artifact_info(uri)
        return ArtifactSaveResponse(req_id=request.id, uri=uri, artifact_version=info.version, size=info.size)

    async def _load(self, request: ArtifactLoadRequest) -> ArtifactLoadResponse:
        ctx = self._context(request.call_id)
        info = await ctx.artifact_info(ArtifactRef.parse(request.uri).uri)
        answer = ArtifactLoadResponse(
            req_id=request.id, uri=info.uri, mime=info.mime_type, size=info.size, artifact_version=info.version
        )
        if request.path is None:
            if info.size > MAX_INLINE_LOAD_BYTES:
                raise ValueError(
                    f"{info.uri} is {info.size} bytes, over {MAX_INLINE_LOAD_BYTES} inline; "
                    "give a 'path' to write it to"
                )
            answer.data = base64.b64encode(await ctx.load_artifact(info.uri)).decode("ascii")
            return answer
        target = Path(request.path)
        await write_file_atomically(target, ctx.open_artifact(info))
        answer.path = str(target)
        return answer
