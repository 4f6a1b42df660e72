"""The embedded artifact store: files in a folder, what describes them in a catalog.

Layout of one namespace (``<base>`` is ``<state dir>/artifacts`` unless configured)::

    <base>/<namespace as one safe segment>/catalog.sqlite3        name, mime, size, sha256, version,
                                                                  owner task and user, created
    <base>/<namespace ...>/objects/<ab>/<sha256 of context+name>/v<N>   the bytes of version N
    <base>/<namespace ...>/tmp/<random>.part                      a save in progress

The namespace is encoded by :func:`~mesh.artifacts.uris.encode_segment` (``acme/ai`` and
``acme_ai`` get different folders) and names never become paths (they are hashed), so no name
reaches outside its folder. A save writes a temporary file, then renames it into place in the
same catalog transaction that records it: a refused or failed save leaves no file. The catalog
(:mod:`mesh.artifacts.catalog`) is SQLite by default (one machine, or several sharing a volume
with working file locks), or PostgreSQL (``artifacts.store: postgresql://...``: hosts sharing
the folder, each reading the one catalog).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hashlib
import logging
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterable
from pathlib import Path

from mesh.artifacts.catalog import Catalog, SqliteCatalog, Version
from mesh.artifacts.errors import ArtifactNotFound, ArtifactStoreUnavailable
from mesh.artifacts.store import (
    CHUNK_BYTES,
    ArtifactInfo,
    ArtifactLimits,
    Meter,
    Source,
    guess_mime_type,
    purge_due,
    retention_horizon,
    source_chunks,
)
from mesh.artifacts.uris import ArtifactRef, encode_segment

__all__ = ["FileStore"]

log = logging.getLogger(__name__)

# Writes are gathered to this size before each trip to the writing thread.
_WRITE_BATCH = 4 * CHUNK_BYTES
# A temporary file this old belongs to a save that died with its process.
_STALE_TMP_S = 3600.0


class FileStore:
    """The artifacts of ``namespace`` under ``base`` (see the module docstring); ``catalog``:
    where what describes them is kept (default: ``catalog.sqlite3`` beside the files)."""

    def __init__(
        self, base: Path, namespace: str, limits: ArtifactLimits | None = None, *, catalog: Catalog | None = None
    ) -> None:
        self.namespace = namespace
        self.limits = limits or ArtifactLimits()
        self.root = Path(base) / encode_segment(namespace)
        self.catalog: Catalog = catalog if catalog is not None else SqliteCatalog(self.root)
        self._ready = False
        self._purged_at = 0.0

    # ---------------------------------------------------------------- plumbing

    async def _folders(self) -> None:
        if self._ready:
            return

        def make() -> None:
            try:
                (self.root / "tmp").mkdir(parents=True, exist_ok=True, mode=0o700)
                (self.root / "objects").mkdir(exist_ok=True, mode=0o700)
            except OSError as exc:
                raise ArtifactStoreUnavailable(
                    f"cannot open the artifact store at {self.root}: {exc}; check the directory's permissions "
                    "(artifacts.path or MESH_STATE_DIR)"
                ) from exc
            self._remove_stale_tmp()

        await asyncio.to_thread(make)
        self._ready = True

    def _remove_stale_tmp(self) -> None:
        horizon = time.time() - _STALE_TMP_S
        for path in (self.root / "tmp").glob("*.part"):
            with contextlib.suppress(OSError):
                if path.stat().st_mtime < horizon:
                    path.unlink()

    def path_of(self, context_id: str, name: str, version: int) -> Path:
        key = hashlib.sha256(f"{context_id}\0{name}".encode()).hexdigest()
        return self.root / "objects" / key[:2] / key / f"v{version}"

    # ---------------------------------------------------------------- writing

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
        ref = ArtifactRef(context_id, name)  # validates both
        await self._folders()
        await self._maybe_purge()
        meter = Meter(self.limits, await self.usage(), self.namespace)
        tmp = self.root / "tmp" / f"{uuid.uuid4().hex}.part"
        try:
            await self._write(tmp, source, meter)
            info = ArtifactInfo(
                context_id=ref.context_id,
                name=ref.name,
                version=0,  # chosen when recorded
                mime_type=guess_mime_type(name, mime_type),
                size=meter.size,
                sha256=meter.digest.hexdigest(),
                created=time.time(),
                owner_task=owner_task,
                owner_user=owner_user,
            )

            def place(version: int) -> Path:
                final = self.path_of(info.context_id, info.name, version)
                final.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                os.replace(tmp, final)
                return final

            return await self.catalog.record(info, meter, place)
        finally:
            with contextlib.suppress(FileNotFoundError):
                await asyncio.to_thread(tmp.unlink)

    async def _write(self, tmp: Path, source: Source, meter: Meter) -> None:
        if isinstance(source, bytes | bytearray | memoryview):  # one trip to a thread
            data = memoryview(source)
            meter.check(len(data))

            def write_all() -> None:
                with open(tmp, "wb") as out:
                    out.write(data)
                meter.add(data)

            await asyncio.to_thread(write_all)
            return
        if isinstance(source, os.PathLike):  # copied and hashed in one trip to a thread

            def copy_file() -> None:
                with open(source, "rb") as given, open(tmp, "wb") as out:
                    while chunk := given.read(_WRITE_BATCH):
                        meter.add(chunk)
                        out.write(chunk)

            await asyncio.to_thread(copy_file)
            return
        handle = await asyncio.to_thread(open, tmp, "wb")
        try:
            batch: list[bytes | memoryview] = []
            batched = 0
            async for chunk in source_chunks(source):
                meter.add(chunk)
                batch.append(chunk)
                batched += len(chunk)
                if batched >= _WRITE_BATCH:
                    await asyncio.to_thread(handle.writelines, batch)
                    batch, batched = [], 0
            if batch:
                await asyncio.to_thread(handle.writelines, batch)
        finally:
            await asyncio.to_thread(handle.close)

    # ---------------------------------------------------------------- reading

    async def info(self, ref: ArtifactRef) -> ArtifactInfo:
        found = await self.catalog.find(ref)
        if found is None:
            raise ArtifactNotFound(f"no artifact {ref.uri} in namespace {self.namespace!r}")
        return found

    async def open(self, info: ArtifactInfo, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        end = info.size if end is None else min(end, info.size)
        path = self.path_of(info.context_id, info.name, info.version)
        try:
            handle = await asyncio.to_thread(open, path, "rb")
        except FileNotFoundError as exc:
            raise ArtifactNotFound(f"artifact {info.uri} was deleted") from exc
        try:
            position = start
            if start:
                await asyncio.to_thread(handle.seek, start)
            while position < end:
                chunk = await asyncio.to_thread(handle.read, min(CHUNK_BYTES, end - position))
                if not chunk:
                    break
                position += len(chunk)
                yield chunk
        finally:
            handle.close()

    async def list(self, context_id: str | None = None) -> builtins.list[ArtifactInfo]:
        return await self.catalog.rows(context_id)

    async def usage(self) -> int:
        return await self.catalog.usage()

    # ---------------------------------------------------------------- deleting

    async def delete(self, ref: ArtifactRef) -> int:
        return await self._unlink(await self.catalog.delete(ref))

    async def purge(self, older_than: float | None = None) -> int:
        horizon = retention_horizon(self.limits) if older_than is None else older_than
        self._purged_at = time.monotonic()
        return await self._unlink(await self.catalog.delete_older(horizon))

    async def delete_owned(self, owners: Iterable[tuple[str, str]]) -> int:
        pairs = list(dict.fromkeys(owners))
        if not pairs or self.catalog.is_empty_here():
            return 0  # nothing was ever saved here: no folder is made for nothing
        return await self._unlink(await self.catalog.delete_owned(pairs))

    async def _unlink(self, versions: builtins.list[Version]) -> int:
        def unlink() -> None:
            for context_id, name, version in versions:  # the rows are gone: a reader now finds none
                self.path_of(context_id, name, version).unlink(missing_ok=True)

        if versions:
            await asyncio.to_thread(unlink)
        return len(versions)

    async def _maybe_purge(self) -> None:
        if purge_due(self._purged_at):
            removed = await self.purge()
            if removed:
                log.info("artifacts: %d versions past the retention were deleted in %r", removed, self.namespace)

    async def close(self) -> None:
        await self.catalog.close()
