"""Where a workflow keeps its runs' progress: a SQLite file beside the agent's task store.

The agent's task journal (:mod:`agents.sqlitejournal`) keeps the workflow's *task*; the node
states and outputs sit beside it (:func:`~agents.workflow.config.workflow_store_path`:
``<agent>.workflow.sqlite3``), in two tables:

- ``workflow_runs``: one row per running workflow task: its input and who called it (user id,
  call depth and chain: what its delegations carry again after a restart; never the token);
- ``workflow_nodes``: one row per finished node (or map item, or loop iteration): its state
  and output.

A node's row is committed before the nodes that depend on it start, so a process killed at any
point restarts from the finished nodes (:mod:`agents.workflow.agent`). A run's rows are deleted
when it ends: its answer is then in the task journal, and the tables stay small.

Durability is the task journal's: WAL with ``synchronous=NORMAL``. A committed row survives the
death of the process (``kill -9``); a crash of the machine (power loss) may lose the commits
made since the last checkpoint.

What a node waits for is one small transaction, done on the event loop itself: in WAL mode
with ``synchronous=NORMAL`` a commit is an append to the WAL file, with no fsync (~10 us),
less than the two thread hops of handing it to a writer thread would cost. The fsyncs are
the checkpoints' (copying the WAL into the file): automatic checkpoints are off, and one
thread of the store's own runs them (``PASSIVE``: they never stop a writer) after every
:data:`CHECKPOINT_EVERY` commits, and opens, closes and reads back the file. The file is the
store's alone: when it shared the task journal's, the two writers met on its write lock at
every node (the journal writes each node's start and end), and SQLite's busy handler sleeps
a millisecond or more per meeting.

``path=None`` (``task_store: ":memory:"``) keeps the same rows in memory: nothing outlives
the process, and nothing is written.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = ["CHECKPOINT_EVERY", "NodeRecord", "RunRecord", "RunStore", "WorkflowStore"]

log = logging.getLogger(__name__)

#: Commits between two checkpoints: the WAL file stays at what they write, ~4 pages each (~1.5 MB).
CHECKPOINT_EVERY = 100
#: How long a write on the loop waits for another process's lock on the file (none expected:
#: the file is this agent's; a second process serving the same agent is a configuration error).
LOOP_BUSY_TIMEOUT_S = 1.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS workflow_runs (task_id TEXT PRIMARY KEY, run BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS workflow_nodes (
    task_id TEXT NOT NULL,
    node TEXT NOT NULL,
    state TEXT NOT NULL,
    output BLOB,
    PRIMARY KEY (task_id, node)
);
"""


@dataclass(slots=True)
class RunRecord:
    """What a run needs to start again: its input and its caller."""

    input: Any
    # The message that started the run: a resumed task is handed the same one.
    message_id: str | None = None
    user_id: str | None = None
    call_depth: int = 0
    call_chain: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A finished node (``completed``, ``failed`` or ``skipped``) and its output."""

    state: str
    output: Any


class RunStore(Protocol):
    """What a workflow asks of its store: this SQLite one, or PostgreSQL's (agents.workflow.pgstore)."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def load(self, task_id: str) -> tuple[RunRecord, dict[str, NodeRecord]] | None: ...

    async def started(self, task_id: str, run: RunRecord) -> None: ...

    async def node_done(self, task_id: str, node: str, record: NodeRecord) -> None: ...

    async def ended(self, task_id: str) -> None: ...


