"""The embedded artifact store: files under the state directory, metadata in SQLite.

Layout of one namespace (``<base>`` is ``<state dir>/artifacts`` unless configured)::

    <base>/<namespace as one safe segment>/catalog.sqlite3        name, mime, size, sha256, version,
                                                                  owner task and user, created
    <base>/<namespace ...>/objects/<ab>/<sha256 of context+name>/v<N>   the bytes of version N
    <base>/<namespace ...>/tmp/<random>.part                      a save in progress

The namespace is encoded by :func:`~mesh.artifacts.uris.encode_segment` (``acme/ai`` and
``acme_ai`` get different folders) and names never become paths (they are hashed), so no name
reaches outside its folder. A save writes a temporary file, then renames it into place in the
same SQLite transaction that records it: a refused or failed save leaves no file. Right for one
machine, or several sharing a volume with working file locks.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import hashlib
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

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
T = TypeVar("T")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS artifacts (
    context_id TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL,
    mime_type TEXT NOT NULL, size INTEGER NOT NULL, sha256 TEXT NOT NULL, created REAL NOT NULL,
    owner_task TEXT, owner_user TEXT,
    PRIMARY KEY (context_id, name, version)
)
"""
_INDEX = "CREATE INDEX IF NOT EXISTS artifacts_owner ON artifacts (owner_task)"
_COLUMNS = "context_id, name, version, mime_type, size, sha256, created, owner_task, owner_user"
# Fixed clauses only: every value is bound.
_SELECT = f"SELECT {_COLUMNS} FROM artifacts"  # noqa: S608
_INSERT = f"INSERT INTO artifacts ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)"  # noqa: S608
# Writes are gathered to this size before each trip to the writing thread.
_WRITE_BATCH = 4 * CHUNK_BYTES
# Owners per DELETE statement (SQLite binds at most 32766 values).
_OWNERS_PER_STATEMENT = 500
# A temporary file this old belongs to a save that died with its process.
_STALE_TMP_S = 3600.0


