"""The schedules' record in PostgreSQL: what the schedulers of several machines share.

The same rows as :class:`~mesh.schedules.store.SqliteScheduleStore`, keyed by namespace too.
**The claim** is one transaction that first takes a transaction-scoped advisory lock of the
schedule (so claims of one schedule, from any host, run one after another), then checks the
tick's row, the pause flag and the runs in flight (``max_concurrent``), and inserts the row;
the primary key (namespace, schedule, tick) and ``ON CONFLICT DO NOTHING`` make a second insert
of a tick impossible even without the lock. Times that decide (a run's deadline) are the
database's clock, so the hosts' clocks need not agree for ``max_concurrent``; the ticks
themselves are wall-clock times every scheduler computes alike.

Every method blocks (the scheduler calls them in a thread) on one connection guarded by a
lock, opened on first use and opened again after the server dropped it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from mesh.schedules.store import RUNS_KEPT, RunRecord, ScheduleRecord, UserRun, answer_json, finished_runs
from mesh.store import Migration, StoreUrl
from mesh.store import postgres as pg

if TYPE_CHECKING:
    import psycopg

__all__ = ["MIGRATIONS", "PostgresScheduleStore"]

COMPONENT = "schedule_store"
MIGRATIONS = (
    Migration(
        1,
        (
            """CREATE TABLE IF NOT EXISTS mesh_schedule_runs (
                namespace TEXT NOT NULL, schedule TEXT NOT NULL,
                tick BIGINT NOT NULL,                       -- the tick's time, Unix ms (UTC)
                claimed_by TEXT NOT NULL,
                claimed_at DOUBLE PRECISION NOT NULL,       -- Unix s, the database's clock
                deadline DOUBLE PRECISION NOT NULL,         -- past it, a run with no outcome is not in flight
                manual BOOLEAN NOT NULL DEFAULT false,
                task_id TEXT, outcome TEXT, ended_at DOUBLE PRECISION,
                user_id TEXT, request JSONB, answer JSONB,  -- who asked what, and the answer (the chat's history)
                PRIMARY KEY (namespace, schedule, tick))""",
            "CREATE INDEX IF NOT EXISTS mesh_schedule_runs_user "
            "ON mesh_schedule_runs (namespace, user_id, schedule, tick)",
            """CREATE TABLE IF NOT EXISTS mesh_schedules (
                namespace TEXT NOT NULL, name TEXT NOT NULL, spec JSONB NOT NULL, source TEXT NOT NULL,
                paused BOOLEAN NOT NULL DEFAULT false, next_tick BIGINT, seen_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (namespace, name))""",
        ),
    ),
)
_T = TypeVar("_T")


class PostgresScheduleStore:
    """The record of one namespace's schedules in a PostgreSQL store (see the module doc)."""

    def __init__(self, url: StoreUrl, namespace: str) -> None:
        self.url = url
        self.namespace = namespace
        self.where = str(url)  # never the password
        self._lock = threading.Lock()
        self._db: psycopg.Connection | None = None

    def _run(self, work: Callable[[psycopg.Connection], _T]) -> _T:
        with self._lock:
            if self._db is None or self._db.closed or self._db.broken:
                db = pg.connect(self.url)
                try:
                    pg.migrate(db, COMPONENT, MIGRATIONS)
                except BaseException:
                    db.close()
                    raise
                self._db = db
            return work(self._db)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def exists(self) -> bool:
        return True  # a shared database: reading it creates nothing on this machine

    def register(self, name: str, spec: dict[str, object], source: str, next_tick_ms: int | None) -> None:
        """The schedule as a running scheduler has it (its pause flag kept)."""
        self._run(
            lambda db: db.execute(
                "INSERT INTO mesh_schedules (namespace, name, spec, source, next_tick, seen_at) "
                "VALUES (%s, %s, %s, %s, %s, extract(epoch FROM clock_timestamp())) "
                "ON CONFLICT (namespace, name) DO UPDATE SET "
                "spec = excluded.spec, source = excluded.source, next_tick = excluded.next_tick, "
                "seen_at = excluded.seen_at",
                (self.namespace, name, json.dumps(spec), source, next_tick_ms),
            )
        )

    def claim(
        self,
        name: str,
        tick_ms: int,
        by: str,
        *,
        max_concurrent: int,
        timeout_s: float,
        manual: bool = False,
        user: str | None = None,
        request: dict[str, Any] | None = None,
    ) -> str | None:
        """Claim the run of ``tick_ms``; None when claimed, else why not (taken, paused, too many in flight)."""

        def work(db: psycopg.Connection) -> str | None:
            key = (self.namespace, name)
            with db.transaction():
                db.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"mesh-schedule/{key}",))
                taken = db.execute(
                    "SELECT 1 FROM mesh_schedule_runs WHERE namespace = %s AND schedule = %s AND tick = %s",
                    (*key, tick_ms),
                ).fetchone()
                if taken:
                    return "claimed already"
                paused = db.execute(
                    "SELECT paused FROM mesh_schedules WHERE namespace = %s AND name = %s", key
                ).fetchone()
                if not manual and paused is not None and paused[0]:
                    return "paused"
                row = db.execute(
                    "SELECT count(*) FROM mesh_schedule_runs WHERE namespace = %s AND schedule = %s "
                    "AND outcome IS NULL AND deadline > extract(epoch FROM clock_timestamp())",
                    key,
                ).fetchone()
                running = int(row[0]) if row is not None else 0
                if running >= max_concurrent:
                    return f"{running} run(s) still in flight (max_concurrent: {max_concurrent})"
                inserted = db.execute(
                    "INSERT INTO mesh_schedule_runs (namespace, schedule, tick, claimed_by, claimed_at, deadline, "
                    "manual, user_id, request) VALUES (%s, %s, %s, %s, extract(epoch FROM clock_timestamp()), "
                    "extract(epoch FROM clock_timestamp()) + %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    (*key, tick_ms, by, timeout_s, manual, user, None if request is None else json.dumps(request)),
                )
                return None if inserted.rowcount == 1 else "claimed already"

        return self._run(work)

    def started(self, name: str, tick_ms: int, task_id: str | None) -> None:
        self._run(
            lambda db: db.execute(
                "UPDATE mesh_schedule_runs SET task_id = %s WHERE namespace = %s AND schedule = %s AND tick = %s",
                (task_id, self.namespace, name, tick_ms),
            )
        )

    def ended(
        self, name: str, tick_ms: int, outcome: str, task_id: str | None, answer: dict[str, Any] | None = None
    ) -> None:
        def work(db: psycopg.Connection) -> None:
            key = (self.namespace, name)
            db.execute(
                "UPDATE mesh_schedule_runs SET outcome = %s, ended_at = extract(epoch FROM clock_timestamp()), "
                "task_id = coalesce(%s, task_id), answer = %s "
                "WHERE namespace = %s AND schedule = %s AND tick = %s",
                (outcome, task_id, answer_json(answer), *key, tick_ms),
            )
            db.execute(  # the newest RUNS_KEPT stay
                "DELETE FROM mesh_schedule_runs WHERE namespace = %s AND schedule = %s AND tick < (SELECT tick "
                "FROM mesh_schedule_runs WHERE namespace = %s AND schedule = %s ORDER BY tick DESC "
                "LIMIT 1 OFFSET %s)",
                (*key, *key, RUNS_KEPT),
            )

        self._run(work)

    def last_tick(self, name: str) -> int | None:
        """The latest scheduled (not manual) tick claimed, by anyone: what ``missed:`` compares with."""
        row = self._run(
            lambda db: db.execute(
                "SELECT max(tick) FROM mesh_schedule_runs WHERE namespace = %s AND schedule = %s AND NOT manual",
                (self.namespace, name),
            ).fetchone()
        )
        return int(row[0]) if row is not None and row[0] is not None else None

    def user_runs(self, user: str, after: Mapping[str, int], limit: int = 200) -> list[UserRun]:
        def work(db: psycopg.Connection) -> list[Any]:
            key = (self.namespace, user)
            names = db.execute(
                "SELECT DISTINCT schedule FROM mesh_schedule_runs WHERE namespace = %s AND user_id = %s", key
            ).fetchall()
            rows: list[Any] = []
            for (name,) in sorted(names):
                rows += db.execute(
                    "SELECT schedule, tick, request, task_id, outcome, answer, deadline FROM mesh_schedule_runs "
                    "WHERE namespace = %s AND user_id = %s AND schedule = %s AND tick > %s ORDER BY tick LIMIT %s",
                    (*key, name, after.get(str(name), -1), limit),
                ).fetchall()
            now = db.execute("SELECT extract(epoch FROM clock_timestamp())::double precision").fetchone()
            return [rows, float(now[0]) if now is not None else 0.0]

        rows, now = self._run(work)
        return finished_runs(rows, after, now)

    def set_paused(self, name: str, paused: bool) -> bool:
        """Pause or resume ``name``; False when no scheduler ever registered it."""
        cursor = self._run(
            lambda db: db.execute(
                "UPDATE mesh_schedules SET paused = %s WHERE namespace = %s AND name = %s",
                (paused, self.namespace, name),
            )
        )
        return cursor.rowcount == 1

    def is_paused(self, name: str) -> bool:
        row = self._run(
            lambda db: db.execute(
                "SELECT paused FROM mesh_schedules WHERE namespace = %s AND name = %s", (self.namespace, name)
            ).fetchone()
        )
        return bool(row and row[0])

    def schedules(self) -> list[ScheduleRecord]:
        rows = self._run(
            lambda db: db.execute(
                "SELECT name, spec, source, paused, next_tick FROM mesh_schedules WHERE namespace = %s ORDER BY name",
                (self.namespace,),
            ).fetchall()
        )
        return [ScheduleRecord(str(r[0]), _json(r[1]), str(r[2]), bool(r[3]), _int(r[4])) for r in rows]

    def runs(self, name: str | None = None, limit: int = 100) -> list[RunRecord]:
        """The newest runs first (of ``name``, or of every schedule)."""
        query = (
            "SELECT schedule, tick, claimed_by, manual, task_id, outcome FROM mesh_schedule_runs WHERE namespace = %s"
        )
        args: tuple[object, ...] = (self.namespace,)
        if name is not None:
            query, args = query + " AND schedule = %s", (*args, name)
        rows = self._run(lambda db: db.execute(query + " ORDER BY claimed_at DESC LIMIT %s", (*args, limit)).fetchall())
        return [RunRecord(str(r[0]), int(r[1]), str(r[2]), bool(r[3]), r[4], r[5]) for r in rows]


def _json(value: Any) -> dict[str, object]:
    loaded = json.loads(value) if isinstance(value, str | bytes) else value
    return dict(loaded) if isinstance(loaded, dict) else {}


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
