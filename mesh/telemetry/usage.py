"""What LLM agents spend: the usage store (tokens and cost per request), and the budget counters.

One SQLite file per namespace, ``<state dir>/<namespace>/llm-usage.sqlite3`` (beside the task
journals), shared by every agent and replica on the host (WAL, a busy timeout). Two tables:

- ``llm_usage``: one row per model run segment (agent, user, model, tokens, cost), what
  ``mesh usage`` sums;
- ``llm_budget``: tokens per (scope, key, period, window), the counters a budget check reads
  with one primary-key lookup (windows are aligned to the epoch: a ``1d`` budget resets at
  00:00 UTC).

:class:`UsageStore` is the interface; :mod:`mesh.telemetry.pgusage` keeps the same record in
PostgreSQL, shared by the hosts. :func:`open_usage_store` chooses: the ``usage_store`` setting
when set (a ``postgresql://`` URL, a SQLite path or ``:memory:``), else the agent's task store
(``store:``) when it is PostgreSQL, else ``$MESH_STORE`` when it is, else this file.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mesh.config.statedir import namespace_state_dir

__all__ = [
    "COMMIT_DELAY_S",
    "MEMORY",
    "STORE_ENV",
    "Counter",
    "SqliteUsageStore",
    "UsageRow",
    "UsageStore",
    "open_usage_store",
    "usage_path",
    "window_of",
]

log = logging.getLogger(__name__)

#: How long rows wait to be written together (the rows a crash can lose).
COMMIT_DELAY_S = 0.05
MEMORY = ":memory:"
STORE_ENV = "MESH_STORE"
_FILE = "llm-usage.sqlite3"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS llm_usage (
    at REAL NOT NULL, agent TEXT NOT NULL, user TEXT NOT NULL, model TEXT NOT NULL,
    requests INTEGER NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
    cache_read_tokens INTEGER NOT NULL, cache_write_tokens INTEGER NOT NULL, cost_usd REAL
);
CREATE INDEX IF NOT EXISTS llm_usage_at ON llm_usage (at);
CREATE TABLE IF NOT EXISTS llm_budget (
    scope TEXT NOT NULL, key TEXT NOT NULL, period_s INTEGER NOT NULL, window INTEGER NOT NULL,
    tokens INTEGER NOT NULL, PRIMARY KEY (scope, key, period_s, window)
) WITHOUT ROWID;
"""


@dataclass(frozen=True, slots=True)
class UsageRow:
    """What one run segment of an LLM agent used."""

    at: float
    agent: str
    user: str
    model: str
    requests: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Counter:
    """A budget's counter: ``scope`` (``user`` or ``agent``), whose, and its period in seconds."""

    scope: str
    key: str
    period_s: int


def window_of(period_s: int, now: float) -> int:
    """The start (epoch seconds) of the window of ``period_s`` that holds ``now``."""
    return int(now) // period_s * period_s


class UsageStore(Protocol):
    def add(self, row: UsageRow, counters: tuple[Counter, ...] = ()) -> None:
        """Store ``row`` and add its tokens to each counter's current window."""

    def spent(self, counter: Counter, now: float) -> int:
        """Tokens counted in the counter's window holding ``now``."""
        ...

    def prefetch(self, counters: Iterable[Counter], now: float) -> Future[None] | None:
        """None when :meth:`spent` can answer every counter at once, else a future done when it can
        (a store across the network reads them off the loop)."""
        ...

    def rows(self, since: float) -> list[UsageRow]:
        """The rows stored since ``since`` (epoch seconds), oldest first."""
        ...

    def flush(self, timeout: float = ...) -> bool:
        """Wait until what :meth:`add` took is stored; False if it could not be within ``timeout``."""
        ...

    def close(self) -> None: ...