class FileStore:
    """The artifacts of ``namespace`` under ``base`` (see the module docstring)."""

    def __init__(self, base: Path, namespace: str, limits: ArtifactLimits | None = None) -> None:
        self.namespace = namespace
        self.limits = limits or ArtifactLimits()
        self.root = Path(base) / encode_segment(namespace)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._purged_at = 0.0

    # ---------------------------------------------------------------- plumbing

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                (self.root / "tmp").mkdir(parents=True, exist_ok=True, mode=0o700)
                (self.root / "objects").mkdir(exist_ok=True, mode=0o700)
                db = sqlite3.connect(self.root / "catalog.sqlite3", isolation_level=None, check_same_thread=False)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA busy_timeout=10000")
                db.execute(_SCHEMA)
                db.execute(_INDEX)
            except (OSError, sqlite3.Error) as exc:
                raise ArtifactStoreUnavailable(
                    f"cannot open the artifact store at {self.root}: {exc}; check the directory's permissions "
                    "(artifacts.path or MESH_STATE_DIR)"
                ) from exc
            self._db = db
            self._remove_stale_tmp()
        return self._db

    async def _run(self, function: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                return function(self._connect())

        return await asyncio.to_thread(locked)

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
            return await self._run(lambda db: self._record(db, tmp, info, meter))
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

    def _record(self, db: sqlite3.Connection, tmp: Path, info: ArtifactInfo, meter: Meter) -> ArtifactInfo:
        db.execute("BEGIN IMMEDIATE")  # one writer across processes: usage and version stay exact
        try:
            meter.used = db.execute("SELECT COALESCE(SUM(size), 0) FROM artifacts").fetchone()[0]
            meter.check(info.size)
            (latest,) = db.execute(
                "SELECT COALESCE(MAX(version), 0) FROM artifacts WHERE context_id = ? AND name = ?",
                (info.context_id, info.name),
            ).fetchone()
            version = int(latest) + 1
            final = self.path_of(info.context_id, info.name, version)
            final.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.replace(tmp, final)
            stored = ArtifactInfo(**{**_fields(info), "version": version})
            try:
                db.execute(_INSERT, _row(stored))
                db.execute("COMMIT")
            except BaseException:
                final.unlink(missing_ok=True)
                raise
            return stored
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    # ---------------------------------------------------------------- reading

    async def info(self, ref: ArtifactRef) -> ArtifactInfo:
        def find(db: sqlite3.Connection) -> tuple[Any, ...] | None:
            if ref.version is None:
                query = _SELECT + " WHERE context_id=? AND name=? ORDER BY version DESC LIMIT 1"
                return db.execute(query, (ref.context_id, ref.name)).fetchone()  # type: ignore[no-any-return]
            query = _SELECT + " WHERE context_id=? AND name=? AND version=?"
            return db.execute(query, (ref.context_id, ref.name, ref.version)).fetchone()  # type: ignore[no-any-return]

        row = await self._run(find)
        if row is None:
            raise ArtifactNotFound(f"no artifact {ref.uri} in namespace {self.namespace!r}")
        return _info(row)

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
        def rows(db: sqlite3.Connection) -> builtins.list[tuple[Any, ...]]:
            order = " ORDER BY context_id, name, version"
            if context_id is None:
                return db.execute(_SELECT + order).fetchall()
            return db.execute(_SELECT + " WHERE context_id=?" + order, (context_id,)).fetchall()

        return [_info(row) for row in await self._run(rows)]

    async def usage(self) -> int:
        return int(await self._run(lambda db: db.execute("SELECT COALESCE(SUM(size), 0) FROM artifacts").fetchone()[0]))

    # ---------------------------------------------------------------- deleting

    async def delete(self, ref: ArtifactRef) -> int:
        def remove(db: sqlite3.Connection) -> int:
            where = "context_id=? AND name=?"
            args: list[Any] = [ref.context_id, ref.name]
            if ref.version is not None:
                where, args = where + " AND version=?", [*args, ref.version]
            return self._delete_where(db, where, args)

        return await self._run(remove)

    async def purge(self, older_than: float | None = None) -> int:
        horizon = retention_horizon(self.limits) if older_than is None else older_than
        self._purged_at = time.monotonic()
        return await self._run(lambda db: self._delete_where(db, "created < ?", [horizon]))

    async def delete_owned(self, owners: Iterable[tuple[str, str]]) -> int:
        pairs = list(dict.fromkeys(owners))
        if not pairs or (self._db is None and not (self.root / "catalog.sqlite3").exists()):
            return 0  # nothing was ever saved here: no folder is made for nothing

        def remove(db: sqlite3.Connection) -> int:
            removed = 0
            for start in range(0, len(pairs), _OWNERS_PER_STATEMENT):
                batch = pairs[start : start + _OWNERS_PER_STATEMENT]
                where = " OR ".join(["(owner_task=? AND context_id=?)"] * len(batch))
                args = [value for ctx, task in batch for value in (task, ctx)]
                # Most forgotten tasks saved nothing: a read finds that without the write lock.
                if db.execute(f"SELECT 1 FROM artifacts WHERE {where} LIMIT 1", args).fetchone():  # noqa: S608
                    removed += self._delete_where(db, where, args)
            return removed

        return await self._run(remove)

    async def _maybe_purge(self) -> None:
        if purge_due(self._purged_at):
            removed = await self.purge()
            if removed:
                log.info("artifacts: %d versions past the retention were deleted in %r", removed, self.namespace)

    def _delete_where(self, db: sqlite3.Connection, where: str, args: builtins.list[Any]) -> int:
        db.execute("BEGIN IMMEDIATE")
        try:
            found = db.execute(f"SELECT context_id, name, version FROM artifacts WHERE {where}", args).fetchall()  # noqa: S608
            db.execute(f"DELETE FROM artifacts WHERE {where}", args)  # noqa: S608 - fixed clauses, bound values
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        for context_id, name, version in found:  # the rows are gone: a reader now finds none
            self.path_of(context_id, name, version).unlink(missing_ok=True)
        return len(found)

    async def close(self) -> None:
        def shut() -> None:
            with self._lock:
                if self._db is not None:
                    self._db.close()
                    self._db = None

        await asyncio.to_thread(shut)


def _fields(info: ArtifactInfo) -> dict[str, Any]:
    return {name: getattr(info, name) for name in _COLUMNS.split(", ")}


def _row(info: ArtifactInfo) -> tuple[Any, ...]:
    return tuple(getattr(info, name) for name in _COLUMNS.split(", "))


def _info(row: tuple[Any, ...]) -> ArtifactInfo:
    return ArtifactInfo(**dict(zip(_COLUMNS.split(", "), row, strict=True)))
