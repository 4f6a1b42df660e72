"""Artifact tools as plain async functions, for LLM agents to wrap as tools.

Each takes the store and the task's ids and returns JSON-ready dicts, never raises for a bad
name or URI (the error text goes back to the model, which can correct itself)::

    await list_artifacts(store, context_id)                       # [{"uri", "name", "version", ...}]
    await load_artifact(store, "artifact://ctx/notes.md")          # {"uri", "mimeType", "text" | "base64"}
    await save_artifact(store, context_id, "notes.md", "# Notes", owner_task=..., owner_user=...)

An agent's :class:`~agents.context.TaskContext` has ``save_artifact``/``load_artifact`` that
also emit the artifact-update event; an LLM toolset should call those when it has a context.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from mesh.artifacts.errors import ArtifactError, ArtifactNotFound
from mesh.artifacts.store import ArtifactInfo, ArtifactStore
from mesh.artifacts.uris import ArtifactRef

__all__ = ["MAX_TOOL_LOAD_BYTES", "list_artifacts", "load_artifact", "save_artifact"]

#: What a tool hands a model at most: larger artifacts are cut (the answer says so).
MAX_TOOL_LOAD_BYTES = 256_000
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/yaml", "application/x-yaml")


Visible = Callable[[ArtifactInfo], bool]


async def list_artifacts(
    store: ArtifactStore, context_id: str, *, visible: Visible | None = None
) -> list[dict[str, Any]]:
    """The latest version of each artifact of the context (of those ``visible`` lets through)."""
    try:
        latest: dict[str, dict[str, Any]] = {}
        for info in await store.list(context_id):
            if visible is None or visible(info):
                latest[info.name] = {k: v for k, v in info.to_dict().items() if k in _LISTED}
        return list(latest.values())
    except ArtifactError as exc:
        return [{"error": str(exc)}]


_LISTED = ("uri", "name", "version", "mimeType", "size", "created")


async def load_artifact(
    store: ArtifactStore, uri: str, *, max_bytes: int = MAX_TOOL_LOAD_BYTES, visible: Visible | None = None
) -> dict[str, Any]:
    """An artifact's content: ``text`` for text types, else ``base64``; at most ``max_bytes``.
    One ``visible`` refuses is answered as unknown (its existence is not told)."""
    try:
        ref = ArtifactRef.parse(uri)
        info = await store.info(ref)
        if visible is not None and not visible(info):
            raise ArtifactNotFound(f"no artifact {ref.uri}")
        content = b"".join([chunk async for chunk in store.open(info, 0, max_bytes)])
    except ArtifactNotFound as exc:
        if visible is not None:  # the same answer whether it does not exist or may not be seen
            return {"error": f"no artifact {ref.uri} here; list_artifacts shows the ones you can load"}
        return {"error": str(exc)}
    except ArtifactError as exc:
        return {"error": str(exc)}
    answer: dict[str, Any] = {"uri": info.uri, "name": info.name, "mimeType": info.mime_type, "size": info.size}
    if info.size > max_bytes:
        answer["truncated"] = f"only the first {max_bytes} of {info.size} bytes"
    if info.mime_type.startswith(_TEXT_TYPES):
        answer["text"] = content.decode("utf-8", "replace")
    else:
        answer["base64"] = base64.b64encode(content).decode("ascii")
    return answer


async def save_artifact(
    store: ArtifactStore,
    context_id: str,
    name: str,
    content: str | bytes,
    *,
    mime_type: str | None = None,
    owner_task: str | None = None,
    owner_user: str | None = None,
) -> dict[str, Any]:
    """Store ``content`` (text is UTF-8) as the next version of ``name``; its URI and version."""
    data = content.encode("utf-8") if isinstance(content, str) else content
    if mime_type is None and isinstance(content, str):
        mime_type = "text/plain"
    try:
        info = await store.save(
            context_id, name, data, mime_type=mime_type, owner_task=owner_task, owner_user=owner_user
        )
    except ArtifactError as exc:
        return {"error": str(exc)}
    return {"uri": info.uri, "name": info.name, "version": info.version, "size": info.size}
