"""The PostgreSQL task journal: the tasks of every instance of an agent in one shared table.

The batching is the SQLite journal's (:class:`~agents.sqlitejournal.SqliteJournal`: changes
collected on the loop, a batch handed over after :data:`~agents.sqlitejournal.WRITE_DELAY_S`
or once acknowledgements pile up, the broker acknowledgements run once it is committed); what
commits a batch here is :class:`_PgWriter`, which writes every batch waiting in one transaction
(group commit, psycopg's pipeline under ``executemany``) on an async connection of the journal's
pool. A request is thus still acknowledged only once its task is durable.

Rows are keyed by (namespace, agent, task id): every replica of the agent reads every task
(:mod:`agents.sharedtasks`). Each row names the instance that runs it and, while it runs, a
lease (``lease_until``, seconds on the database's clock, so hosts' clocks need not agree) that
the instance renews every third of :attr:`lease_s`; a row is written only by its instance (or
over a lapsed lease), and never again once terminal: a replica cut off while another took its
task over cannot overwrite the outcome (:mod:`agents.takeover`).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agents.journal import LoadedTasks, StoredTask
from agents.sqlitejournal import BatchWriter, SqliteJournal
from mesh.a2a import Task
from mesh.store import Migration, StoreUrl
from mesh.store import postgres as pg

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

    from agents.tasks import TaskRecord

__all__ = ["MIGRATIONS", "PostgresJournal"]

log = logging.getLogger(__name__)

COMPONENT = "task_journal"
MIGRATIONS = (
    Migration(
        1,
        (
            # Seconds on the database's clock: leases and ages agree whatever the hosts' clocks say.
            "CREATE OR REPLACE FUNCTION mesh_now() RETURNS DOUBLE PRECISION LANGUAGE sql VOLATILE "
            "AS $$ SELECT extract(epoch FROM clock_timestamp())::double precision $$",
            """CREATE TABLE IF NOT EXISTS mesh_tasks (
                namespace TEXT NOT NULL,
                agent TEXT NOT NULL,
                id TEXT NOT NULL,
                request_key TEXT,
                terminal BOOLEAN NOT NULL,
                changed_at DOUBLE PRECISION NOT NULL,
                task BYTEA NOT NULL,
                owner TEXT,
                context_id TEXT NOT NULL,
                state TEXT NOT NULL,
                instance TEXT NOT NULL,
                lease_until DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (namespace, agent, id)
            )""",
            "CREATE INDEX IF NOT EXISTS mesh_tasks_running ON mesh_tasks (namespace, agent, lease_until) "
            "WHERE NOT terminal",
            """CREATE TABLE IF NOT EXISTS mesh_push_configs (
                namespace TEXT NOT NULL,
                agent TEXT NOT NULL,
                task_id TEXT NOT NULL,
                position INTEGER NOT NULL,
                config BYTEA NOT NULL,
                PRIMARY KEY (namespace, agent, task_id, position)
            )""",
        ),
    ),
    Migration(2, ("CREATE INDEX IF NOT EXISTS mesh_tasks_changed ON mesh_tasks (namespace, agent, changed_at)",)),
    # Every task is written two or three times and deleted by retention: the table is a queue, and
    # the default vacuum (at 20% dead rows, throttled) lets its dead rows cut the throughput by a third.
    Migration(
        3,
        (
            "ALTER TABLE mesh_tasks SET (autovacuum_vacuum_scale_factor = 0.01, "
            "autovacuum_vacuum_insert_scale_factor = 0.01, autovacuum_vacuum_cost_delay = 0)",
        ),
    ),
)
# A row is written by its instance, or over a lapsed lease; never once terminal (see the module doc).
# A group's rows go as one statement of arrays (unnest), not one statement per row.
_UPSERT = (
    "INSERT INTO mesh_tasks (namespace, agent, id, request_key, terminal, changed_at, task, owner, context_id, "
    "state, instance, lease_until) SELECT %s, %s, u.*, %s, mesh_now() + %s FROM unnest(%s::text[], %s::text[], "
    "%s::boolean[], %s::double precision[], %s::bytea[], %s::text[], %s::text[], %s::text[]) "
    "AS u(id, request_key, terminal, changed_at, task, owner, context_id, state) "
    "ON CONFLICT (namespace, agent, id) DO UPDATE SET terminal = excluded.terminal, changed_at = excluded.changed_at, "
    "task = excluded.task, owner = excluded.owner, state = excluded.state, instance = excluded.instance, "
    "lease_until = excluded.lease_until WHERE NOT mesh_tasks.terminal AND (mesh_tasks.instance = excluded.instance "
    "OR mesh_tasks.lease_until < mesh_now())"
)


class PostgresJournal(SqliteJournal):
    """A :class:`~agents.journal.TaskJournal` in PostgreSQL, shared by the agent's replicas."""

    def __init__(
        self,
        url: StoreUrl,
        *,
        namespace: str,
        agent_name: str,
        instance: str,
        shared: bool,
        lease_s: float = 10.0,
        retention_s: float = 3600.0,
        max_backlog_bytes: int = 32_000_000,
        receive_maximum: int = 64,
    ) -> None:
        # No file: the SQLite side's path is never opened here (load and the writer are this class's).
        super().__init__(
            Path(os.devnull),
            agent_name=agent_name,
            max_backlog_bytes=max_backlog_bytes,
            receive_maximum=receive_maximum,
        )
        self.url = url
        self.where = str(url)
        self.namespace = namespace
        self.instance = instance
        #: Replicas load nothing at start: every task is read from the store when asked for.
        self.shared = shared
        self.lease_s = lease_s
        self.retention_s = retention_s
        self.pool: AsyncConnectionPool | None = None
        self._renewer: asyncio.Task[None] | None = None
        #: Called with the ids of this instance's running tasks whose lease another instance took.
        self.on_lease_lost: Any = None

    #: What a failed start says to do (agents.service).
    fix_hint = (
        "check the store's host, port, database and user, and its password ($MESH_STORE_PASSWORD or the file "
        "$MESH_STORE_PASSWORD_FILE names); `mesh doctor --store URL` checks it"
    )

    def load(self) -> LoadedTasks:
        """Bring the schema up to date and read the agent's tasks (replicas: none); blocking."""
        with pg.connect(self.url) as db:
            pg.migrate(db, COMPONENT, MIGRATIONS)
            if self.shared:
                return LoadedTasks()
            return _read(db, self.namespace, self.agent_name)

    def _make_writer(self, loop: asyncio.AbstractEventLoop) -> BatchWriter:
        return _PgWriter(self)

    async def connected(self) -> AsyncConnectionPool:
        """The journal's pool, opened on first use."""
        if self.pool is None:
            self.pool = await pg.open_pool(self.url)
            self._renewer = asyncio.get_running_loop().create_task(self._renew_leases())
        return self.pool

    def _row(self, seq: int, record: TaskRecord, now: float, task_json: bytes) -> tuple[Any, ...]:
        base = super()._row(seq, record, now, task_json)
        return (*base, record.context_id, record.state.value)

    async def _renew_leases(self) -> None:
        """Every third of the lease: renew this instance's running tasks, learn which another took,
        and delete the agent's finished tasks past retention (whoever ran them)."""
        while True:
            await asyncio.sleep(self.lease_s / 3)
            try:
                await self._renew_once()
            except Exception as exc:  # the store is away: the leases lapse, as they should
                log.warning("%s: cannot renew task leases in %s: %s", self.agent_name, self.where, exc)

    async def _renew_once(self) -> None:
        if self.pool is None:
            return
        async with self.pool.connection() as db:
            cursor = await db.execute(
                "UPDATE mesh_tasks SET lease_until = mesh_now() + %s WHERE namespace = %s AND agent = %s "
                "AND instance = %s AND NOT terminal RETURNING id",
                (self.lease_s, self.namespace, self.agent_name, self.instance),
            )
            kept = {str(row[0]) for row in await cursor.fetchall()}
            await db.execute(
                "DELETE FROM mesh_tasks WHERE namespace = %s AND agent = %s AND terminal "
                "AND changed_at < mesh_now() - %s",
                (self.namespace, self.agent_name, self.retention_s),
            )
        if self.on_lease_lost is not None:
            self.on_lease_lost(kept)

    async def close(self) -> None:
        await super().close()
        if self._renewer is not None:
            self._renewer.cancel()
            self._renewer = None
        if self.pool is not None:
            pool, self.pool = self.pool, None
            await pool.close()