class WorkflowStore:
    """The runs and node rows of one workflow agent (see the module docstring)."""

    def __init__(self, path: Path | None, *, checkpoint_every: int = CHECKPOINT_EVERY) -> None:
        self.path = path
        self.checkpoint_every = checkpoint_every
        self._db: sqlite3.Connection | None = None  # the loop's: every write
        self._checkpointer: sqlite3.Connection | None = None  # the thread's
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._commits = 0
        self._checkpoint: asyncio.Future[None] | None = None
        self._memory_runs: dict[str, RunRecord] = {}
        self._memory_nodes: dict[str, dict[str, NodeRecord]] = {}

    async def open(self) -> None:
        if self.path is None or self._executor is not None:
            return
        self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="workflow-store")
        await self._run(self._open)

    def _open(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=10.0, check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints are the thread's (_checkpoint_now)
        db.executescript(_SCHEMA)
        db.execute(f"PRAGMA busy_timeout={int(LOOP_BUSY_TIMEOUT_S * 1000)}")
        self._db = db
        self._checkpointer = sqlite3.connect(self.path, timeout=10.0, check_same_thread=False, isolation_level=None)

    async def close(self) -> None:
        if self._executor is None:
            return
        if self._checkpoint is not None:
            with contextlib.suppress(Exception):
                await self._checkpoint
        await self._run(self._close)
        self._executor.shutdown(wait=False)
        self._executor = None

    def _close(self) -> None:
        for db in (self._db, self._checkpointer):
            if db is not None:
                db.close()  # the last connection closing checkpoints the WAL into the file
        self._db = self._checkpointer = None

    async def _run(self, fn: Any, *args: Any) -> Any:
        if self._executor is None:
            raise RuntimeError("the workflow store is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # ------------------------------------------------------------------ runs

    async def load(self, task_id: str) -> tuple[RunRecord, dict[str, NodeRecord]] | None:
        """The run of ``task_id`` and its finished nodes, if a previous process started it."""
        if self.path is None:
            run = self._memory_runs.get(task_id)
            return (run, dict(self._memory_nodes.get(task_id, {}))) if run is not None else None
        return self._load(task_id)  # one lookup by key, on the loop (see the module docstring)

    def _load(self, task_id: str) -> tuple[RunRecord, dict[str, NodeRecord]] | None:
        row = self._conn().execute("SELECT run FROM workflow_runs WHERE task_id = ?", (task_id,)).fetchone()
        if row is None:
            return None
        run = RunRecord(**json.loads(row[0]))
        nodes = {
            node: NodeRecord(state, json.loads(output) if output is not None else None)
            for node, state, output in self._conn().execute(
                "SELECT node, state, output FROM workflow_nodes WHERE task_id = ?", (task_id,)
            )
        }
        return run, nodes

    async def started(self, task_id: str, run: RunRecord) -> None:
        if self.path is None:
            self._memory_runs[task_id] = run
            return
        blob = json.dumps(
            {
                "input": run.input,
                "message_id": run.message_id,
                "user_id": run.user_id,
                "call_depth": run.call_depth,
                "call_chain": run.call_chain,
            }
        )
        self._write("INSERT OR REPLACE INTO workflow_runs (task_id, run) VALUES (?, ?)", (task_id, blob))

    async def node_done(self, task_id: str, node: str, record: NodeRecord) -> None:
        if self.path is None:
            self._memory_nodes.setdefault(task_id, {})[node] = record
            return
        output = json.dumps(record.output, default=str) if record.output is not None else None
        self._write(
            "INSERT OR REPLACE INTO workflow_nodes (task_id, node, state, output) VALUES (?, ?, ?, ?)",
            (task_id, node, record.state, output),
        )

    async def ended(self, task_id: str) -> None:
        if self.path is None:
            self._memory_runs.pop(task_id, None)
            self._memory_nodes.pop(task_id, None)
            return
        self._forget(task_id)

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("the workflow store is closed")
        return self._db

    def _write(self, sql: str, values: tuple[Any, ...]) -> None:
        self._conn().execute(sql, values)  # autocommit: committed when it returns
        self._committed()

    def _forget(self, task_id: str) -> None:
        db = self._conn()
        try:
            db.execute("BEGIN")  # one transaction (the connection autocommits otherwise)
            db.execute("DELETE FROM workflow_nodes WHERE task_id = ?", (task_id,))
            db.execute("DELETE FROM workflow_runs WHERE task_id = ?", (task_id,))
            db.execute("COMMIT")
        except sqlite3.Error as exc:  # rows left behind are harmless: a later run of the id ignores them
            log.warning("workflow store %s: the rows of task %s stay: %s", self.path, task_id, exc)
            with contextlib.suppress(sqlite3.Error):
                db.execute("ROLLBACK")
            return
        self._committed()

    def _committed(self) -> None:
        self._commits += 1
        if self._commits % self.checkpoint_every == 0 and (self._checkpoint is None or self._checkpoint.done()):
            self._checkpoint = asyncio.ensure_future(self._run(self._checkpoint_now))

    def _checkpoint_now(self) -> None:
        if self._checkpointer is not None:
            with contextlib.suppress(sqlite3.Error):  # a busy or failed checkpoint: the next one catches up
                self._checkpointer.execute("PRAGMA wal_checkpoint(PASSIVE)")
