"""The tasks of an agent's replicas in the shared store: read any, claim a dead one's.

Every replica of an agent on a PostgreSQL store (:class:`~agents.pgjournal.PostgresJournal`)
keeps its tasks in the same table. :class:`SharedTasks` is what a replica asks of the others'
rows: a task it does not hold (``tasks/get``, ``tasks/list``, and to find the replica to which
``tasks/cancel`` and ``tasks/resubscribe`` are forwarded), and the claim by which it takes over
the running tasks of a replica that died (:mod:`agents.takeover`). A claim is one ``UPDATE``
conditioned on the old owner: of replicas claiming together, exactly one gets each task.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from agents.pgjournal import PostgresJournal
from agents.tasks import TaskRecord
from mesh.a2a import Task

__all__ = ["SharedTask", "SharedTasks"]

log = logging.getLogger(__name__)

_COLUMNS = "id, task, owner, request_key, instance, terminal, lease_until > mesh_now()"


@dataclass(frozen=True, slots=True)
class SharedTask:
    """A task as the shared store holds it."""

    task: Task
    owner: str | None
    request_key: str | None
    #: The replica that runs it (or ran it).
    instance: str
    terminal: bool
    #: Whether that replica's lease on it still runs (for a task not terminal).
    leased: bool

    def record(self) -> TaskRecord:
        """A record of the task for answering (not added to any store)."""
        record = TaskRecord(task=self.task, request_key=self.request_key, owner=self.owner)
        if self.terminal:
            record.settled.set()
        return record


class SharedTasks:
    """The agent's rows in the shared store, as one replica sees them."""

    def __init__(self, journal: PostgresJournal) -> None:
        self.journal = journal
        self._key = (journal.namespace, journal.agent_name)

    @property
    def instance(self) -> str:
        return self.journal.instance

    async def get(self, task_id: str) -> SharedTask | None:
        """The task ``task_id`` of the agent, whichever replica ran it."""
        pool = await self.journal.connected()
        async with pool.connection() as db:
            cursor = await db.execute(
                f"SELECT {_COLUMNS} FROM mesh_tasks WHERE namespace = %s AND agent = %s AND id = %s",  # noqa: S608 - constant columns
                (*self._key, task_id),
            )
            row = await cursor.fetchone()
        found = _parsed([row] if row is not None else [])
        return found[0] if found else None

    async def all(self) -> list[SharedTask]:
        """Every task of the agent the store keeps (retention bounds them)."""
        pool = await self.journal.connected()
        async with pool.connection() as db:
            cursor = await db.execute(
                f"SELECT {_COLUMNS} FROM mesh_tasks WHERE namespace = %s AND agent = %s",  # noqa: S608 - constant columns
                self._key,
            )
            rows = await cursor.fetchall()
        return _parsed(rows)

    async def claim(self, *, dead: str | None = None, task_id: str | None = None) -> list[SharedTask]:
        """Take over the running tasks of replica ``dead`` (its will came), else those whose
        lease lapsed; ``task_id``: only that one. What this replica now owns."""
        pool = await self.journal.connected()
        condition = "instance = %s" if dead is not None else "lease_until < mesh_now()"
        params: list[object] = [self.journal.lease_s, self.instance, *self._key, self.instance]
        if dead is not None:
            params.append(dead)
        only = ""
        if task_id is not None:
            only = " AND id = %s"
            params.append(task_id)
        async with pool.connection() as db:
            cursor = await db.execute(
                "UPDATE mesh_tasks SET lease_until = mesh_now() + %s, instance = %s WHERE namespace = %s "  # noqa: S608
                f"AND agent = %s AND NOT terminal AND instance <> %s AND {condition}{only} RETURNING {_COLUMNS}",
                params,
            )
            rows = await cursor.fetchall()
        return _parsed(rows)

    async def taken_from_me(self, task_ids: Iterable[str]) -> set[str]:
        """Which of ``task_ids`` (running here) the store says another replica owns now."""
        ids = list(task_ids)
        if not ids:
            return set()
        pool = await self.journal.connected()
        async with pool.connection() as db:
            cursor = await db.execute(
                "SELECT id FROM mesh_tasks WHERE namespace = %s AND agent = %s AND id = ANY(%s) AND instance <> %s",
                (*self._key, ids, self.instance),
            )
            return {str(row[0]) for row in await cursor.fetchall()}


def _parsed(rows: list[tuple[object, ...]]) -> list[SharedTask]:
    found = []
    for task_id, task_json, owner, request_key, instance, terminal, leased in rows:
        try:
            task = Task.model_validate_json(bytes(task_json))  # type: ignore[call-overload]
        except ValueError:
            log.warning("the shared store's task %s no longer parses as an A2A task; skipped", task_id)
            continue
        found.append(
            SharedTask(
                task,
                None if owner is None else str(owner),
                None if request_key is None else str(request_key),
                str(instance),
                bool(terminal),
                bool(leased),
            )
        )
    return found
