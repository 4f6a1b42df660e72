"""A workflow's runs and node rows in PostgreSQL: the ``store:`` of a workflow agent.

The same rows as :class:`~agents.workflow.store.WorkflowStore` (a run's input and caller, one
row per finished node), keyed by namespace and agent too, so every replica of the workflow
reads them: a replica that takes over a dead one's running workflow (``on_owner_lost: resume``,
:mod:`agents.takeover`) resumes it from the nodes that one recorded. A node's row is committed
before the nodes that depend on it start, as on SQLite.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from agents.workflow.store import NodeRecord, RunRecord
from mesh.store import Migration, StoreUrl
from mesh.store import postgres as pg

if TYPE_CHECKING:
    from psycopg_pool import AsyncConnectionPool

__all__ = ["MIGRATIONS", "PostgresWorkflowStore"]

COMPONENT = "workflow_store"
MIGRATIONS = (
    Migration(
        1,
        (
            """CREATE TABLE IF NOT EXISTS mesh_workflow_runs (
                namespace TEXT NOT NULL, agent TEXT NOT NULL, task_id TEXT NOT NULL, run JSONB NOT NULL,
                PRIMARY KEY (namespace, agent, task_id))""",
            """CREATE TABLE IF NOT EXISTS mesh_workflow_nodes (
                namespace TEXT NOT NULL, agent TEXT NOT NULL, task_id TEXT NOT NULL, node TEXT NOT NULL,
                state TEXT NOT NULL, output JSONB,
                PRIMARY KEY (namespace, agent, task_id, node))""",
        ),
    ),
)


class PostgresWorkflowStore:
    """The runs and node rows of one workflow agent, shared by its replicas."""

    def __init__(self, url: StoreUrl, *, namespace: str, agent: str) -> None:
        self.url = url
        self.path = None  # not a file (what the SQLite store's readers ask)
        self._key = (namespace, agent)
        self._pool: AsyncConnectionPool | None = None

    async def open(self) -> None:
        if self._pool is not None:
            return
        await asyncio.to_thread(self._migrate)
        self._pool = await pg.open_pool(self.url, max_size=2)

    def _migrate(self) -> None:
        with pg.connect(self.url) as db:
            pg.migrate(db, COMPONENT, MIGRATIONS)

    async def close(self) -> None:
        if self._pool is not None:
            pool, self._pool = self._pool, None
            await pool.close()

    def _connected(self) -> AsyncConnectionPool:
        if self._pool is None:
            raise RuntimeError("the workflow store is closed")
        return self._pool

    async def load(self, task_id: str) -> tuple[RunRecord, dict[str, NodeRecord]] | None:
        async with self._connected().connection() as db:
            cursor = await db.execute(
                "SELECT run FROM mesh_workflow_runs WHERE namespace = %s AND agent = %s AND task_id = %s",
                (*self._key, task_id),
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            cursor = await db.execute(
                "SELECT node, state, output FROM mesh_workflow_nodes WHERE namespace = %s AND agent = %s "
                "AND task_id = %s",
                (*self._key, task_id),
            )
            nodes = {str(node): NodeRecord(str(state), output) for node, state, output in await cursor.fetchall()}
        return RunRecord(**row[0]), nodes

    async def started(self, task_id: str, run: RunRecord) -> None:
        blob = {
            "input": run.input,
            "message_id": run.message_id,
            "user_id": run.user_id,
            "call_depth": run.call_depth,
            "call_chain": run.call_chain,
        }
        await self._write(
            "INSERT INTO mesh_workflow_runs (namespace, agent, task_id, run) VALUES (%s, %s, %s, %s) "
            "ON CONFLICT (namespace, agent, task_id) DO UPDATE SET run = excluded.run",
            (*self._key, task_id, json.dumps(blob)),
        )

    async def node_done(self, task_id: str, node: str, record: NodeRecord) -> None:
        output = json.dumps(record.output, default=str) if record.output is not None else None
        await self._write(
            "INSERT INTO mesh_workflow_nodes (namespace, agent, task_id, node, state, output) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (namespace, agent, task_id, node) "
            "DO UPDATE SET state = excluded.state, output = excluded.output",
            (*self._key, task_id, node, record.state, output),
        )

    async def ended(self, task_id: str) -> None:
        async with self._connected().connection() as db, db.transaction():
            for table in ("mesh_workflow_nodes", "mesh_workflow_runs"):
                await db.execute(
                    f"DELETE FROM {table} WHERE namespace = %s AND agent = %s AND task_id = %s",  # noqa: S608 - our tables
                    (*self._key, task_id),
                )

    async def _write(self, sql: Any, values: tuple[Any, ...]) -> None:
        async with self._connected().connection() as db:
            await db.execute(sql, values)
