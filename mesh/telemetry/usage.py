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
    """The usage store in one SQLite file (or in memory)."""

    def __init__(self, path: Path | str) -> None:
        if str(path) != MEMORY:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        # Shared by threads (mesh usage reads from its own); a lock keeps one statement at a time.
        self._db = sqlite3.connect(str(path), timeout=5.0, check_same_thread=False, isolation_level=None)
        self._lock = threading.Lock()
        with self._lock:
            if str(path) != MEMORY:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)

    def add(self, row: UsageRow, counters: tuple[Counter, ...] = ()) -> None:
        values = (
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
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.execute("INSERT INTO llm_usage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
                for c in counters:
                    self._db.execute(
                        "INSERT INTO llm_budget VALUES (?, ?, ?, ?, ?) ON CONFLICT (scope, key, period_s, window) "
                        "DO UPDATE SET tokens = tokens + excluded.tokens",
                        (c.scope, c.key, c.period_s, window_of(c.period_s, row.at), row.tokens),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def spent(self, counter: Counter, now: float) -> int:
        window = window_of(counter.period_s, now)
        with self._lock:
            found = self._db.execute(
                "SELECT tokens FROM llm_budget WHERE scope = ? AND key = ? AND period_s = ? AND window = ?",
                (counter.scope, counter.key, counter.period_s, window),
            ).fetchone()
        return int(found[0]) if found else 0

    def prefetch(self, counters: Iterable[Counter], now: float) -> Future[None] | None:
        return None  # a local read: spent() answers at once

    def flush(self, timeout: float = 0.0) -> bool:
        return True  # add() wrote before it returned

    def rows(self, since: float) -> list[UsageRow]:
        with self._lock:
            found = self._db.execute("SELECT * FROM llm_usage WHERE at >= ? ORDER BY at", (since,)).fetchall()
        return [UsageRow(*r) for r in found]

    def close(self) -> None:
        with self._lock:
            self._db.close()


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
