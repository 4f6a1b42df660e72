"""The SQLite task journal: one file per agent instance, written off the event loop.

Changes are collected on the loop and written in batches (group commit): a task changed
several times before its batch is written is serialized and written once. A batch is handed
over :data:`WRITE_DELAY_S` after its first change, or two passes of the loop once
``prompt_waiters`` broker acknowledgements wait for it (half the agent's Receive Maximum, at
most :data:`PROMPT_WAITERS`), and a task still
running is left for the next batch once (usually finished by then, so written once, not twice;
the acknowledgements waiting for it wait one batch longer). Each batch is written in a few
set-wise statements, rows keyed in the order they were first written (see
:data:`agents.journalproc.SCHEMA`). The loop's writer process (:mod:`agents.journalwriter`,
one for every journal of the loop) commits the batches waiting in one transaction and tells
the loop, which then runs the :meth:`SqliteJournal.after_durable` callbacks (the broker
acknowledgements) of everything those batches covered. Answers do not wait for it
(:mod:`agents.journal`).

The bytes handed to the writer but not yet committed are bounded: above ``max_backlog_bytes``
the journal asks its owner to stop taking work (:meth:`SqliteJournal.on_backlog`; the agent
stops reading requests) until the writer has caught up to half of it. A disk slower than the
requests thus slows the intake instead of filling memory.

The file is open in the writer process only while the journal writes: it is closed once the
journal has had nothing to write for :data:`~agents.journalwriter.IDLE_CLOSE_S` and opened again
for the next batch (a SQLite connection holds ~150 KB, most of it its lookaside allocator).

WAL mode with ``synchronous=NORMAL``: a commit costs no fsync, so a crash of the process loses
nothing committed; a crash of the machine (power loss) may lose the last commits before the
next checkpoint. What is queued but not yet committed when the process dies is lost (the
changes of the last :data:`WRITE_DELAY_S`, twice that for a running task's): none of those
requests was acknowledged, so the broker redelivers them; an answer that left meanwhile reports
a state the restarted agent may not have.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from agents.journal import LoadedTasks, StoredTask
from agents.journalproc import SCHEMA, connect, in_transaction
from agents.journalwriter import JournalWriter, writer_for
from mesh.a2a import Task

if TYPE_CHECKING:
    from agents.tasks import TaskRecord

__all__ = ["PROMPT_WAITERS", "WRITE_DELAY_S", "BatchWriter", "SqliteJournal"]

log = logging.getLogger(__name__)

#: The longest a change waits to be handed to the writer with the changes after it.
WRITE_DELAY_S = 0.02
#: Acknowledgements waiting that get their batch written at once (two passes of the loop later),
#: at most: the broker sends no more than Receive Maximum (64 by default) unacknowledged messages,
#: so requests must not wait for the timer at full speed, and half the quota stays for the rest
#: (the answers to the agent's own calls come on the same connection).
PROMPT_WAITERS = 32

_Row = tuple[Any, ...]  # (seq, id, request_key, terminal, changed_at, task JSON, owner, *engine's own)


class BatchWriter(Protocol):
    """What commits a journal's batches: the SQLite writer process, or a PostgreSQL connection."""

    def register(self, journal: Any) -> int: ...

    def submit(self, jid: int, number: int, batch: tuple[Any, ...]) -> None: ...

    async def close_journal(self, jid: int) -> None: ...


@dataclass(slots=True)
class _Batch:
    """What one pass of the loop changed, numbered in the order it was handed to the writer."""

    number: int
    rows: list[_Row] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)  # task ids (for their push configurations)
    deleted_rows: list[int] = field(default_factory=list)  # the seqs of those that were written
    push_configs: dict[str, list[bytes]] = field(default_factory=dict)


