"""``mesh send --save-artifacts DIR``: the files of an answer, written to a folder.

A file by ``artifact://`` URI is streamed from the namespace's artifact store (the embedded
store under the state directory, or ``MESH_ARTIFACTS``), an inline one decoded. Each file is
written to a temporary name and renamed, so DIR never holds a partial file; names are the
artifact's (validated: no ``..``, no absolute path), inline names are cleaned.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import os
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from mesh.a2a import FilePart, FileWithBytes, FileWithUri, Message, Part, Task
from mesh.artifacts import ArtifactError, ArtifactRef, ArtifactStore, open_store, resolve_settings
from mesh.artifacts.parts import safe_file_name, write_file_atomically
from mesh.errors import ConfigError

__all__ = ["save_answer_files"]


def _file_parts(result: Task | Message) -> Iterator[FilePart]:
    parts: list[Part] = []
    if isinstance(result, Message):
        parts = list(result.parts)
    else:
        for artifact in result.artifacts or []:
            parts.extend(artifact.parts)
        if result.status.message is not None:
            parts.extend(result.status.message.parts)
    for part in parts:
        if isinstance(part, FilePart):
            yield part


async def save_answer_files(result: Task | Message, directory: Path, namespace: str) -> list[Path]:
    """Write every file of the answer under ``directory``; the paths written, each said on stderr."""
    try:
        await asyncio.to_thread(directory.mkdir, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"--save-artifacts {directory}: {exc}; give a folder you can write to") from exc
    store: ArtifactStore | None = None
    written: list[Path] = []
    try:
        for index, part in enumerate(_file_parts(result), start=1):
            file = part.file
            if isinstance(file, FileWithUri):
                try:
                    ref = ArtifactRef.parse(file.uri)
                except ArtifactError:
                    print(f"mesh: skipped {file.uri[:80]!r}: not an artifact of the mesh", file=sys.stderr)
                    continue
                store = store or open_store(resolve_settings(None), namespace)
                path = await _save_artifact(store, ref, directory)
            else:
                path = await _save_inline(file, directory, index)
            written.append(path)
            print(f"saved {path} ({path.stat().st_size} bytes)", file=sys.stderr, flush=True)
    finally:
        if store is not None:
            await store.close()
    return written


async def _save_artifact(store: ArtifactStore, ref: ArtifactRef, directory: Path) -> Path:
    try:
        info = await store.info(ref)
    except ArtifactError as exc:
        raise ConfigError(f"cannot save {ref.uri}: {exc}; set MESH_ARTIFACTS to the mesh's artifact store") from exc
    target = directory / info.name  # a validated name: relative, no '..'
    await asyncio.to_thread(target.parent.mkdir, parents=True, exist_ok=True)
    await write_file_atomically(target, store.open(info))
    return target


async def _save_inline(file: FileWithBytes, directory: Path, index: int) -> Path:
    try:
        content = base64.b64decode(file.bytes, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConfigError(f"file part {index} of the answer is not valid base64: {exc}") from exc
    target = directory / safe_file_name(file.name.rpartition("/")[2] if file.name else None, f"file-{index}.bin")
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.part")
    await asyncio.to_thread(tmp.write_bytes, content)
    await asyncio.to_thread(os.replace, tmp, target)
    return target
