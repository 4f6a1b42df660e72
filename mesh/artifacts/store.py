"""The artifact store interface, the record of one stored version, and what a save reads from.

A store holds the artifacts of one namespace. Every backend implements :class:`ArtifactStore`
(the embedded :class:`~mesh.artifacts.filestore.FileStore`, object storage in
:class:`~mesh.artifacts.objectstore.ObjectStore`), and the same contract tests run on each::

    info = await store.save("ctx-1", "report.pdf", Path("report.pdf"), mime_type="application/pdf")
    info.uri                                     # 'artifact://ctx-1/report.pdf?version=1'
    async for chunk in store.open(info, start=0, end=1024):   # end exclusive
        ...

A save reads its source (bytes, a file path or an async iterator of bytes) in chunks, never
whole; it counts the bytes against the limits as they come and stores nothing when refused.
"""

from __future__ import annotations

import asyncio
import builtins
import hashlib
import os
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

from mesh.artifacts.errors import ArtifactStoreFull, ArtifactTooLarge
from mesh.artifacts.uris import ArtifactRef

__all__ = [
    "CHUNK_BYTES",
    "ArtifactInfo",
    "ArtifactLimits",
    "ArtifactStore",
    "Meter",
    "Source",
    "purge_due",
    "read_all",
    "source_chunks",
]

#: Reads and writes go in pieces of this size: large enough for disk and network speed,
#: small enough that a store holds little in memory.
CHUNK_BYTES = 1 << 20

Source = bytes | bytearray | memoryview | Path | AsyncIterable[bytes]


