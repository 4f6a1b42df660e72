"""Where a workflow keeps its runs' progress: tables of their own in the agent's task store.

The agent's task journal (:mod:`agents.sqlitejournal`) keeps the workflow's *task*; the node
states and outputs sit beside it, in the same SQLite file, in two tables of their own:

- ``workflow_runs``: one row per running workflow task: its input and who called it (user id,
  call depth and chain: what its delegations carry again after a restart; never the token);
- ``workflow_nodes``: one row per finished node (or map item, or loop iteration): its state
  and output.

A node's row is committed before the nodes that depend on it start, so a process killed at any
point restarts from the finished nodes (:mod:`agents.workflow.agent`). A run's rows are deleted
when it ends: its answer is then in the task journal, and the tables stay small. Writes go
through one thread of their own (ordered, off the event loop); the task journal's writer
shares the file (WAL; a busy timeout lets the two take turns).

``path=None`` (``task_store: ":memory:"``) keeps the same rows in memory: nothing outlives
the process, and nothing is written.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["NodeRecord", "RunRecord", "WorkflowStore"]

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


class WorkflowStore:
    """The runs and node rows of one workflow agent (see the module docstring)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
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
        db.executescript(_SCHEMA)
        self._db = db

    async def close(self) -> None:
        if self._executor is None:
            return
        await self._run(self._close)
        self._executor.shutdown(wait=False)
        self._executor = None

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    async def _run(self, fn: Any, *args: Any) -> Any:
        if self._executor is None:
            raise RuntimeError("the workflow store is closed")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # ------------------------------------------------------------------ runs

    async def load(self, task_id: str) -> tuple[RunRecord, dict[str, NodeRecord]] | None:
        """The run of ``task_id`` and its finished nodes, if a previous process started it."""
        if self._executor is None:
            run = self._memory_runs.get(task_id)
            return (run, dict(self._memory_nodes.get(task_id, {}))) if run is not None else None
        loaded: tuple[RunRecord, dict[str, NodeRecord]] | None = await self._run(self._load, task_id)
        return loaded

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
        if self._executor is None:
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
        await self._run(
            self._write, "INSERT OR REPLACE INTO workflow_runs (task_id, run) VALUES (?, ?)", (task_id, blob)
        )

    async def node_done(self, task_id: str, node: str, record: NodeRecord) -> None:
        if self._executor is None:
            self._memory_nodes.setdefault(task_id, {})[node] = record
            return
        output = json.dumps(record.output, default=str) if record.output is not None else None
        await self._run(
            self._write,
            "INSERT OR REPLACE INTO workflow_nodes (task_id, node, state, output) VALUES (?, ?, ?, ?)",
            (task_id, node, record.state, output),
        )

    async def ended(self, task_id: str) -> None:
        if self._executor is None:
            self._memory_runs.pop(task_id, None)
            self._memory_nodes.pop(task_id, None)
            return
        await self._run(self._forget, task_id)

    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise RuntimeError("the workflow store is closed")
        return self._db

    def _write(self, sql: str, values: tuple[Any, ...]) -> None:
        self._conn().execute(sql, values)

    def _forget(self, task_id: str) -> None:
        db = self._conn()
        with contextlib.suppress(sqlite3.Error), db:  # one transaction
            db.execute("DELETE FROM workflow_nodes WHERE task_id = ?", (task_id,))
            db.execute("DELETE FROM workflow_runs WHERE task_id = ?", (task_id,))
