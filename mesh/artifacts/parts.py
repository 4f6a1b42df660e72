"""FileParts and artifacts: the seed's URI form, inline bytes moved to the store, URIs rewritten.

::

    file_part(info)          # {"kind": "file", "file": {"name", "mimeType", "uri": "artifact://ctx/x?version=2"},
                             #  "metadata": {"size_bytes": 1048576, "version": 2}}
    await offload_inline_files(message_dict, store, context_id=..., owner_user=...)   # big bytes -> URIs
    rewrite_artifact_uris(task_dict, to_url)   # every artifact:// URI through ``to_url``
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
import uuid
from collections.abc import AsyncIterable, Callable
from pathlib import Path
from typing import Any

from mesh.a2a import FilePart, FileWithUri
from mesh.a2a.parts import decoded_size
from mesh.artifacts.errors import InvalidArtifactName
from mesh.artifacts.store import ArtifactInfo, ArtifactStore
from mesh.artifacts.uris import is_artifact_uri, validate_name

__all__ = [
    "file_part",
    "file_part_dict",
    "offload_inline_files",
    "rewrite_artifact_uris",
    "safe_file_name",
    "write_file_atomically",
]


def file_part(info: ArtifactInfo) -> FilePart:
    """The seed's FilePart for a stored version: URI, name, MIME type; size and version in metadata."""
    return FilePart(
        file=FileWithUri(uri=info.uri, name=info.name, mime_type=info.mime_type),
        metadata={"size_bytes": info.size, "version": info.version},
    )


def file_part_dict(info: ArtifactInfo) -> dict[str, Any]:
    """:func:`file_part` as A2A 0.3 wire JSON."""
    return file_part(info).model_dump(mode="json", exclude_none=True)


def safe_file_name(name: object, fallback: str) -> str:
    """``name`` if it is a valid artifact name, else one made of its safe characters, else ``fallback``."""
    if isinstance(name, str):
        try:
            return validate_name(name)
        except InvalidArtifactName:
            cleaned = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in name).lstrip("._")
            if cleaned:
                return cleaned[:200]
    return fallback


async def offload_inline_files(
    message: dict[str, Any],
    store: ArtifactStore,
    *,
    context_id: str,
    owner_user: str | None = None,
    owner_task: str | None = None,
) -> int:
    """Store each inline file of a wire message above the store's threshold and put its URI in
    its place (the message dict is changed); how many were moved. Bad base64 is left for
    validation to refuse."""
    threshold = store.limits.inline_threshold_bytes
    moved = 0
    parts = message.get("parts")
    if not isinstance(parts, list):
        return 0
    for index, part in enumerate(parts):
        file = part.get("file") if isinstance(part, dict) else None
        if not isinstance(file, dict) or not isinstance(file.get("bytes"), str):
            continue
        if decoded_size(file["bytes"]) <= threshold:
            continue
        try:
            content = base64.b64decode(file["bytes"], validate=True)
        except (binascii.Error, ValueError):
            continue
        name = safe_file_name(file.get("name"), f"upload-{index + 1}")
        mime = file.get("mimeType") if isinstance(file.get("mimeType"), str) else None
        info = await store.save(context_id, name, content, mime_type=mime, owner_user=owner_user, owner_task=owner_task)
        part["file"] = {"uri": info.uri, "name": info.name, "mimeType": info.mime_type}
        old = part.get("metadata")
        part["metadata"] = {**(old if isinstance(old, dict) else {}), "size_bytes": info.size, "version": info.version}
        moved += 1
    return moved


def rewrite_artifact_uris(value: Any, to_url: Callable[[str], str | None]) -> Any:
    """``value`` (wire JSON) with each file's ``artifact://`` URI replaced by ``to_url(uri)``
    (left as it is when that returns ``None``); the original ``artifact://`` URI is kept in the
    part's metadata as ``artifactUri``. Returns a new structure only where something changed."""
    if isinstance(value, dict):
        file = value.get("file")
        if isinstance(file, dict) and is_artifact_uri(file.get("uri")):
            url = to_url(file["uri"])
            if url is not None:
                metadata = value.get("metadata")
                metadata = metadata if isinstance(metadata, dict) else {}
                return {**value, "file": {**file, "uri": url}, "metadata": {**metadata, "artifactUri": file["uri"]}}
        changed = {key: rewrite_artifact_uris(item, to_url) for key, item in value.items()}
        return changed if any(changed[k] is not value[k] for k in value) else value
    if isinstance(value, list):
        items = [rewrite_artifact_uris(item, to_url) for item in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


async def write_file_atomically(target: Path, chunks: AsyncIterable[bytes]) -> None:
    """Write ``chunks`` to ``target`` through a temporary file beside it, renamed into place once
    complete: ``target`` is never a partial file, and a failed write leaves nothing behind. The
    blocking file calls run off the event loop."""
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")
    handle = await asyncio.to_thread(tmp.open, "wb")
    try:
        async for chunk in chunks:
            await asyncio.to_thread(handle.write, chunk)
        handle.close()
        await asyncio.to_thread(os.replace, tmp, target)
    finally:
        handle.close()
        tmp.unlink(missing_ok=True)