class _PgWriter:
    """Commits one journal's batches: all those waiting in one transaction (group commit)."""

    def __init__(self, journal: PostgresJournal) -> None:
        self.journal = journal
        self._waiting: deque[tuple[int, tuple[Any, ...]]] = deque()
        self._worker: asyncio.Task[None] | None = None

    def register(self, journal: Any) -> int:
        return 1

    def submit(self, jid: int, number: int, batch: tuple[Any, ...]) -> None:
        self._waiting.append((number, batch))
        if self._worker is None or self._worker.done():
            self._worker = asyncio.get_running_loop().create_task(self._drain())

    async def close_journal(self, jid: int) -> None:
        while self._worker is not None and not self._worker.done():
            await asyncio.shield(self._worker)

    async def _drain(self) -> None:
        journal = self.journal
        while self._waiting:
            batches = list(self._waiting)
            self._waiting.clear()
            error: str | None = None
            try:
                pool = await journal.connected()
                group = _Group.of(journal, [batch for _number, batch in batches])
                async with pool.connection() as db:
                    if group.deleted or group.pushes:
                        async with db.transaction():
                            await group.commit(db, journal)
                    else:  # one statement, its own transaction: one round trip, not three (BEGIN, COMMIT)
                        await group.commit(db, journal)
            except Exception as exc:  # the store is away: reported, acknowledged all the same (as a failed disk)
                error = f"{type(exc).__name__}: {exc}"
            journal.stored_up_to(batches[-1][0], error)