class SqliteUsageStore:
    """The usage store in one SQLite file (or in memory).

    Group commit: on an event loop, :meth:`add` queues the row and counts its tokens as
    unwritten, and what is queued is written in one transaction :data:`COMMIT_DELAY_S` later, so
    a model response's record costs the loop an append, not a commit (off a loop it is written
    at once). :meth:`spent` is the file's total plus this process's unwritten tokens, under the
    lock the writes hold, so a check never counts a row twice or misses one. A crash loses at
    most the rows of that delay; :meth:`close` writes what waits. (A thread writing instead
    costs more: its wake-ups contend with the loop for the interpreter.)
    """

    def __init__(self, path: Path | str) -> None:
        if str(path) != MEMORY:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.where = str(path)
        #: Rows never written (the disk refused them); logged.
        self.lost = 0
        # Shared by threads (mesh usage reads from its own); a lock keeps one statement at a time.
        self._db = sqlite3.connect(str(path), timeout=5.0, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        self._queue: list[tuple[UsageRow, list[_Key]]] = []  # each row with its counters' windows
        self._unwritten: dict[_Key, int] = {}
        self._commit: asyncio.TimerHandle | None = None
        self._commit_loop: asyncio.AbstractEventLoop | None = None
        with self._lock:
            if str(path) != MEMORY:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)

    def add(self, row: UsageRow, counters: tuple[Counter, ...] = ()) -> None:
        with self._lock:
            keys = _keys(counters, row.at)
            for key in keys:
                self._unwritten[key] = self._unwritten.get(key, 0) + row.tokens
            self._queue.append((row, keys))
            loop = _running_loop()
            if loop is not None:
                # A commit due on another loop (maybe gone) is left to it: this loop gets its own.
                if self._commit is None or self._commit_loop is not loop:
                    self._commit, self._commit_loop = loop.call_later(COMMIT_DELAY_S, self._commit_queued), loop
                return
        self.flush()  # no loop: nothing waits on this thread but the caller

    def spent(self, counter: Counter, now: float) -> int:
        key = _key(counter, now)
        with self._lock:
            found = self._db.execute(
                "SELECT tokens FROM llm_budget WHERE scope = ? AND key = ? AND period_s = ? AND window = ?", key
            ).fetchone()
            return (int(found[0]) if found else 0) + self._unwritten.get(key, 0)

    def prefetch(self, counters: Iterable[Counter], now: float) -> Future[None] | None:
        return None  # a local read: spent() answers at once

    def flush(self, timeout: float = 0.0) -> bool:
        """Write what is queued now (``timeout`` is the interface's: this never waits on others)."""
        with self._lock:
            if self._commit is not None and _running_loop() is self._commit_loop:
                self._commit.cancel()  # (from another thread it fires later and finds nothing to write)
            self._commit = self._commit_loop = None
            batch, self._queue = self._queue, []
            try:
                self._write(batch)
            except BaseException:
                self.lost += len(batch)
                raise
            finally:
                for row, keys in batch:  # written or lost: no longer unwritten
                    for key in keys:
                        if left := self._unwritten.pop(key) - row.tokens:
                            self._unwritten[key] = left
        return True

    def rows(self, since: float) -> list[UsageRow]:
        self.flush()
        with self._lock:
            found = self._db.execute("SELECT * FROM llm_usage WHERE at >= ? ORDER BY at", (since,)).fetchall()
        return [UsageRow(*r) for r in found]

    def close(self) -> None:
        try:
            self.flush()
        except sqlite3.Error as exc:
            log.warning("usage store %s did not take usage rows at its close: %s", self.where, exc)
        finally:
            with self._lock:
                self._db.close()

    def _commit_queued(self) -> None:
        try:
            self.flush()
        except sqlite3.Error as exc:  # a full disk must not fail the tasks the tokens were spent on
            log.warning("usage store %s did not take usage rows: %s (%d lost so far)", self.where, exc, self.lost)

    def _write(self, batch: list[tuple[UsageRow, list[_Key]]]) -> None:
        """(Holding the lock.) ``batch`` in one transaction."""
        if not batch:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            self._db.executemany(
                "INSERT INTO llm_usage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [_values(row) for row, _ in batch]
            )
            self._db.executemany(
                "INSERT INTO llm_budget VALUES (?, ?, ?, ?, ?) ON CONFLICT (scope, key, period_s, window) "
                "DO UPDATE SET tokens = tokens + excluded.tokens",
                [(*key, row.tokens) for row, keys in batch for key in keys],
            )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise


_Key = tuple[str, str, int, int]  # scope, key, period_s, window start


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _key(counter: Counter, at: float) -> _Key:
    return (counter.scope, counter.key, counter.period_s, window_of(counter.period_s, at))


def _keys(counters: Iterable[Counter], at: float) -> list[_Key]:
    return [_key(c, at) for c in counters]


def _values(row: UsageRow) -> tuple[object, ...]:
    return (
        row.at,
        row.agent,
        row.user,
        row.model,
        row.requests,
        row.input_tokens,
        row.output_tokens,
        row.cache_read_tokens,
        row.cache_write_tokens,
        row.cost_usd,
    )


def usage_path(namespace: str, store: str = "") -> Path | str:
    """The usage store of ``namespace``: ``store`` if set (a path, or ``:memory:``), else its state dir's file."""
    if store == MEMORY:
        return MEMORY
    if store:
        return Path(store).expanduser()
    return namespace_state_dir(namespace) / _FILE


def open_usage_store(
    namespace: str, setting: str = "", *, task_store: str = "", environ: Mapping[str, str] | None = None
) -> UsageStore:
    """The usage store of ``namespace`` (see the module doc for which); ConfigError for a bad URL.

    ``setting`` wins, so an agent can keep its usage apart from its tasks; an agent whose
    tasks are shared in PostgreSQL shares its budgets there too with no setting of its own.
    """
    from mesh.store import is_postgres_url, parse_store_url

    env = os.environ if environ is None else environ
    shared = next((v for v in (setting, task_store, env.get(STORE_ENV, "")) if is_postgres_url(v)), "")
    if shared and (shared == setting or not setting):
        from mesh.telemetry.pgusage import PgUsageStore

        return PgUsageStore(parse_store_url(shared, dict(env)), namespace)
    return SqliteUsageStore(usage_path(namespace, setting))