class ArtifactLimits(BaseModel):
    """Bounds of a namespace's store; the ``artifacts.limits`` keys of a config file."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_artifact_bytes: int = Field(1 << 30, gt=0, description="one artifact version (default 1 GiB)")
    max_namespace_bytes: int = Field(20 << 30, gt=0, description="all versions in the namespace (default 20 GiB)")
    retention_days: float = Field(30.0, gt=0, description="versions older than this are deleted")
    inline_threshold_bytes: int = Field(
        1_000_000, ge=0, description="inline files larger than this travel as artifact URIs (the seed's 1 MB)"
    )


@dataclass(frozen=True, slots=True)
class ArtifactInfo:
    """One stored version of an artifact."""

    context_id: str
    name: str
    version: int
    mime_type: str
    size: int
    sha256: str
    created: float
    owner_task: str | None = None
    owner_user: str | None = None

    @property
    def ref(self) -> ArtifactRef:
        return ArtifactRef(self.context_id, self.name, self.version)

    @property
    def uri(self) -> str:
        return self.ref.uri

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (tools, listings, the object store's metadata)."""
        return {
            "uri": self.uri,
            "contextId": self.context_id,
            "name": self.name,
            "version": self.version,
            "mimeType": self.mime_type,
            "size": self.size,
            "sha256": self.sha256,
            "created": self.created,
            "ownerTask": self.owner_task,
            "ownerUser": self.owner_user,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ArtifactInfo:
        return cls(
            context_id=str(data["contextId"]),
            name=str(data["name"]),
            version=int(data["version"]),
            mime_type=str(data["mimeType"]),
            size=int(data["size"]),
            sha256=str(data["sha256"]),
            created=float(data["created"]),
            owner_task=data.get("ownerTask"),
            owner_user=data.get("ownerUser"),
        )


class ArtifactStore(Protocol):
    """Where one namespace's artifacts live: versions, metadata, streamed reads and writes."""

    namespace: str
    limits: ArtifactLimits

    async def save(
        self,
        context_id: str,
        name: str,
        source: Source,
        *,
        mime_type: str | None = None,
        owner_task: str | None = None,
        owner_user: str | None = None,
    ) -> ArtifactInfo:
        """Store ``source`` as the next version of ``name``; nothing is stored if it fails."""
        ...

    async def info(self, ref: ArtifactRef) -> ArtifactInfo:
        """The version ``ref`` names (the latest without one); :class:`ArtifactNotFound` if none."""
        ...

    def open(self, info: ArtifactInfo, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        """The bytes ``start`` up to ``end`` (exclusive; the end of the file if ``None``), in chunks."""
        ...

    async def list(self, context_id: str | None = None) -> builtins.list[ArtifactInfo]:
        """Every stored version (of one context, or all), by context, name and version."""
        ...

    async def delete(self, ref: ArtifactRef) -> int:
        """Delete one version (all versions without one); how many were deleted."""
        ...

    async def purge(self, older_than: float | None = None) -> int:
        """Delete versions created before ``older_than`` (epoch seconds; default: past the retention)."""
        ...

    async def delete_owned(self, owners: Iterable[tuple[str, str]]) -> int:
        """Delete the versions saved by each ``(context id, task id)`` of ``owners`` (tasks past
        their retention); how many were deleted."""
        ...

    async def usage(self) -> int:
        """Bytes of all stored versions in the namespace."""
        ...

    async def close(self) -> None: ...


async def read_all(store: ArtifactStore, ref: ArtifactRef) -> bytes:
    """An artifact's bytes, whole: for small ones; stream large ones with ``store.open``."""
    info = await store.info(ref)
    return b"".join([chunk async for chunk in store.open(info)])


def guess_mime_type(name: str, given: str | None) -> str:
    if given:
        return given
    import mimetypes

    return mimetypes.guess_type(name)[0] or "application/octet-stream"


class Meter:
    """Counts and hashes a save's bytes as they pass, refusing past the limits at once."""

    def __init__(self, limits: ArtifactLimits, used: int, namespace: str) -> None:
        self.limits = limits
        self.used = used
        self.namespace = namespace
        self.size = 0
        self.digest = hashlib.sha256()

    def add(self, chunk: bytes | memoryview) -> None:
        self.size += len(chunk)
        self.check(self.size)
        self.digest.update(chunk)

    def check(self, size: int) -> None:
        limits = self.limits
        if size > limits.max_artifact_bytes:
            raise ArtifactTooLarge(
                f"the artifact is over {limits.max_artifact_bytes} bytes (artifacts.limits.max_artifact_bytes); "
                "store a smaller file or raise the limit",
                limit=limits.max_artifact_bytes,
            )
        if self.used + size > limits.max_namespace_bytes:
            raise ArtifactStoreFull(
                f"the artifact store of namespace {self.namespace!r} is full: {self.used} bytes stored, "
                f"{size} more would pass artifacts.limits.max_namespace_bytes={limits.max_namespace_bytes}; "
                "delete old artifacts or raise the limit",
                limit=limits.max_namespace_bytes,
            )


async def source_chunks(source: Source, chunk_bytes: int = CHUNK_BYTES) -> AsyncIterator[bytes | memoryview]:
    """The bytes of a save's source in pieces (a file is read off the event loop)."""
    if isinstance(source, bytes | bytearray | memoryview):
        view = memoryview(source)
        for start in range(0, len(view), chunk_bytes):
            yield view[start : start + chunk_bytes]
    elif isinstance(source, os.PathLike):
        handle = await asyncio.to_thread(open, source, "rb")
        try:
            while chunk := await asyncio.to_thread(handle.read, chunk_bytes):
                yield chunk
        finally:
            handle.close()
    else:
        async for chunk in source:
            if not isinstance(chunk, bytes | bytearray | memoryview):
                raise TypeError(f"an artifact's async iterator yielded {type(chunk).__name__}; yield bytes")
            yield chunk


def retention_horizon(limits: ArtifactLimits) -> float:
    return time.time() - limits.retention_days * 86400


#: How often a store deletes what is past its retention, on the next save.
PURGE_EVERY_S = 3600.0


def purge_due(purged_at: float) -> bool:
    """Whether a store that last purged at ``purged_at`` (monotonic; 0: never) should purge now."""
    return not purged_at or time.monotonic() - purged_at > PURGE_EVERY_S
