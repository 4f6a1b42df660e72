"""The usage store in PostgreSQL: budgets and usage shared by the replicas of several hosts.

The record of :class:`~mesh.telemetry.usage.SqliteUsageStore`, keyed by namespace too:
``mesh_llm_usage`` (a row per model response, with an id, so a write retried after its commit
was lost on the way is applied once) and ``mesh_llm_budget`` (tokens per (namespace, scope, key,
period, window), added with ``INSERT ... ON CONFLICT DO UPDATE ... RETURNING tokens``).

The event loop never waits on the network. The store's thread does every round trip:

- :meth:`~PgUsageStore.spent` answers from a cache per counter: the total the database last gave
  (an add's ``RETURNING``, or a read) plus this process's tokens not written yet. A total older
  than ``fresh_s`` (:data:`FRESH_S`) is read again in the thread while checks go on with it. A
  counter never seen is read once: in the thread when the caller awaits
  :meth:`~PgUsageStore.prefetch` (the budget check does), else synchronously.
- :meth:`~PgUsageStore.add` queues the row; the thread writes what is queued in one transaction.

So a replica sees what the others spent at most ``fresh_s`` (and a round trip) late: a budget
can be passed by what other replicas spent within that time, plus the response in flight of
each running task. While the store is unreachable, tasks go on: checks use the totals last read
(a counter never read counts this process's tokens only), rows wait in memory (at most
:data:`MAX_BACKLOG`, then the oldest are dropped and counted in :attr:`~PgUsageStore.lost`)
and are written when it is back; a warning is logged once per outage.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mesh.store import Migration, StoreUrl
from mesh.store import postgres as pg
from mesh.telemetry.usage import Counter, UsageRow, window_of

if TYPE_CHECKING:
    import psycopg

__all__ = ["COMPONENT", "FRESH_S", "MAX_BACKLOG", "MIGRATIONS", "PgUsageStore"]

log = logging.getLogger(__name__)

COMPONENT = "llm_usage"
MIGRATIONS = (
    Migration(
        1,
        (
            """CREATE TABLE IF NOT EXISTS mesh_llm_usage (
                id UUID PRIMARY KEY, namespace TEXT NOT NULL, at DOUBLE PRECISION NOT NULL,
                agent TEXT NOT NULL, user_id TEXT NOT NULL, model TEXT NOT NULL, requests INTEGER NOT NULL,
                input_tokens BIGINT NOT NULL, output_tokens BIGINT NOT NULL, cache_read_tokens BIGINT NOT NULL,
                cache_write_tokens BIGINT NOT NULL, cost_usd DOUBLE PRECISION)""",
            "CREATE INDEX IF NOT EXISTS mesh_llm_usage_at ON mesh_llm_usage (namespace, at)",
            """CREATE TABLE IF NOT EXISTS mesh_llm_budget (
                namespace TEXT NOT NULL, scope TEXT NOT NULL, key TEXT NOT NULL, period_s INTEGER NOT NULL,
                window_start BIGINT NOT NULL, tokens BIGINT NOT NULL,
                PRIMARY KEY (namespace, scope, key, period_s, window_start))""",
        ),
    ),
)
#: Seconds a counter's total is used before it is read again (the bound across replicas).
FRESH_S = 1.0
#: Rows kept while the store is unreachable; beyond, the oldest are dropped (and counted).
MAX_BACKLOG = 10_000
_RETRY_S = (0.5, 30.0)  # the first wait after a failure, and the longest
_WAIT_S = pg.CONNECT_TIMEOUT_S * 2  # what a synchronous first read or close waits at most
_FORGET_S = 600.0  # a counter not checked this long leaves the cache
_COLUMNS = (
    "namespace, at, agent, user_id, model, requests, input_tokens, output_tokens, cache_read_tokens, "
    "cache_write_tokens, cost_usd"
)
_INSERT = (  # an id written before (a retry after its answer was lost) is not written twice
    f"INSERT INTO mesh_llm_usage (id, {_COLUMNS}) VALUES ({', '.join(['%s'] * 12)}) "  # noqa: S608 - our columns
    "ON CONFLICT (id) DO NOTHING"
)
_ADD = (
    "INSERT INTO mesh_llm_budget (namespace, scope, key, period_s, window_start, tokens) SELECT %s, u.* "
    "FROM unnest(%s::text[], %s::text[], %s::integer[], %s::bigint[], %s::bigint[]) AS u "
    "ON CONFLICT (namespace, scope, key, period_s, window_start) DO UPDATE SET tokens = mesh_llm_budget.tokens "
    "+ excluded.tokens RETURNING scope, key, period_s, window_start, tokens"
)
_READ = (
    "SELECT b.scope, b.key, b.period_s, b.window_start, b.tokens FROM mesh_llm_budget b JOIN "
    "unnest(%s::text[], %s::text[], %s::integer[], %s::bigint[]) AS u(scope, key, period_s, window_start) "
    "ON b.scope = u.scope AND b.key = u.key AND b.period_s = u.period_s AND b.window_start = u.window_start "
    "WHERE b.namespace = %s"
)

_Key = tuple[str, str, int, int]  # scope, key, period_s, window start


@dataclass(slots=True)
class _Cached:
    stored: int = 0  # the database's total, as last read or returned by an add
    unwritten: int = 0  # this process's tokens queued and not written yet
    read_at: float | None = None  # monotonic; None: never read
    reading: bool = False
    used_at: float = 0.0


@dataclass(slots=True)
class _Write:
    row: UsageRow
    keys: tuple[_Key, ...]
    id: str = field(default_factory=lambda: str(uuid.uuid4()))


class PgUsageStore:
    """The usage store of one namespace in a PostgreSQL store (see the module doc)."""

    def __init__(self, url: StoreUrl, namespace: str, *, fresh_s: float = FRESH_S) -> None:
        pg.require_driver()
        self.url = url
        self.namespace = namespace
        self.where = str(url)  # never the password
        self.fresh_s = fresh_s
        #: Rows never written: dropped from a full backlog, or left when the store closed unreachable.
        self.lost = 0
        self._cond = threading.Condition(threading.Lock())
        self._cache: dict[_Key, _Cached] = {}
        self._writes: deque[_Write] = deque()
        self._reads: set[_Key] = set()
        self._waiters: list[tuple[set[_Key], Future[None]]] = []
        self._closed = False
        self._down = False
        self._retry_s = 0.0
        self._retry_at = 0.0
        self._forgot_at = 0.0
        self._thread: threading.Thread | None = None
        self._db: psycopg.Connection | None = None  # the thread's own

    # -- what the loop calls: no round trip -------------------------------------------------

    def add(self, row: UsageRow, counters: tuple[Counter, ...] = ()) -> None:
        write = _Write(row, tuple(_key(c, row.at) for c in counters))
        with self._cond:
            for key in write.keys:
                cached = self._cache.get(key)
                if cached is None:  # counted before any check read it: read it too
                    cached = self._cache[key] = _Cached(used_at=time.monotonic())
                    self._reads.add(key)
                cached.unwritten += row.tokens
            self._writes.append(write)
            self._wake()

    def spent(self, counter: Counter, now: float) -> int:
        key = _key(counter, now)
        with self._cond:
            cached = self._cache.get(key)
            if cached is not None and cached.read_at is not None:
                clock = cached.used_at = time.monotonic()
                if clock - cached.read_at > self.fresh_s and not cached.reading:
                    cached.reading = True
                    self._reads.add(key)
                    self._wake()
                return cached.stored + cached.unwritten
        future = self.prefetch((counter,), now)
        if future is not None:  # a caller that did not prefetch: its first read waits here, once
            try:
                future.result(timeout=_WAIT_S)
            except TimeoutError:
                log.warning("usage store %s: reading a budget counter took over %s s", self.where, _WAIT_S)
        with self._cond:
            cached = self._cache.setdefault(key, _Cached())
            if cached.read_at is None:
                cached.read_at = time.monotonic()  # unreadable now: counted from here, read again later
            return cached.stored + cached.unwritten

    def prefetch(self, counters: Iterable[Counter], now: float) -> Future[None] | None:
        """None when every counter's total is known, else a future done once the thread read them."""
        keys = {_key(c, now) for c in counters}
        with self._cond:
            missing = {k for k in keys if (c := self._cache.get(k)) is None or c.read_at is None}
            if not missing:
                return None
            future: Future[None] = Future()
            self._waiters.append((missing, future))
            self._reads |= missing
            self._wake()
        return future

    def _wake(self) -> None:
        """(Holding the lock.) Start the thread once; tell it there is work."""
        if self._thread is None and not self._closed:
            self._thread = threading.Thread(target=self._work, name=f"usage store {self.namespace}", daemon=True)
            self._thread.start()
        self._cond.notify()

    # -- blocking: for the command line, the tests, the end ---------------------------------

    def flush(self, timeout: float = _WAIT_S) -> bool:
        """Wait until every row taken is written; False if it could not be within ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            return self._cond.wait_for(lambda: not self._writes, timeout=max(0.0, deadline - time.monotonic()))

    def rows(self, since: float) -> list[UsageRow]:
        self.flush()
        with pg.connect(self.url) as db:
            pg.migrate(db, COMPONENT, MIGRATIONS)
            found = db.execute(
                f"SELECT {_COLUMNS} FROM mesh_llm_usage WHERE namespace = %s AND at >= %s ORDER BY at",  # noqa: S608
                (self.namespace, since),
            ).fetchall()
        return [
            UsageRow(
                at=float(r[1]),
                agent=str(r[2]),
                user=str(r[3]),
                model=str(r[4]),
                requests=int(r[5]),
                input_tokens=int(r[6]),
                output_tokens=int(r[7]),
                cache_read_tokens=int(r[8]),
                cache_write_tokens=int(r[9]),
                cost_usd=None if r[10] is None else float(r[10]),
            )
            for r in found
        ]

    def close(self) -> None:
        """Write what waits (up to a few seconds), then stop the thread."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(_WAIT_S)
            if thread.is_alive():
                log.warning("usage store %s: closed with %d usage row(s) not written", self.where, len(self._writes))

    # -- the thread ---------------------------------------------------------------------------

    def _work(self) -> None:
        gave_up = False
        solo = 0  # after a row the database refused: this many go one per transaction, to drop only it
        while True:
            with self._cond:
                while not (self._closed or self._writes or self._reads):
                    self._cond.wait()
                if self._closed and (gave_up or not self._writes):
                    break
                if not self._closed and self._down and (pause := self._retry_at - time.monotonic()) > 0:
                    self._settle(set(self._reads))  # during an outage a first check does not wait for it
                    self._cond.wait(pause)
                    continue
                writes = list(self._writes)[:1] if solo else list(self._writes)
                reads, self._reads = self._reads, set()
            try:
                self._exchange(writes, reads)
                solo = max(0, solo - 1)
            except Exception as exc:
                if _unreachable(exc):  # retried later, never the task's failure
                    self._failed(exc, reads)
                    gave_up = self._closed
                elif len(writes) > 1:
                    solo = len(writes)
                    self._requeue(reads)
                else:  # refused (data a retry does not mend): this row is dropped, said so
                    log.error("usage store %s refused a usage row or read: %s", self.where, exc)
                    solo = max(0, solo - 1)
                    with self._cond:
                        if writes:
                            self._drop(self._writes.popleft())
                        self._settle(reads)
        self._stopped()

    def _exchange(self, writes: list[_Write], reads: set[_Key]) -> None:
        db = self._connected()
        totals: dict[_Key, int] = {}
        if writes:
            with db.transaction():
                for write in writes:
                    totals.update(self._write(db, write))
        if reads:
            totals.update(dict.fromkeys(reads, 0))
            totals.update(_totals(db.execute(_READ, (*_arrays(reads), self.namespace)).fetchall()))
        clock = time.monotonic()
        with self._cond:
            for write in writes:
                self._writes.popleft()  # the thread alone takes from the left: these are the batch
                self._unwritten(write, -write.row.tokens)
            for key, total in totals.items():
                cached = self._cache.setdefault(key, _Cached(used_at=clock))
                cached.stored, cached.read_at, cached.reading = total, clock, False
            if self._down:
                log.warning("usage store %s is reachable again; the usage rows that waited are written", self.where)
            self._down, self._retry_s = False, 0.0
            self._settle(reads)
            self._forget(clock)
            self._cond.notify_all()  # flush() waits on it

    def _write(self, db: psycopg.Connection, write: _Write) -> dict[_Key, int]:
        r = write.row
        text = [_text(v) for v in (self.namespace, r.agent, r.user, r.model)]
        counts = (r.requests, r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_write_tokens)
        inserted = db.execute(_INSERT, (write.id, text[0], r.at, *text[1:], *counts, r.cost_usd)).rowcount
        if not write.keys:
            return {}
        if inserted:
            tokens = [r.tokens] * len(write.keys)
            return _totals(db.execute(_ADD, (text[0], *_arrays(write.keys), tokens)).fetchall())
        # Written before, its answer lost on the way: the totals as they are.
        return _totals(db.execute(_READ, (*_arrays(write.keys), text[0])).fetchall())

    def _connected(self) -> psycopg.Connection:
        if self._db is None or self._db.closed or self._db.broken:
            db = pg.connect(self.url)
            try:
                db.execute(f"SET statement_timeout = {int(pg.CONNECT_TIMEOUT_S * 1000)}")
                pg.migrate(db, COMPONENT, MIGRATIONS)
            except BaseException:
                db.close()
                raise
            self._db = db
        return self._db

    def _failed(self, exc: Exception, reads: set[_Key]) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
        with self._cond:
            if not self._down:
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                log.warning(
                    "usage store %s unreachable (%s): tasks go on, budgets are checked against the totals last "
                    "read, and %d usage row(s) wait to be written",
                    self.where,
                    first,
                    len(self._writes),
                )
            self._down = True
            self._retry_s = min(max(self._retry_s * 2, _RETRY_S[0]), _RETRY_S[1])
            self._retry_at = time.monotonic() + self._retry_s
            self._reads |= reads  # read again when the store is back
            self._settle(reads)
            while len(self._writes) > MAX_BACKLOG:
                self._drop(self._writes.popleft())

    def _requeue(self, reads: set[_Key]) -> None:
        with self._cond:
            self._reads |= reads

    def _settle(self, reads: set[_Key]) -> None:
        """(Holding the lock.) Answer the prefetches: what could not be read counts from now."""
        clock = time.monotonic()
        for key in reads:
            cached = self._cache.setdefault(key, _Cached(used_at=clock))
            cached.reading = False
            if cached.read_at is None:
                cached.read_at = clock
        for waiter in list(self._waiters):
            if all((c := self._cache.get(k)) is not None and c.read_at is not None for k in waiter[0]):
                self._waiters.remove(waiter)
                waiter[1].set_result(None)

    def _forget(self, clock: float) -> None:
        """(Holding the lock.) Counters of past windows and of users gone leave the cache."""
        if len(self._cache) < 1024 or clock - self._forgot_at < 60.0:
            return
        self._forgot_at = clock
        for key, cached in list(self._cache.items()):
            if clock - cached.used_at > _FORGET_S and not cached.unwritten and key not in self._reads:
                del self._cache[key]

    def _unwritten(self, write: _Write, tokens: int) -> None:
        for key in write.keys:
            if (cached := self._cache.get(key)) is not None:
                cached.unwritten += tokens

    def _drop(self, write: _Write, *, quiet: bool = False) -> None:
        """(Holding the lock.) A row that will not be written: counted in ``lost``, logged."""
        self.lost += 1
        self._unwritten(write, -write.row.tokens)
        if not quiet and (self.lost == 1 or self.lost % 1000 == 0):
            log.error("usage store %s: %d usage row(s) lost so far (unreachable too long)", self.where, self.lost)

    def _stopped(self) -> None:
        with self._cond:
            if left := len(self._writes):
                while self._writes:
                    self._drop(self._writes.popleft(), quiet=True)
                log.error(
                    "usage store %s: stopped with %d usage row(s) not written, the store out of reach (%d lost "
                    "in all); mesh usage and the budgets of other replicas miss them",
                    self.where,
                    left,
                    self.lost,
                )
            self._settle(set(self._reads))
            self._cond.notify_all()
        if self._db is not None:
            self._db.close()
            self._db = None


def _key(counter: Counter, at: float) -> _Key:
    return (counter.scope, _text(counter.key), counter.period_s, window_of(counter.period_s, at))


def _arrays(keys: Iterable[_Key]) -> tuple[list[Any], ...]:
    """The keys as four arrays (scopes, keys, periods, windows), for ``unnest``."""
    columns: tuple[list[Any], ...] = ([], [], [], [])
    for key in keys:
        for column, value in zip(columns, key, strict=True):
            column.append(value)
    return columns


def _totals(found: Iterable[Any]) -> dict[_Key, int]:
    return {(str(s), str(k), int(p), int(w)): int(t) for s, k, p, w, t in found}


def _text(value: str) -> str:
    # PostgreSQL's text holds no NUL: a user id with one must not stop every write after it.
    return value.replace("\x00", "\ufffd")


def _unreachable(exc: Exception) -> bool:
    """Whether ``exc`` says the store is out of reach (retried), not that it refused the data."""
    import psycopg

    return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError) or not isinstance(exc, psycopg.Error)
