"""The SQLite task journals of an event loop are written by one process (agents.journalwriter)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from pathlib import Path

import pytest

from agents import AgentSettings, journalwriter
from agents.service import AgentService
from agents.sqlitejournal import SqliteJournal
from mesh.a2a import Task, TaskState
from mesh.client import MeshClient
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent
from tests.support import alive


def writer_pid() -> int | None:
    return journalwriter.writer_for(asyncio.get_running_loop()).pid


async def started_writer() -> int:
    """The writer's pid, once the first batch started it (answers do not wait for the batch)."""
    async with asyncio.timeout(5):
        while (pid := writer_pid()) is None:
            await asyncio.sleep(0.01)
    return pid


async def send_all(client: MeshClient, agents: list[str], count: int) -> None:
    tasks = await asyncio.gather(*(client.send(agent, f"n{i}") for agent in agents for i in range(count)))
    assert all(isinstance(t, Task) and t.status.state is TaskState.completed for t in tasks)


def stored_tasks(service: AgentService) -> int:
    assert isinstance(service.journal, SqliteJournal)
    return len(SqliteJournal(service.journal.path, agent_name=service.name).load().tasks)


async def test_twenty_agents_with_task_files_share_one_writer_process_that_ends_with_them(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    services = [await serve_agent(Echo(name=f"e{i}"), AgentSettings()) for i in range(20)]
    assert all(isinstance(s.journal, SqliteJournal) for s in services)
    await send_all(client, [f"e{i}" for i in range(20)], 5)
    pid = await started_writer()
    assert alive(pid)
    children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
    assert children.count(str(pid)) == 1  # one writer for the twenty
    for service in services:
        await service.stop()
    # Stopped agents have their tasks on disk: what a restart would load.
    assert [stored_tasks(s) for s in services] == [5] * 20
    assert writer_pid() is None and not alive(pid)  # the last journal closed: the process is gone


async def test_a_killed_writer_process_is_replaced_and_nothing_handed_to_it_is_lost(
    serve_agent: ServeAgent, client: MeshClient, caplog: pytest.LogCaptureFixture
) -> None:
    service = await serve_agent(Echo(), AgentSettings())
    await send_all(client, ["echo"], 10)
    first = await started_writer()
    os.kill(first, signal.SIGKILL)
    await send_all(client, ["echo"], 30)  # the loss is found on the next batch's write or read
    second = writer_pid()
    assert second is not None and second != first and alive(second)
    assert "starting another and sending it the batches not yet stored" in caplog.text
    await service.stop()
    assert stored_tasks(service) == 40


async def test_a_writer_that_cannot_run_leaves_tasks_in_memory_and_requests_acknowledged(
    serve_agent: ServeAgent,
    client: MeshClient,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broken = tmp_path / "exits.py"
    broken.write_text("raise SystemExit(3)\n")
    monkeypatch.setattr(journalwriter, "_SCRIPT", broken)
    caplog.set_level(logging.WARNING)
    service = await serve_agent(Echo(), AgentSettings())
    started = time.monotonic()
    await send_all(client, ["echo"], 20)  # answered, and acknowledged (stop() waits for that)
    await service.stop()
    assert time.monotonic() - started < 10
    assert "exited with code 3, twice without committing anything" in caplog.text
    assert "tasks are served from memory but will not survive a restart" in caplog.text


async def test_a_journal_that_never_writes_starts_no_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    starts: list[journalwriter.JournalWriter] = []
    start = journalwriter.JournalWriter._start

    def counted(writer: journalwriter.JournalWriter) -> None:
        starts.append(writer)
        start(writer)

    monkeypatch.setattr(journalwriter.JournalWriter, "_start", counted)
    journal = SqliteJournal(tmp_path / "quiet.sqlite3", agent_name="quiet")
    journal.load()
    journal.start(asyncio.get_running_loop())
    await journal.close()
    assert starts == [] and not (tmp_path / "quiet.sqlite3").exists()
