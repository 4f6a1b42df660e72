"""Where an agent's tasks are kept across restarts: the task journal interface.

The runtime keeps its tasks in memory (:class:`~agents.tasks.TaskStore`, with their asyncio
state) and writes every change through to a :class:`TaskJournal`. On start the service loads
what the journal holds: finished tasks serve ``tasks/get`` again, tasks that were running are
failed with "agent restarted" unless the broker redelivers their request.

The journal is also what the broker acknowledgement waits for (DESIGN, "Delivery
guarantees"): :meth:`TaskJournal.after_durable` runs a callback once every change made so far
is stored, so a request is acknowledged (manual PUBACK) only once its task is recorded. Answers
do not wait: one that left just before a crash reports a state the restarted agent may not have.

Two journals: :class:`~agents.sqlitejournal.SqliteJournal` (the default: one SQLite file per
agent instance) and :class:`NullJournal` (``task_store: ":memory:"``: nothing outlives the
process, and nothing waits).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from mesh.a2a import Task
from mesh.config.statedir import STATE_DIR_ENV, default_state_dir, namespace_state_dir, path_component

if TYPE_CHECKING:
    from agents.tasks import TaskRecord

__all__ = [
    "MEMORY",
    "STATE_DIR_ENV",
    "LoadedTasks",
    "NullJournal",
    "StoredTask",
    "TaskJournal",
    "default_state_dir",
    "journal_path",
    "load_together",
]

#: The ``task_store`` value that keeps tasks in memory only.
MEMORY = ":memory:"


@dataclass(frozen=True, slots=True)
class StoredTask:
    """A task as the journal gave it back."""

    task: Task
    request_key: str | None
    # Seconds since it last changed (wall clock at load minus at write): what retention ages.
    age_s: float
    #: Who may act on it (agents.owners); None for a task stored before owners were kept.
    owner: str | None = None


@dataclass(slots=True)
class LoadedTasks:
    """What a journal held when the agent started, oldest change first."""

    tasks: list[StoredTask] = field(default_factory=list)
    # task id -> its push configs, each a JSON object (PushNotificationConfig).
    push_configs: dict[str, list[bytes]] = field(default_factory=dict)


class TaskJournal(Protocol):
    """Stores task changes off the hot path; says when they are stored."""

    @property
    def durable(self) -> bool:
        """Whether anything outlives the process (False: redelivery dedupe is pointless)."""
        ...

    def load(self) -> LoadedTasks:
        """Open the store and read what it holds (blocking: run it off the loop)."""
        ...

    def on_backlog(self, pause: Callable[[], None], resume: Callable[[], None]) -> None:
        """Call ``pause`` when changes pile up faster than they are stored, ``resume`` once they
        are stored again (the agent stops reading requests meanwhile)."""

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Begin storing changes (after :meth:`load`); ``after_durable`` callbacks run on ``loop``."""

    def changed(self, record: TaskRecord, task_json: bytes | None = None) -> None:
        """The task was created or changed: write its current state (``task_json`` if already serialized)."""

    def forgotten(self, task_id: str) -> None:
        """The task is past retention: delete it."""

    def push_configs(self, task_id: str, configs: list[bytes]) -> None:
        """The task's push configs are now ``configs`` (JSON objects; empty: none)."""

    def after_durable(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` on the loop once every change made so far is stored (at once if none)."""

    async def close(self) -> None:
        """Store what is pending and close the store."""


class NullJournal:
    """Keeps nothing: tasks live as long as the process (``task_store: ":memory:"``)."""

    durable = False

    def load(self) -> LoadedTasks:
        return LoadedTasks()

    def on_backlog(self, pause: Callable[[], None], resume: Callable[[], None]) -> None:
        pass  # nothing is stored: nothing piles up

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        pass

    def changed(self, record: TaskRecord, task_json: bytes | None = None) -> None:
        pass

    def forgotten(self, task_id: str) -> None:
        pass

    def push_configs(self, task_id: str, configs: list[bytes]) -> None:
        pass

    def after_durable(self, callback: Callable[[], None]) -> None:
        callback()

    async def close(self) -> None:
        pass


def journal_path(task_store: str, namespace: str, instance: str) -> Path | None:
    """The SQLite file of an agent instance (None: in memory).

    ``task_store`` is the agent's setting: ``":memory:"``, a file path, or empty for
    ``<state dir>/<namespace>/<instance>.sqlite3`` (each a single file name, see
    :func:`~mesh.config.statedir.path_component`).
    """
    if task_store == MEMORY:
        return None
    if task_store:
        return Path(task_store).expanduser()
    return namespace_state_dir(namespace) / f"{path_component(instance)}.sqlite3"


# The journals asked to load in one pass of each loop, and the futures waiting for them.
_Waiting = list[tuple["TaskJournal", "asyncio.Future[LoadedTasks]"]]
_loading: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Waiting] = weakref.WeakKeyDictionary()


async def load_together(journal: TaskJournal) -> LoadedTasks:
    """``journal.load()`` off the loop; the loads asked for in one pass of the loop run in one
    thread job (a ``mesh run`` of 1,000 agents: one hop to a thread, not 1,000 fighting the loop
    for the GIL). Each caller gets its own journal's tasks, or what its own load raised."""
    loop = asyncio.get_running_loop()
    batch = _loading.get(loop)
    if batch is None:
        batch = _loading[loop] = []
        loop.call_soon(_load_batch, loop)  # after every caller of this pass has joined
    future: asyncio.Future[LoadedTasks] = loop.create_future()
    batch.append((journal, future))
    return await future


def _load_batch(loop: asyncio.AbstractEventLoop) -> None:
    batch = _loading.pop(loop)

    def load_all() -> list[LoadedTasks | Exception]:
        results: list[LoadedTasks | Exception] = []
        for journal, _future in batch:
            try:
                results.append(journal.load())
            except Exception as exc:  # the caller's to report (a pluggable store may raise anything)
                results.append(exc)
        return results

    def settle(job: asyncio.Future[list[LoadedTasks | Exception]]) -> None:
        failed = asyncio.CancelledError() if job.cancelled() else job.exception()
        outcomes: list[LoadedTasks | BaseException] = [failed] * len(batch) if failed else list(job.result())
        for (_journal, future), outcome in zip(batch, outcomes, strict=True):
            if future.done():  # its caller was cancelled
                continue
            if isinstance(outcome, BaseException):
                future.set_exception(outcome)
            else:
                future.set_result(outcome)

    loop.run_in_executor(None, load_all).add_done_callback(settle)
