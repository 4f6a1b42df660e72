"""The workflow store's file: rows committed as each write returns, and a WAL kept small by its checkpoints."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from agents.workflow.store import CHECKPOINT_EVERY, NodeRecord, RunRecord, WorkflowStore

OUTPUT = {"text": "x" * 2000, "data": None, "task_id": "t", "state": "completed"}


def rows(path: Path, task_id: str) -> list[str]:
    """The node rows of ``task_id`` as another connection (another process) sees them."""
    with contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
        query = "SELECT node FROM workflow_nodes WHERE task_id = ? ORDER BY node"
        return [node for (node,) in db.execute(query, (task_id,))]


async def test_a_node_row_is_committed_when_node_done_returns(tmp_path: Path) -> None:
    path = tmp_path / "flow.workflow.sqlite3"
    store = WorkflowStore(path)
    await store.open()
    try:
        await store.started("t1", RunRecord(input={"text": "go"}, message_id="m1"))
        await store.node_done("t1", "first", NodeRecord("completed", OUTPUT))
        assert rows(path, "t1") == ["first"]  # no close, no flush: already in the file's WAL
        loaded = await store.load("t1")
        assert loaded is not None and loaded[0].message_id == "m1" and loaded[1]["first"].output == OUTPUT
        await store.ended("t1")
        assert rows(path, "t1") == [] and await store.load("t1") is None
    finally:
        await store.close()


async def largest_wal(path: Path, checkpoint_every: int, runs: int) -> int:
    """The largest the store's WAL file grew while ``runs`` runs of 10 nodes went through it."""
    wal = path.with_name(path.name + "-wal")
    store = WorkflowStore(path, checkpoint_every=checkpoint_every)
    await store.open()
    largest = 0
    try:
        for run in range(runs):
            for node in range(10):
                await store.node_done(f"t{run}", f"n{node}", NodeRecord("completed", OUTPUT))
            await store.ended(f"t{run}")
            if store._checkpoint is not None:
                await store._checkpoint  # the thread's checkpoint, as the loop would let it run
            largest = max(largest, wal.stat().st_size)
    finally:
        await store.close()
    assert not wal.exists() or wal.stat().st_size == 0  # the last close folded it into the file
    return largest


async def test_checkpoints_keep_the_wal_small(tmp_path: Path) -> None:
    runs = 8 * CHECKPOINT_EVERY // 11  # 10 nodes and one end per run: eight checkpoints' worth of commits
    unchecked = await largest_wal(tmp_path / "never.workflow.sqlite3", 10**9, runs)  # SQLite's own are off
    checked = await largest_wal(tmp_path / "flow.workflow.sqlite3", CHECKPOINT_EVERY, runs)
    # Each commit appends its pages to the WAL; a checkpoint lets the next commit start it over.
    assert 0 < checked < unchecked / 4, (checked, unchecked)
