"""What LLM agents spend: the usage store (tokens and cost per request), and the budget counters.

One SQLite file per namespace, ``<state dir>/<namespace>/llm-usage.sqlite3`` (beside the task
journals), shared by every agent and replica on the host (WAL, a busy timeout). Two tables:

- ``llm_usage``: one row per model run segment (agent, user, model, tokens, cost), what
  ``mesh usage`` sums;
- ``llm_budget``: tokens per (scope, key, period, window), the counters a budget check reads
  with one primary-key lookup (windows are aligned to the epoch: a ``1d`` budget resets at
  00:00 UTC).

:class:`UsageStore` is the interface (issue 42 adds PostgreSQL beside :class:`SqliteUsageStore`).
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from mesh.config.statedir import namespace_state_dir

__all__ = ["MEMORY", "Counter", "SqliteUsageStore", "UsageRow", "UsageStore", "usage_path", "window_of"]

MEMORY = ":memory:"
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

    def rows(self, since: float) -> list[UsageRow]:
        """The rows stored since ``since`` (epoch seconds), oldest first."""
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
