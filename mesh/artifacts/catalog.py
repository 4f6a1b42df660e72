"""The embedded store's catalog: what describes each stored version, on one of two engines.

:class:`~mesh.artifacts.filestore.FileStore` keeps the bytes as files and asks a
:class:`Catalog` for everything else: the next version (chosen while the namespace's bytes are
counted, under a lock that spans processes and hosts), lookups, listings, deletions. Engines:

- :class:`SqliteCatalog`, ``<folder>/catalog.sqlite3`` beside the files (the default; one
  machine, or several sharing a volume with working file locks);
- :class:`~mesh.artifacts.pgcatalog.PostgresCatalog` (``artifacts.store: postgresql://...``):
  the catalog of every host in one database, the files on a folder they share.

A save's file is moved into place (``place``) inside the transaction that records it, and
removed again if that transaction fails: a refused or failed save leaves no file and no row.
"""

from __future__ import annotations

import asyncio
import builtins
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from mesh.artifacts.errors import ArtifactStoreUnavailable
from mesh.artifacts.store import ArtifactInfo, Meter
from mesh.artifacts.uris import ArtifactRef

__all__ = ["COLUMNS", "Catalog", "Place", "SqliteCatalog", "Version", "as_info", "as_row"]

T = TypeVar("T")
#: A stored version's key: (context id, name, version).
Version = tuple[str, str, int]
#: Moves a save's file into place for the version it is given; returns where it went.
Place = Callable[[int], Path]

COLUMNS = ("context_id", "name", "version", "mime_type", "size", "sha256", "created", "owner_task", "owner_user")
_COLUMNS = ", ".join(COLUMNS)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS artifacts (
    context_id TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL,
    mime_type TEXT NOT NULL, size INTEGER NOT NULL, sha256 TEXT NOT NULL, created REAL NOT NULL,
    owner_task TEXT, owner_user TEXT,
    PRIMARY KEY (context_id, name, version)
)
"""
_INDEX = "CREATE INDEX IF NOT EXISTS artifacts_owner ON artifacts (owner_task)"
# Fixed clauses only: every value is bound.
_SELECT = f"SELECT {_COLUMNS} FROM artifacts"  # noqa: S608
_INSERT = f"INSERT INTO artifacts ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)"  # noqa: S608
# Owners per DELETE statement (SQLite binds at most 32766 values).
OWNERS_PER_STATEMENT = 500


class Catalog(Protocol):
    """The rows of one namespace's stored versions (see the module doc)."""

    #: Where it is, for errors (never a password).
    where: str

    async def record(self, info: ArtifactInfo, meter: Meter, place: Place) -> ArtifactInfo:
        """Record ``info`` as the next version of its name, within the meter's limits."""
        ...

    async def find(self, ref: ArtifactRef) -> ArtifactInfo | None: ...

    async def rows(self, context_id: str | None) -> builtins.list[ArtifactInfo]:
        """Every version (of one context, or all), by context, name and version."""
        ...

    async def usage(self) -> int: ...

    async def delete(self, ref: ArtifactRef) -> builtins.list[Version]:
        """Delete one version's row (every version's without one); the versions deleted."""
        ...

    async def delete_older(self, horizon: float) -> builtins.list[Version]: ...

    async def delete_owned(self, owners: Sequence[tuple[str, str]]) -> builtins.list[Version]:
        """Delete the rows saved by each ``(context id, task id)``; the versions deleted."""
        ...

    def is_empty_here(self) -> bool:
        """True when nothing was ever recorded here (no file to open for nothing)."""
        ...

    async def close(self) -> None: ...


def as_row(info: ArtifactInfo) -> tuple[Any, ...]:
    return tuple(getattr(info, name) for name in COLUMNS)


def as_info(row: Sequence[Any]) -> ArtifactInfo:
    return ArtifactInfo(**dict(zip(COLUMNS, row, strict=True)))


