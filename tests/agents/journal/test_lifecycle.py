"""Every TaskJournal gets the same lifecycle in AgentService (load, flow control, start), not
only the SQLite one: a journal of one's own restores its tasks too."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from agents.journal import LoadedTasks, NullJournal, StoredTask, load_together
from agents.service import AgentService
from mesh.a2a import Task, TaskState, TaskStatus
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from tests.agents.service_agents import Echo


class KeptJournal(NullJournal):
    """A journal of one's own that held one finished task when the agent started."""

    durable = True

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.pause: Callable[[], None] | None = None

    def load(self) -> LoadedTasks:
        self.calls.append("load")
        task = Task(id="kept-1", context_id="ctx-kept", status=TaskStatus(state=TaskState.completed), history=[])
        return LoadedTasks(tasks=[StoredTask(task=task, request_key=None, age_s=1.0)])

    def on_backlog(self, pause: Callable[[], None], resume: Callable[[], None]) -> None:
        self.calls.append("on_backlog")
        self.pause = pause

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self.calls.append("start")


async def test_a_journal_of_ones_own_is_loaded_started_and_flow_controlled(
    broker_settings: BrokerSettings, namespace: str
) -> None:
    journal = KeptJournal()
    service = AgentService(Echo(), broker=broker_settings, namespace=namespace, journal=journal)
    await service.start()
    try:
        assert journal.calls == ["load", "on_backlog", "start"]
        assert journal.pause is not None
        async with MeshClient.connect(broker_settings, namespace) as client:
            task = await client.get_task("echo", "kept-1")
        assert task.id == "kept-1" and task.status.state == TaskState.completed
    finally:
        await service.stop()


class BrokenJournal(NullJournal):
    def load(self) -> LoadedTasks:
        raise OSError("disk on fire")


async def test_journals_loading_together_each_get_their_own_tasks_or_error() -> None:
    """The loads asked for in one pass of the loop share one thread job (load_together); one
    journal failing fails its own load only."""
    kept, broken, empty = KeptJournal(), BrokenJournal(), NullJournal()
    results = await asyncio.gather(
        load_together(kept), load_together(broken), load_together(empty), return_exceptions=True
    )
    first, second, third = results
    assert isinstance(first, LoadedTasks) and [s.task.id for s in first.tasks] == ["kept-1"]
    assert isinstance(second, OSError) and "disk on fire" in str(second)
    assert isinstance(third, LoadedTasks) and third.tasks == []
    assert kept.calls == ["load"]
