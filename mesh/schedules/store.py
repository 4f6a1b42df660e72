"""The schedules' shared record: which process claimed which tick, how each run ended, which
schedules are paused. Two engines behind one interface (:class:`ScheduleStore`):

- :class:`SqliteScheduleStore`, the default: one SQLite file per namespace under the state dir
  (``<state dir>/<namespace>/schedules.sqlite``), shared by every scheduler of the machine;
- :class:`~mesh.schedules.pgstore.PostgresScheduleStore`: a ``postgresql://`` store (the one
  the file's agents name as ``store:``, else ``$MESH_STORE``), shared by the schedulers of
  every machine (:func:`open_schedule_store` chooses).

**The claim.** A tick is run by whoever inserts its row first: ``runs`` has the primary key
(schedule, tick), and the insert is made inside one ``BEGIN IMMEDIATE`` transaction that also
counts the schedule's runs still in flight (for ``max_concurrent``). SQLite serialises writers
on the file's lock, so two processes (two ``mesh run`` of one file, a restart racing the old
process) can never both insert the row: exactly one run per tick. The same rows are the durable
memory ``missed:`` reads after a restart (the latest claimed tick), and what ``mesh schedule list``
shows. Pausing is a flag here, read before every claim, so ``mesh schedule pause`` reaches every
running scheduler of the machine at its next tick, through the state dir only its user can write.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from mesh.config.statedir import namespace_state_dir
from mesh.errors import ConfigError

__all__ = [
    "STORE_ENV",
    "RunRecord",
    "ScheduleRecord",
    "ScheduleStore",
    "SqliteScheduleStore",
    "open_schedule_store",
    "store_path",
]

#: The PostgreSQL store the schedules use when their file names none (the one ``mesh doctor --store`` checks).
STORE_ENV = "MESH_STORE"
#: Finished runs kept per schedule (the newest; ``missed:`` reads the latest).
RUNS_KEPT = 1000
#: The JSON bytes of a run's answer kept (for the chat's history); a longer one is kept as a note.
MAX_ANSWER_BYTES = 1_000_000
# Files made before the runs kept who asked what, and the answer.
_ADDED_COLUMNS = ("user_id TEXT", "request TEXT", "answer TEXT")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    schedule TEXT NOT NULL,
    tick INTEGER NOT NULL,          -- the tick's time, Unix ms (UTC)
    claimed_by TEXT NOT NULL,
    claimed_at REAL NOT NULL,       -- Unix s
    deadline REAL NOT NULL,         -- past it, a run with no outcome no longer counts as in flight
    manual INTEGER NOT NULL DEFAULT 0,
    task_id TEXT,
    outcome TEXT,                   -- the task's final state, or 'error: ...'; NULL while it runs
    ended_at REAL,
    user_id TEXT,                   -- the run's userId (the schedule's user:)
    request TEXT,                   -- {agent, text, data, contextId}: what was sent, as JSON
    answer TEXT,                    -- the final Task or Message, as JSON (bounded)
    PRIMARY KEY (schedule, tick)
);
CREATE TABLE IF NOT EXISTS schedules (
    name TEXT PRIMARY KEY,
    spec TEXT NOT NULL,             -- the entry, as JSON
    source TEXT NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    next_tick INTEGER,
    seen_at REAL NOT NULL
);
"""