class SqliteCatalog:
    """The catalog in ``catalog.sqlite3`` under ``root``, used through a thread."""

    def __init__(self, root: Path) -> None:
        self.path = root / "catalog.sqlite3"
        self.where = str(self.path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA busy_timeout=10000")
                db.execute(_SCHEMA)
                db.execute(_INDEX)
            except (OSError, sqlite3.Error) as exc:
                raise ArtifactStoreUnavailable(
                    f"cannot open the artifact catalog {self.path}: {exc}; check the directory's permissions "
                    "(artifacts.path or MESH_STATE_DIR)"
                ) from exc
            self._db = db
        return self._db

    async def _run(self, function: Callable[[sqlite3.Connection], T]) -> T:
        def locked() -> T:
            with self._lock:
                return function(self._connect())

        return await asyncio.to_thread(locked)

    async def record(self, info: ArtifactInfo, meter: Meter, place: Place) -> ArtifactInfo:
        def write(db: sqlite3.Connection) -> ArtifactInfo:
            db.execute("BEGIN IMMEDIATE")  # one writer across processes: usage and version stay exact
            try:
                meter.used = db.execute("SELECT COALESCE(SUM(size), 0) FROM artifacts").fetchone()[0]
                meter.check(info.size)
                (latest,) = db.execute(
                    "SELECT COALESCE(MAX(version), 0) FROM artifacts WHERE context_id = ? AND name = ?",
                    (info.context_id, info.name),
                ).fetchone()
                stored = as_info((*as_row(info)[:2], int(latest) + 1, *as_row(info)[3:]))
                final = place(stored.version)
                try:
                    db.execute(_INSERT, as_row(stored))
                    db.execute("COMMIT")
                except BaseException:
                    final.unlink(missing_ok=True)
                    raise
                return stored
            except BaseException:
                if db.in_transaction:
                    db.execute("ROLLBACK")
                raise

        return await self._run(write)

    async def find(self, ref: ArtifactRef) -> ArtifactInfo | None:
        def one(db: sqlite3.Connection) -> tuple[Any, ...] | None:
            if ref.version is None:
                query = _SELECT + " WHERE context_id=? AND name=? ORDER BY version DESC LIMIT 1"
                return db.execute(query, (ref.context_id, ref.name)).fetchone()  # type: ignore[no-any-return]
            query = _SELECT + " WHERE context_id=? AND name=? AND version=?"
            return db.execute(query, (ref.context_id, ref.name, ref.version)).fetchone()  # type: ignore[no-any-return]

        row = await self._run(one)
        return None if row is None else as_info(row)

    async def rows(self, context_id: str | None) -> builtins.list[ArtifactInfo]:
        def every(db: sqlite3.Connection) -> builtins.list[tuple[Any, ...]]:
            order = " ORDER BY context_id, name, version"
            if context_id is None:
                return db.execute(_SELECT + order).fetchall()
            return db.execute(_SELECT + " WHERE context_id=?" + order, (context_id,)).fetchall()

        return [as_info(row) for row in await self._run(every)]

    async def usage(self) -> int:
        return int(await self._run(lambda db: db.execute("SELECT COALESCE(SUM(size), 0) FROM artifacts").fetchone()[0]))

    async def delete(self, ref: ArtifactRef) -> builtins.list[Version]:
        where = "context_id=? AND name=?"
        args: builtins.list[Any] = [ref.context_id, ref.name]
        if ref.version is not None:
            where, args = where + " AND version=?", [*args, ref.version]
        return await self._run(lambda db: _delete_where(db, where, args))

    async def delete_older(self, horizon: float) -> builtins.list[Version]:
        return await self._run(lambda db: _delete_where(db, "created < ?", [horizon]))

    async def delete_owned(self, owners: Sequence[tuple[str, str]]) -> builtins.list[Version]:
        def remove(db: sqlite3.Connection) -> builtins.list[Version]:
            removed: builtins.list[Version] = []
            for start in range(0, len(owners), OWNERS_PER_STATEMENT):
                batch = owners[start : start + OWNERS_PER_STATEMENT]
                where = " OR ".join(["(owner_task=? AND context_id=?)"] * len(batch))
                args = [value for ctx, task in batch for value in (task, ctx)]
                # Most forgotten tasks saved nothing: a read finds that without the write lock.
                if db.execute(f"SELECT 1 FROM artifacts WHERE {where} LIMIT 1", args).fetchone():  # noqa: S608
                    removed += _delete_where(db, where, args)
            return removed

        return await self._run(remove)

    def is_empty_here(self) -> bool:
        return self._db is None and not self.path.exists()

    async def close(self) -> None:
        def shut() -> None:
            with self._lock:
                if self._db is not None:
                    self._db.close()
                    self._db = None

        await asyncio.to_thread(shut)


def _delete_where(db: sqlite3.Connection, where: str, args: builtins.list[Any]) -> builtins.list[Version]:
    db.execute("BEGIN IMMEDIATE")
    try:
        found = db.execute(f"SELECT context_id, name, version FROM artifacts WHERE {where}", args).fetchall()  # noqa: S608
        db.execute(f"DELETE FROM artifacts WHERE {where}", args)  # noqa: S608 - fixed clauses, bound values
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return [(str(c), str(n), int(v)) for c, n, v in found]
