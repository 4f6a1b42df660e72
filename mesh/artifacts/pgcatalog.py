"""The artifact catalog in PostgreSQL (``artifacts.store: postgresql://...``; :mod:`mesh.store`).

The same rows as :class:`~mesh.artifacts.catalog.SqliteCatalog`, keyed by namespace too, so the
components of every host read one catalog while the bytes stay files on a folder the hosts share
(``artifacts.path``). A save takes a transaction-scoped advisory lock of its namespace, counts
the namespace's bytes, picks the next version, moves its file into place and records it: two
hosts saving at once get different versions and the namespace bound holds exactly, as on SQLite.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mesh.artifacts.catalog import COLUMNS, Place, Version, as_info, as_row
from mesh.artifacts.errors import ArtifactStoreUnavailable
from mesh.artifacts.store import ArtifactInfo, Meter
from mesh.artifacts.uris import ArtifactRef
from mesh.store import Migration, StoreUrl
from mesh.store import postgres as pg

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

__all__ = ["COMPONENT", "MIGRATIONS", "PostgresCatalog"]

COMPONENT = "artifact_catalog"
MIGRATIONS = (
    Migration(
        1,
        (
            """CREATE TABLE IF NOT EXISTS mesh_artifacts (
                namespace TEXT NOT NULL, context_id TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL,
                mime_type TEXT NOT NULL, size BIGINT NOT NULL, sha256 TEXT NOT NULL,
                created DOUBLE PRECISION NOT NULL, owner_task TEXT, owner_user TEXT,
                PRIMARY KEY (namespace, context_id, name, version))""",
            "CREATE INDEX IF NOT EXISTS mesh_artifacts_owner ON mesh_artifacts (namespace, owner_task)",
        ),
    ),
)
_COLUMNS = ", ".join(COLUMNS)
# Fixed clauses only: every value is bound.
_SELECT = f"SELECT {_COLUMNS} FROM mesh_artifacts WHERE namespace = %s"  # noqa: S608
_INSERT = f"INSERT INTO mesh_artifacts (namespace, {_COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"  # noqa: S608
_USAGE = "SELECT COALESCE(SUM(size), 0) FROM mesh_artifacts WHERE namespace = %s"


class PostgresCatalog:
    """One namespace's artifact rows in the mesh's PostgreSQL (see the module doc)."""

    def __init__(self, url: StoreUrl, namespace: str) -> None:
        self.url = url
        self.namespace = namespace
        self.where = str(url)  # the password redacted
        self._pool: AsyncConnectionPool | None = None
        self._opening = asyncio.Lock()

    async def _connected(self) -> AsyncConnectionPool:
        if self._pool is None:
            async with self._opening:
                if self._pool is None:
                    try:
                        await asyncio.to_thread(self._migrate)
                    except ArtifactStoreUnavailable:
                        raise
                    except Exception as exc:  # psycopg's OperationalError and kin
                        raise self._unavailable(exc) from exc
                    self._pool = await pg.open_pool(self.url, max_size=4)
        return self._pool

    def _migrate(self) -> None:
        pg.require_driver()
        with pg.connect(self.url) as db:
            pg.migrate(db, COMPONENT, MIGRATIONS)

    def _unavailable(self, exc: BaseException) -> ArtifactStoreUnavailable:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return ArtifactStoreUnavailable(
            f"the artifact catalog {self.where} cannot be used: {first}; check the store "
            "(`mesh doctor --store URL`) and its password ($MESH_STORE_PASSWORD or $MESH_STORE_PASSWORD_FILE)"
        )

    async def _all(self, sql: str, args: Sequence[Any]) -> builtins.list[tuple[Any, ...]]:
        import psycopg

        pool = await self._connected()
        try:
            async with pool.connection() as db:
                cursor = await db.execute(sql, args)  # our fixed statements
                return await cursor.fetchall() if cursor.description is not None else []
        except psycopg.Error as exc:
            raise self._unavailable(exc) from exc

    async def record(self, info: ArtifactInfo, meter: Meter, place: Place) -> ArtifactInfo:
        import psycopg

        pool = await self._connected()
        final = None
        try:
            async with pool.connection() as db, db.transaction():
                # One save per namespace at a time, on every host: usage and version stay exact.
                await db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"mesh_artifacts/{self.namespace}",))
                used = await (await db.execute(_USAGE, (self.namespace,))).fetchone()
                meter.used = int(used[0])  # type: ignore[index]
                meter.check(info.size)
                latest = await (
                    await db.execute(
                        "SELECT COALESCE(MAX(version), 0) FROM mesh_artifacts WHERE namespace = %s "
                        "AND context_id = %s AND name = %s",
                        (self.namespace, info.context_id, info.name),
                    )
                ).fetchone()
                row = as_row(info)
                stored = as_info((*row[:2], int(latest[0]) + 1, *row[3:]))  # type: ignore[index]
                final = await asyncio.to_thread(place, stored.version)
                await db.execute(_INSERT, (self.namespace, *as_row(stored)))
            return stored
        except BaseException as exc:
            if final is not None:  # moved into place, but the row never committed
                final.unlink(missing_ok=True)
            if isinstance(exc, psycopg.Error):
                raise self._unavailable(exc) from exc
            raise

    async def find(self, ref: ArtifactRef) -> ArtifactInfo | None:
        if ref.version is None:
            sql = _SELECT + " AND context_id = %s AND name = %s ORDER BY version DESC LIMIT 1"
            rows = await self._all(sql, (self.namespace, ref.context_id, ref.name))
        else:
            sql = _SELECT + " AND context_id = %s AND name = %s AND version = %s"
            rows = await self._all(sql, (self.namespace, ref.context_id, ref.name, ref.version))
        return as_info(rows[0]) if rows else None

    async def rows(self, context_id: str | None) -> builtins.list[ArtifactInfo]:
        order = " ORDER BY context_id, name, version"
        if context_id is None:
            return [as_info(r) for r in await self._all(_SELECT + order, (self.namespace,))]
        found = await self._all(_SELECT + " AND context_id = %s" + order, (self.namespace, context_id))
        return [as_info(r) for r in found]

    async def usage(self) -> int:
        return int((await self._all(_USAGE, (self.namespace,)))[0][0])

    async def delete(self, ref: ArtifactRef) -> builtins.list[Version]:
        if ref.version is None:
            return await self._delete("context_id = %s AND name = %s", (ref.context_id, ref.name))
        where = "context_id = %s AND name = %s AND version = %s"
        return await self._delete(where, (ref.context_id, ref.name, ref.version))

    async def delete_older(self, horizon: float) -> builtins.list[Version]:
        return await self._delete("created < %s", (horizon,))

    async def delete_owned(self, owners: Sequence[tuple[str, str]]) -> builtins.list[Version]:
        contexts = [context_id for context_id, _ in owners]
        tasks = [task_id for _, task_id in owners]
        # Pairs as two arrays, unnested side by side: one statement for any number of owners.
        return await self._delete(
            "(context_id, owner_task) IN (SELECT * FROM unnest(%s::text[], %s::text[]))", (contexts, tasks)
        )

    async def _delete(self, where: str, args: tuple[Any, ...]) -> builtins.list[Version]:
        sql = f"DELETE FROM mesh_artifacts WHERE namespace = %s AND {where} RETURNING context_id, name, version"  # noqa: S608 - fixed clauses
        return [(str(c), str(n), int(v)) for c, n, v in await self._all(sql, (self.namespace, *args))]

    def is_empty_here(self) -> bool:
        return False  # another host may have saved: ask the database

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()
