"""Every SQLite task journal of a process is written by one thread (agents.journalwriter)."""

from __future__ import annotations

import asyncio
import threading

from agents import AgentSettings
from agents.sqlitejournal import SqliteJournal
from mesh.a2a import Task, TaskState
from mesh.client import MeshClient
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent


async def test_twenty_agents_with_task_files_share_one_writer_thread(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    services = [await serve_agent(Echo(name=f"e{i}"), AgentSettings()) for i in range(20)]
    assert all(isinstance(s.journal, SqliteJournal) for s in services)
    tasks = await asyncio.gather(*(client.send(f"e{i}", f"n{i}") for i in range(20) for _ in range(5)))
    assert all(isinstance(t, Task) and t.status.state is TaskState.completed for t in tasks)
    writers = [t.name for t in threading.enumerate() if t.name == "task-journals" or t.name.startswith("journal-")]
    assert writers == ["task-journals"]
    # Stopped agents have their tasks on disk: what a restart would load.
    service = services[0]
    await service.stop()
    assert isinstance(service.journal, SqliteJournal)
    reloaded = SqliteJournal(service.journal.path, agent_name="e0").load()
    assert len(reloaded.tasks) == 5