class _Group:
    """What the batches waiting to be committed come to: each task's latest row, the deleted
    tasks, and the push configs set."""

    __slots__ = ("deleted", "pushes", "rows")

    def __init__(self) -> None:
        self.rows: dict[str, tuple[Any, ...]] = {}
        self.deleted: list[str] = []
        self.pushes: dict[str, list[bytes]] = {}

    @classmethod
    def of(cls, journal: PostgresJournal, batches: list[tuple[Any, ...]]) -> _Group:
        group = cls()
        rows, pushes = group.rows, group.pushes
        for batch_rows, batch_deleted, _deleted_seqs, batch_pushes in batches:
            for task_id in batch_deleted:
                rows.pop(task_id, None)
                pushes.pop(task_id, None)
            group.deleted.extend(batch_deleted)
            for row in batch_rows:
                rows[row[1]] = row  # a later state of the task replaces an earlier one
            pushes.update(batch_pushes)
        return group

    async def commit(self, db: Any, journal: PostgresJournal) -> None:
        key = (journal.namespace, journal.agent_name)
        rows, deleted = self.rows, self.deleted
        if deleted:
            await db.execute(
                "DELETE FROM mesh_tasks WHERE namespace = %s AND agent = %s AND id = ANY(%s)", (*key, deleted)
            )
            await db.execute(
                "DELETE FROM mesh_push_configs WHERE namespace = %s AND agent = %s AND task_id = ANY(%s)",
                (*key, deleted),
            )
        if rows:
            columns = list(zip(*rows.values(), strict=True))  # seq, id, request_key, terminal, changed_at, ...
            terminal = [bool(flag) for flag in columns[3]]
            arrays = [list(columns[1]), list(columns[2]), terminal, *(list(column) for column in columns[4:9])]
            cursor = await db.execute(_UPSERT, (*key, journal.instance, journal.lease_s, *arrays))
            if 0 <= cursor.rowcount < len(rows):  # fenced out: another replica owns them, or they ended
                log.info(
                    "%s (replica %s): %d task change(s) not stored: the store holds another replica's outcome",
                    journal.agent_name,
                    journal.instance,
                    len(rows) - cursor.rowcount,
                )
        for task_id, configs in self.pushes.items():
            await db.execute(
                "DELETE FROM mesh_push_configs WHERE namespace = %s AND agent = %s AND task_id = %s", (*key, task_id)
            )
            for position, config in enumerate(configs):
                await db.execute(
                    "INSERT INTO mesh_push_configs (namespace, agent, task_id, position, config) "
                    "VALUES (%s, %s, %s, %s, %s)",
                    (*key, task_id, position, config),
                )


def _read(db: Any, namespace: str, agent: str) -> LoadedTasks:
    loaded = LoadedTasks()
    bad = 0
    for task_json, request_key, age, owner in db.execute(
        "SELECT task, request_key, mesh_now() - changed_at, owner FROM mesh_tasks WHERE namespace = %s AND agent = %s "
        "ORDER BY changed_at",
        (namespace, agent),
    ):
        try:
            task = Task.model_validate_json(bytes(task_json))
        except ValueError:
            bad += 1
            continue
        loaded.tasks.append(StoredTask(task, request_key, max(0.0, float(age)), owner))
    if bad:
        log.warning("%s: skipped %d stored task(s) that no longer parse as A2A tasks", agent, bad)
    for task_id, config in db.execute(
        "SELECT task_id, config FROM mesh_push_configs WHERE namespace = %s AND agent = %s ORDER BY task_id, position",
        (namespace, agent),
    ):
        loaded.push_configs.setdefault(task_id, []).append(bytes(config))
    return loaded