def _dumped(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def store_path(namespace: str) -> Path:
    return namespace_state_dir(namespace) / "schedules.sqlite"


@dataclass(frozen=True, slots=True)
class RunRecord:
    schedule: str
    tick_ms: int
    claimed_by: str
    manual: bool
    task_id: str | None
    outcome: str | None


@dataclass(frozen=True, slots=True)
class UserRun:
    """A finished run of a schedule with a ``user:``, as that user's chat history shows it."""

    schedule: str
    tick_ms: int
    request: dict[str, Any]  # {agent, text, data, contextId}
    task_id: str | None
    outcome: str
    answer: dict[str, Any] | None


def answer_json(answer: dict[str, Any] | None) -> str | None:
    if answer is None:
        return None
    text = json.dumps(answer, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= MAX_ANSWER_BYTES else json.dumps({"truncated": True})


def finished_runs(rows: Iterable[Sequence[Any]], after: Mapping[str, int], now: float) -> list[UserRun]:
    """From rows (schedule, tick, request, task_id, outcome, answer, deadline) in (schedule, tick)
    order: each schedule's runs after its mark in ``after``, up to the first still in flight (so
    a reader that keeps the latest tick it took misses none). A run whose scheduler died shows
    as such once its deadline passed."""
    found: list[UserRun] = []
    blocked: set[str] = set()
    for schedule, tick, request, task_id, outcome, answer, deadline in rows:
        if schedule in blocked or tick <= after.get(schedule, -1):
            continue
        if outcome is None and deadline > now:
            blocked.add(schedule)
            continue
        ended = outcome or "unknown: no outcome was recorded (its scheduler stopped)"
        loaded = _loaded(request) or {}
        found.append(UserRun(schedule, int(tick), loaded, task_id, ended, _loaded(answer)))
    return found


def _loaded(value: Any) -> dict[str, Any] | None:
    loaded = json.loads(value) if isinstance(value, str | bytes) else value
    return loaded if isinstance(loaded, dict) else None


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    name: str
    spec: dict[str, object]
    source: str
    paused: bool
    next_tick_ms: int | None


class ScheduleStore(Protocol):
    """The namespace's record; every method is blocking (the scheduler calls them in a thread)."""

    #: Where the record is, for logs and errors (a path, or the URL with no password).
    where: str

    def exists(self) -> bool:
        """Whether there is a record to read (False: no schedule ever ran; reading would create it)."""
        ...

    def register(self, name: str, spec: dict[str, object], source: str, next_tick_ms: int | None) -> None: ...

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
        ...

    def started(self, name: str, tick_ms: int, task_id: str | None) -> None: ...

    def ended(
        self, name: str, tick_ms: int, outcome: str, task_id: str | None, answer: dict[str, Any] | None = None
    ) -> None: ...

    def user_runs(self, user: str, after: Mapping[str, int], limit: int = 200) -> list[UserRun]:
        """``user``'s finished runs after the ticks of ``after`` (by schedule), oldest first
        (:func:`finished_runs`)."""
        ...

    def last_tick(self, name: str) -> int | None: ...

    def set_paused(self, name: str, paused: bool) -> bool: ...

    def is_paused(self, name: str) -> bool: ...

    def schedules(self) -> list[ScheduleRecord]: ...

    def runs(self, name: str | None = None, limit: int = 100) -> list[RunRecord]: ...


def open_schedule_store(namespace: str, setting: str = "") -> ScheduleStore:
    """The record of ``namespace``: PostgreSQL when ``setting`` (else ``$MESH_STORE``) is a
    ``postgresql://`` URL, else the machine's SQLite file."""
    from mesh.store import is_postgres_url, parse_store_url

    value = setting or os.environ.get(STORE_ENV, "")
    if not value:
        return SqliteScheduleStore.of(namespace)
    if not is_postgres_url(value):
        raise ConfigError(
            f"the schedules' store must be a postgresql:// URL, not {value!r} "
            f"(leave ${STORE_ENV} and --store unset for the machine's SQLite record)"
        )
    from mesh.schedules.pgstore import PostgresScheduleStore
    from mesh.store.postgres import require_driver

    require_driver()
    return PostgresScheduleStore(parse_store_url(value), namespace)


class SqliteScheduleStore:
    """The record in the machine's SQLite file (see the module doc)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.where = str(path)

    @classmethod
    def of(cls, namespace: str) -> SqliteScheduleStore:
        return cls(store_path(namespace))

    def exists(self) -> bool:
        return self.path.is_file()

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with closing(sqlite3.connect(self.path, timeout=30.0, isolation_level=None)) as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            if db.execute("PRAGMA user_version").fetchone()[0] < 1:
                columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
                for column in _ADDED_COLUMNS:
                    if column.split()[0] not in columns:
                        db.execute(f"ALTER TABLE runs ADD COLUMN {column}")
                db.execute("PRAGMA user_version = 1")
            yield db

    def register(self, name: str, spec: dict[str, object], source: str, next_tick_ms: int | None) -> None:
        """The schedule as a running scheduler has it (its pause flag kept)."""
        with self._db() as db:
            db.execute(
                "INSERT INTO schedules (name, spec, source, next_tick, seen_at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET spec=excluded.spec, source=excluded.source, "
                "next_tick=excluded.next_tick, seen_at=excluded.seen_at",
                (name, json.dumps(spec), source, next_tick_ms, time.time()),
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
        now = time.time()
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")  # the file's write lock: one claimant at a time
            try:
                if db.execute("SELECT 1 FROM runs WHERE schedule=? AND tick=?", (name, tick_ms)).fetchone():
                    return "claimed already"
                paused = db.execute("SELECT paused FROM schedules WHERE name=?", (name,)).fetchone()
                if not manual and paused is not None and paused[0]:
                    return "paused"
                running = db.execute(
                    "SELECT count(*) FROM runs WHERE schedule=? AND outcome IS NULL AND deadline > ?", (name, now)
                ).fetchone()[0]
                if running >= max_concurrent:
                    return f"{running} run(s) still in flight (max_concurrent: {max_concurrent})"
                db.execute(
                    "INSERT INTO runs (schedule, tick, claimed_by, claimed_at, deadline, manual, user_id, request) "
                    "VALUES (?,?,?,?,?,?,?,?)",
                    (name, tick_ms, by, now, now + timeout_s, int(manual), user, _dumped(request)),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return None

    def started(self, name: str, tick_ms: int, task_id: str | None) -> None:
        with self._db() as db:
            db.execute("UPDATE runs SET task_id=? WHERE schedule=? AND tick=?", (task_id, name, tick_ms))

    def ended(
        self, name: str, tick_ms: int, outcome: str, task_id: str | None, answer: dict[str, Any] | None = None
    ) -> None:
        with self._db() as db:
            db.execute(
                "UPDATE runs SET outcome=?, ended_at=?, task_id=coalesce(?, task_id), answer=? "
                "WHERE schedule=? AND tick=?",
                (outcome, time.time(), task_id, answer_json(answer), name, tick_ms),
            )
            db.execute(  # the newest RUNS_KEPT stay: a schedule every second runs for months
                "DELETE FROM runs WHERE schedule=? AND tick < (SELECT tick FROM runs WHERE schedule=? "
                "ORDER BY tick DESC LIMIT 1 OFFSET ?)",
                (name, name, RUNS_KEPT),
            )

    def last_tick(self, name: str) -> int | None:
        """The latest scheduled (not manual) tick claimed, by anyone: what ``missed:`` compares with."""
        with self._db() as db:
            row = db.execute("SELECT max(tick) FROM runs WHERE schedule=? AND manual=0", (name,)).fetchone()
        return row[0] if row is not None else None

    def user_runs(self, user: str, after: Mapping[str, int], limit: int = 200) -> list[UserRun]:
        rows: list[Any] = []
        with self._db() as db:
            names = [r[0] for r in db.execute("SELECT DISTINCT schedule FROM runs WHERE user_id=?", (user,))]
            for name in sorted(names):
                rows += db.execute(
                    "SELECT schedule, tick, request, task_id, outcome, answer, deadline FROM runs WHERE user_id=? "
                    "AND schedule=? AND tick > ? ORDER BY tick LIMIT ?",
                    (user, name, after.get(name, -1), limit),
                ).fetchall()
        return finished_runs(rows, after, time.time())

    def set_paused(self, name: str, paused: bool) -> bool:
        """Pause or resume ``name``; False when no scheduler ever registered it."""
        with self._db() as db:
            changed = db.execute("UPDATE schedules SET paused=? WHERE name=?", (int(paused), name)).rowcount
        return changed == 1

    def is_paused(self, name: str) -> bool:
        with self._db() as db:
            row = db.execute("SELECT paused FROM schedules WHERE name=?", (name,)).fetchone()
        return bool(row and row[0])

    def schedules(self) -> list[ScheduleRecord]:
        with self._db() as db:
            rows = db.execute("SELECT name, spec, source, paused, next_tick FROM schedules ORDER BY name").fetchall()
        return [ScheduleRecord(r[0], json.loads(r[1]), r[2], bool(r[3]), r[4]) for r in rows]

    def runs(self, name: str | None = None, limit: int = 100) -> list[RunRecord]:
        """The newest runs first (of ``name``, or of every schedule)."""
        query = "SELECT schedule, tick, claimed_by, manual, task_id, outcome FROM runs"
        args: tuple[object, ...] = ()
        if name is not None:
            query, args = query + " WHERE schedule=?", (name,)
        with self._db() as db:
            rows = db.execute(query + " ORDER BY claimed_at DESC LIMIT ?", (*args, limit)).fetchall()
        return [RunRecord(r[0], r[1], r[2], bool(r[3]), r[4], r[5]) for r in rows]