class SqliteJournal:
    """A :class:`~agents.journal.TaskJournal` in a SQLite file (created with its directory)."""

    durable = True

    def __init__(
        self, path: Path, *, agent_name: str, max_backlog_bytes: int = 32_000_000, receive_maximum: int = 64
    ) -> None:
        self.path = path
        #: Where the tasks go, for messages (a file, or a store's URL without its password).
        self.where = str(path)
        #: Acknowledgements waiting that get their batch written two passes of the loop later.
        self.prompt_waiters = max(1, min(PROMPT_WAITERS, receive_maximum // 2))
        self.agent_name = agent_name
        self.max_backlog_bytes = max_backlog_bytes
        #: Bytes handed to the writer and not yet committed.
        self.backlog_bytes = 0
        self._batch_bytes: deque[tuple[int, int]] = deque()
        self._pause: Callable[[], None] | None = None
        self._resume: Callable[[], None] | None = None
        self._backlogged = False
        #: The loop the journal tells what is stored (set by :meth:`start`).
        self.loop: asyncio.AbstractEventLoop | None = None
        self._writer: BatchWriter | None = None
        self._writer_id = 0  # this journal's id with its writer
        # The batch being collected on the loop.
        # Task id -> the record, and its JSON when the caller already serialized its current state.
        self._dirty: dict[str, tuple[TaskRecord, bytes | None]] = {}
        self._deleted: list[str] = []
        self._deleted_rows: list[int] = []
        self._seqs: dict[str, int] = {}  # the seq of each task written (see agents.journalproc.SCHEMA)
        self._next_seq = 1
        self._push: dict[str, list[bytes]] = {}
        self._flush_scheduled = False  # a flush is due two passes of the loop from now
        self._flush_timer: asyncio.TimerHandle | None = None  # a flush is due WRITE_DELAY_S after a change
        self._handed = 0  # number of the last batch handed to the writer
        self._stored = 0  # number of the last batch committed
        # (batch number, callback, whether it already waited one batch longer for a held task)
        self._waiting: list[tuple[int, Callable[[], None], bool]] = []
        self._held: set[str] = set()  # running tasks the last batch left for the next one
        self._write_all = False  # the next batch holds no running task back
        self._failing = False
        self._closed = False

    # ------------------------------------------------------------------ opening

    def load(self) -> LoadedTasks:
        """Open the file and read its tasks; blocking, run it off the loop. No file: nothing to
        read, and the writer creates it with the first task (1,000 agents start without 1,000
        file creations)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if not self.path.exists():
            return LoadedTasks()
        db = connect(self.path)
        try:
            db.execute("PRAGMA journal_mode=WAL")  # kept in the file: later connections have it
            db.executescript(SCHEMA)
            _migrate(db)
            loaded, self._seqs = _read(db)
            self._next_seq = max(self._seqs.values(), default=0) + 1
            return loaded
        finally:
            db.close()  # the writer opens it when there is something to write

    def on_backlog(self, pause: Callable[[], None], resume: Callable[[], None]) -> None:
        """What to call when the uncommitted bytes pass ``max_backlog_bytes``, and once they are half."""
        self._pause, self._resume = pause, resume

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Start writing (after :meth:`load`), telling ``loop`` what is stored."""
        self.loop = loop
        self._writer = self._make_writer(loop)
        self._writer_id = self._writer.register(self)

    def _make_writer(self, loop: asyncio.AbstractEventLoop) -> BatchWriter:
        writer: JournalWriter = writer_for(loop)
        return writer

    # ------------------------------------------------------------------ the loop side

    def changed(self, record: TaskRecord, task_json: bytes | None = None) -> None:
        if not self._closed:
            self._dirty[record.id] = (record, task_json)
            self._schedule_flush()

    def forgotten(self, task_id: str) -> None:
        if not self._closed:
            self._dirty.pop(task_id, None)
            self._deleted.append(task_id)
            if (seq := self._seqs.pop(task_id, None)) is not None:
                self._deleted_rows.append(seq)
            self._schedule_flush()

    def push_configs(self, task_id: str, configs: list[bytes]) -> None:
        if not self._closed:
            self._push[task_id] = configs
            self._schedule_flush()

    def after_durable(self, callback: Callable[[], None]) -> None:
        if self._closed:
            callback()
        elif self._flush_scheduled or self._flush_timer is not None:
            self._waiting.append((self._handed + 1, callback, False))
            if len(self._waiting) >= self.prompt_waiters:
                self._schedule_flush(promptly=True)
        elif self._handed > self._stored:
            self._waiting.append((self._handed, callback, False))
        else:
            callback()

    async def close(self) -> None:
        """Write what is pending, stop the writer and close the file (later changes are not kept)."""
        if self._closed:
            return
        self._closed = True
        if self._flush_scheduled or self._flush_timer is not None:
            self._write_all = True
            self._flush()
        if self._writer is not None:  # what was handed over is committed before the file closes
            writer, self._writer = self._writer, None
            await writer.close_journal(self._writer_id)
        self._release(self._handed)

    def _schedule_flush(self, *, promptly: bool = False) -> None:
        if self._flush_scheduled or self.loop is None:
            return
        if not promptly:
            if self._flush_timer is None:
                self._flush_timer = self.loop.call_later(WRITE_DELAY_S, self._flush_due)
            return
        self._flush_scheduled = True
        # Two passes later: a task created and finished by the same request is written once.
        self.loop.call_soon(self.loop.call_soon, self._flush_if_scheduled)

    def _flush_if_scheduled(self) -> None:
        if self._flush_scheduled:  # not written meanwhile by the timer or close()
            self._flush()

    def _flush_due(self) -> None:
        self._flush_timer = None
        self._flush()

    def _flush(self) -> None:
        """Hand what changed to the writer as one batch (running tasks but once held back)."""
        self._flush_scheduled = False
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        self._handed += 1
        batch = _Batch(self._handed, deleted=self._deleted, deleted_rows=self._deleted_rows, push_configs=self._push)
        now = time.time()
        held: dict[str, tuple[TaskRecord, bytes | None]] = {}
        for task_id, (record, known_json) in self._dirty.items():
            if not self._write_all and not record.is_terminal and task_id not in self._held:
                # Running: most likely finished by the next batch, then written once, not twice.
                held[task_id] = (record, known_json)
                continue
            try:
                task_json = known_json if known_json is not None else record.task.to_json_bytes()
            except ValueError as exc:  # text no JSON can carry (a lone surrogate from a handler)
                log.warning("%s: task %s is not stored: %s", self.agent_name, record.id, exc)
                continue
            if (seq := self._seqs.get(task_id)) is None:
                seq = self._seqs[task_id] = self._next_seq
                self._next_seq += 1
            batch.rows.append(self._row(seq, record, now, task_json))
        self._dirty, self._deleted, self._deleted_rows, self._push = held, [], [], {}
        self._held, self._write_all = set(held), False
        if held:  # the next batch writes them, however they are by then; what waits for this one waits for it
            self._waiting = [
                (n + 1, c, True) if n == batch.number and not moved else (n, c, moved) for n, c, moved in self._waiting
            ]
            self._schedule_flush(promptly=len(self._waiting) >= self.prompt_waiters)
        size = sum(len(row[5]) for row in batch.rows) + sum(
            map(len, (c for cs in batch.push_configs.values() for c in cs))
        )
        self._batch_bytes.append((batch.number, size))
        self.backlog_bytes += size
        if self.backlog_bytes > self.max_backlog_bytes and not self._backlogged and self._pause is not None:
            self._backlogged = True
            log.info(
                "%s: %d bytes wait for the disk; taking no requests until half are stored",
                self.agent_name,
                self.backlog_bytes,
            )
            self._pause()
        if self._writer is None:  # a flush is scheduled only once started
            raise RuntimeError("the journal's writer is not started: call start() first")
        self._writer.submit(
            self._writer_id, batch.number, (batch.rows, batch.deleted, batch.deleted_rows, batch.push_configs)
        )

    def _row(self, seq: int, record: TaskRecord, now: float, task_json: bytes) -> _Row:
        """The row of a task in a batch (another engine may add columns after these)."""
        return (seq, record.id, record.request_key, int(record.is_terminal), now, task_json, record.owner)

    def stored_up_to(self, number: int, error: str | None = None) -> None:
        """On the loop: the writer committed the batches up to ``number`` (or failed to, saying
        ``error``: they are done with all the same, or acknowledgements would wait forever)."""
        if error is not None:
            self._report_failure(error)
        elif self._failing:
            log.warning("%s: writing tasks to %s works again", self.agent_name, self.where)
            self._failing = False
        self._stored = max(self._stored, number)
        while self._batch_bytes and self._batch_bytes[0][0] <= number:
            self.backlog_bytes -= self._batch_bytes.popleft()[1]
        if self._backlogged and self.backlog_bytes <= self.max_backlog_bytes // 2 and self._resume is not None:
            self._backlogged = False
            self._resume()
        self._release(self._stored)

    def _release(self, number: int) -> None:
        waiting = self._waiting
        if not waiting:
            return
        ready = 0
        while ready < len(waiting) and waiting[ready][0] <= number:
            ready += 1
        if not ready:
            return
        due, self._waiting = waiting[:ready], waiting[ready:]
        for _number, callback, _moved in due:
            try:
                callback()
            except Exception:
                log.exception("%s: a callback waiting for the task store failed", self.agent_name)

    def _report_failure(self, error: str) -> None:
        if not self._failing:
            log.error(
                "%s: writing tasks to %s failed: %s; tasks are served from memory but will not survive "
                "a restart until writing works again (disk full? permissions?)",
                self.agent_name,
                self.where,
                error,
            )
        self._failing = True


def _migrate(db: sqlite3.Connection) -> None:
    """Bring a journal written by an older version up to the schema: its ``tasks`` table (keyed
    by task id) becomes ``task_rows`` in the order the tasks last changed, and tasks written
    before owners were kept get none (only the agent's operators see them, as before)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'tasks'").fetchone() is None:
        return
    columns = {row[1] for row in db.execute("PRAGMA table_info(tasks)")}
    owner = "owner" if "owner" in columns else "NULL"  # a column name or NULL: no outside text in the SQL
    copy = (
        "INSERT INTO task_rows (id, request_key, terminal, changed_at, task, owner) "
        "SELECT id, request_key, terminal, changed_at, task, {owner} FROM tasks ORDER BY changed_at"
    )
    in_transaction(db, [(copy.format(owner=owner), ()), ("DROP TABLE tasks", ())])


def _read(db: sqlite3.Connection) -> tuple[LoadedTasks, dict[str, int]]:
    """The stored tasks, and the seq of each."""
    loaded = LoadedTasks()
    seqs: dict[str, int] = {}
    now = time.time()
    bad = 0
    for seq, task_id, request_key, changed_at, task_json, owner in db.execute(
        "SELECT seq, id, request_key, changed_at, task, owner FROM task_rows ORDER BY changed_at"
    ):
        try:
            task = Task.model_validate_json(task_json)
        except ValueError:
            bad += 1
            db.execute("DELETE FROM task_rows WHERE seq = ?", (seq,))
            continue
        if (earlier := seqs.get(task_id)) is not None:  # never written twice; if so, the later row holds
            db.execute("DELETE FROM task_rows WHERE seq = ?", (earlier,))
            loaded.tasks = [stored for stored in loaded.tasks if stored.task.id != task_id]
        seqs[task_id] = seq
        loaded.tasks.append(StoredTask(task, request_key, max(0.0, now - changed_at), owner))
    if bad:
        log.warning("dropped %d stored task(s) that no longer parse as A2A tasks", bad)
    for task_id, config in db.execute("SELECT task_id, config FROM push_configs ORDER BY task_id, position"):
        loaded.push_configs.setdefault(task_id, []).append(config)
    return loaded, seqs
