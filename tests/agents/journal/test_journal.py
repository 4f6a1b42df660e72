"""The task journals: what they store comes back, what retention forgets leaves them.

The contract's tests run on both engines (``engine``: SQLite, and PostgreSQL from
tests/postgres.py); the rest are about SQLite's file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from agents import AgentSettings, journalproc, journalwriter, pgjournal, sqlitejournal
from agents.journal import MEMORY, NullJournal, journal_path
from agents.pgjournal import PostgresJournal
from agents.push import PushConfigStore
from agents.sqlitejournal import SqliteJournal
from agents.tasks import TaskRecord, TaskStore
from gateways.acp.sessions import SessionStore
from mesh.a2a import PushNotificationConfig, TaskState, TextPart, create_user_message
from mesh.errors import ConfigError
from mesh.store import parse_store_url
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent

Opener = Callable[..., SqliteJournal]


@pytest.fixture(params=["sqlite", "postgres"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """Opens one journal's store again at each call, on the engine of the test's parameter."""
    if request.param == "sqlite":
        path = tmp_path / "deep" / "dir" / "t.sqlite3"
        return lambda **kw: SqliteJournal(path, agent_name="t", **kw)
    url = parse_store_url(request.getfixturevalue("postgres_url"))
    namespace = f"test/{uuid.uuid4().hex[:12]}"
    return lambda **kw: PostgresJournal(url, namespace=namespace, agent_name="t", instance="t", shared=False, **kw)


def store_on(journal: SqliteJournal | NullJournal, *, max_finished: int = 100) -> TaskStore:
    return TaskStore(retention_s=3600, max_finished=max_finished, max_bytes=10_000_000, journal=journal)


async def reopened(
    path: Path | Opener, *, receive_maximum: int = 64
) -> tuple[SqliteJournal, TaskStore, list[TaskRecord], PushConfigStore]:
    if isinstance(path, Path):
        journal = SqliteJournal(path, agent_name="t", receive_maximum=receive_maximum)
    else:
        journal = path(receive_maximum=receive_maximum)
    loaded = await asyncio.to_thread(journal.load)
    journal.start(asyncio.get_running_loop())
    store = store_on(journal)
    pushes = PushConfigStore(journal=journal)
    pushes.restore(loaded.push_configs)
    return journal, store, store.restore(loaded), pushes


async def test_tasks_push_configs_and_request_keys_come_back(engine: Opener) -> None:
    journal, store, orphans, pushes = await reopened(engine)
    path = journal.path
    if isinstance(journal, PostgresJournal):
        assert orphans == []
    else:
        assert orphans == [] and path.parent.is_dir() and not path.exists()  # made with the first task
    done = TaskRecord.new("t-done", "ctx")
    done.request_key = "k-done"
    done.add_message(create_user_message([TextPart(text="hello")]))
    store.add(done)
    done.set_status(TaskState.working)
    done.set_status(TaskState.completed)
    store.changed(done)
    store.finished(done)
    running = TaskRecord.new("t-running", "ctx")
    store.add(running)
    pushes.set("t-running", PushNotificationConfig(id="p1", url="https://example.com/hook", token="tok"))
    stored = asyncio.get_running_loop().create_future()
    journal.after_durable(lambda: stored.set_result(None))
    await asyncio.wait_for(stored, 5)
    await journal.close()
    assert isinstance(journal, PostgresJournal) or path.exists()

    journal, store, orphans, pushes = await reopened(engine)
    assert [o.id for o in orphans] == ["t-running"] and orphans[0].orphaned
    again = store.get("t-done")
    assert again is not None and again.state is TaskState.completed and again.settled.is_set()
    assert store.by_request("k-done") is again
    assert store.retained_bytes > 0
    [config] = pushes.list("t-running")
    assert config.push_notification_config.url == "https://example.com/hook"
    assert config.push_notification_config.token == "tok"
    await journal.close()


async def test_push_configs_survive_and_forgotten_tasks_leave_the_store(engine: Opener) -> None:
    journal, store, _, pushes = await reopened(engine)
    record = TaskRecord.new("t-1", "ctx")
    store.add(record)
    pushes.set("t-1", PushNotificationConfig(id="p1", url="https://example.com/a"))
    pushes.set("t-1", PushNotificationConfig(id="p2", url="https://example.com/b"))
    pushes.delete("t-1", "p1")
    await journal.close()

    journal = engine()
    loaded = await asyncio.to_thread(journal.load)
    restored = PushConfigStore()
    restored.restore(loaded.push_configs)
    assert [c.push_notification_config.id for c in restored.list("t-1")] == ["p2"]
    journal.start(asyncio.get_running_loop())
    store = store_on(journal, max_finished=1)
    store.restore(loaded)
    for task_id in ("t-1", "t-2"):  # two finished tasks, one kept: t-1 is forgotten
        record = store.get(task_id) or TaskRecord.new(task_id, "ctx")
        if store.get(task_id) is None:
            store.add(record)
        record.set_status(TaskState.canceled)
        store.changed(record)
        store.finished(record)
    assert store.get("t-1") is None
    await journal.close()
    journal = engine()
    loaded = await asyncio.to_thread(journal.load)
    assert [t.task.id for t in loaded.tasks] == ["t-2"]
    assert loaded.push_configs == {}  # the forgotten task's configs left with it
    await journal.close()


def test_where_the_file_goes(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path))
    assert journal_path("", "acme/prod", "echo") == tmp_path / "acme%2Fprod" / "echo.sqlite3"
    assert journal_path(MEMORY, "acme", "echo") is None
    assert journal_path("~/tasks.db", "acme", "echo") == Path.home() / "tasks.db"


@pytest.mark.parametrize(
    "namespaces",
    [("acme/ai", "acme_ai"), ("a/b/c", "a/b_c"), ("x%2Fy", "x/y"), ("..", "."), ("é", "%C3%A9")],
)
def test_namespaces_keep_their_tasks_apart(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, namespaces: tuple[str, str]
) -> None:
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path))
    paths = [journal_path("", namespace, "echo") for namespace in namespaces]
    assert paths[0] != paths[1]
    for path in paths:
        assert path is not None and path.parent.parent == tmp_path  # one directory level, inside


@pytest.mark.parametrize("namespace", ["..", "../..", ".", "a/../..", "x" * 300])
def test_no_namespace_leaves_the_state_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, namespace: str) -> None:
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path))
    for path in (journal_path("", namespace, "echo"), SessionStore.for_namespace(namespace).path):
        assert path is not None
        assert path.resolve().parent.parent == tmp_path.resolve(), path
        assert len(path.parent.name) <= 255


def test_acp_sessions_of_two_namespaces_are_two_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path))
    assert SessionStore.for_namespace("acme/ai").path != SessionStore.for_namespace("acme_ai").path


async def test_a_task_store_that_is_not_sqlite_fails_the_start_saying_how_to_fix_it(
    serve_agent: ServeAgent, tmp_path: Path
) -> None:
    garbage = tmp_path / "echo.sqlite3"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(ConfigError) as raised:
        await serve_agent(Echo(), AgentSettings(task_store=str(garbage)))
    message = str(raised.value)
    assert str(garbage) in message and "':memory:'" in message


async def test_a_backlog_past_its_bound_pauses_the_intake_until_half_is_stored(engine: Opener) -> None:
    journal = engine(max_backlog_bytes=10_000)
    await asyncio.to_thread(journal.load)
    events: list[str] = []
    resumed = asyncio.Event()
    journal.on_backlog(lambda: events.append("pause"), lambda: (events.append("resume"), resumed.set()))
    journal.start(asyncio.get_running_loop())
    store = store_on(journal)
    for n in range(3):  # three tasks of ~6 KB each, written in one batch: past the bound
        record = TaskRecord.new(f"t-{n}", "ctx")
        record.add_message(create_user_message([TextPart(text="x" * 6000)]))
        store.add(record)
    await asyncio.wait_for(resumed.wait(), 5)
    assert events == ["pause", "resume"] and journal.backlog_bytes == 0
    await journal.close()


def open_descriptors(path: Path) -> int:
    """How many file descriptors of this process and of its journals' writer process point at ``path``."""
    pid = journalwriter.writer_for(asyncio.get_running_loop()).pid
    count = _descriptors(Path("/proc/self/fd"), path)
    return count + (_descriptors(Path(f"/proc/{pid}/fd"), path) if pid is not None else 0)


def _descriptors(fds: Path, path: Path) -> int:
    count = 0
    for fd in fds.iterdir():
        try:
            count += Path(os.readlink(fd)) == path
        except OSError:  # closed meanwhile (the listing's own descriptor)
            continue
    return count


async def test_an_idle_journal_closes_its_file_and_opens_it_again_to_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journalwriter, "IDLE_CLOSE_S", 0.2)
    path = tmp_path / "idle.sqlite3"
    journal, store, _, _ = await reopened(path)
    assert open_descriptors(path) == 0  # loading does not keep it open

    async def write(task_id: str) -> None:
        record = TaskRecord.new(task_id, "ctx")
        store.add(record)
        stored = asyncio.get_running_loop().create_future()
        journal.after_durable(lambda: stored.set_result(None))
        await asyncio.wait_for(stored, 5)

    await write("t-1")
    assert open_descriptors(path) == 1
    closed_by = time.monotonic() + 5  # the writer's sweep closes it; nothing to await but time
    while open_descriptors(path):
        assert time.monotonic() < closed_by, "the idle file stayed open"
        await asyncio.sleep(0.05)
    await write("t-2")  # opened again
    await journal.close()
    assert open_descriptors(path) == 0
    journal, store, orphans, _ = await reopened(path)
    assert sorted(o.id for o in orphans) == ["t-1", "t-2"]
    await journal.close()


def counting_batches(journal: SqliteJournal, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The numbers of the batches ``journal`` hands to its writer."""
    handed: list[int] = []
    writer = journal._writer
    assert writer is not None
    submit = writer.submit

    def counted(jid: int, number: int, batch: tuple[object, ...]) -> None:
        handed.append(number)
        submit(jid, number, batch)

    monkeypatch.setattr(writer, "submit", counted)
    return handed


async def test_a_run_of_short_tasks_is_written_in_one_commit_not_one_each(
    engine: Opener, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlitejournal, "WRITE_DELAY_S", 3600.0)  # however slow the machine: one window
    journal, store, _, _ = await reopened(engine)
    handed = counting_batches(journal, monkeypatch)
    for n in range(20):  # each created, working and finished in passes of its own, as tasks come one by one
        record = TaskRecord.new(f"t-{n}", "ctx")
        store.add(record)
        await asyncio.sleep(0)
        record.set_status(TaskState.working)
        store.changed(record)
        await asyncio.sleep(0)
        record.set_status(TaskState.completed)
        store.changed(record)
        store.finished(record)
        await asyncio.sleep(0)
    await journal.close()  # writes what waits for the timer
    # Batches handed to the writer: one for the window, not one per change (30 before).
    assert len(handed) == 1, handed
    journal, store, orphans, _ = await reopened(engine)
    assert orphans == [] and all(store.get(f"t-{n}").state is TaskState.completed for n in range(20))  # type: ignore[union-attr]
    await journal.close()


@pytest.mark.parametrize(("receive_maximum", "prompt"), [(64, 32), (8, 4)])
async def test_enough_waiting_acknowledgements_get_their_batch_written_at_once(
    engine: Opener, monkeypatch: pytest.MonkeyPatch, receive_maximum: int, prompt: int
) -> None:
    """Half the Receive Maximum (at most PROMPT_WAITERS): the broker sends no more unacknowledged
    messages than that quota, and the answers to the agent's own calls need the other half."""
    monkeypatch.setattr(sqlitejournal, "WRITE_DELAY_S", 3600.0)
    journal, store, _, _ = await reopened(engine, receive_maximum=receive_maximum)
    assert journal.prompt_waiters == prompt
    acknowledged: list[int] = []
    for n in range(prompt):
        store.add(TaskRecord.new(f"t-{n}", "ctx"))
        journal.after_durable(lambda n=n: acknowledged.append(n))  # type: ignore[misc]
        for _ in range(5):  # a few passes of the loop: a flush two passes away would be done
            await asyncio.sleep(0)
        if n < prompt - 1:
            assert acknowledged == [], "an acknowledgement did not wait for the others (or the timer)"
    written_by = time.monotonic() + 5
    while len(acknowledged) < prompt:
        assert time.monotonic() < written_by, "the waiting acknowledgements were not written at once"
        await asyncio.sleep(0.01)
    assert acknowledged == list(range(prompt))
    late = TaskRecord.new("t-late", "ctx")
    store.add(late)
    await journal.close()  # what waits for the timer is written when the journal closes
    journal, store, orphans, _ = await reopened(engine)
    assert "t-late" in {o.id for o in orphans}
    await journal.close()


async def test_two_changes_of_a_task_in_one_commit_keep_the_later(tmp_path: Path) -> None:
    path = tmp_path / "order.sqlite3"
    journal, store, _, _ = await reopened(path)
    record = TaskRecord.new("t-1", "ctx")
    store.add(record)
    record.set_status(TaskState.completed)
    store.finished(record)
    await journal.close()  # the task is written (at seq 1)
    journal, store, _, _ = await reopened(path)
    again = store.get("t-1")
    assert again is not None
    await journal.close()
    first = (1, "t-1", None, 1, time.time(), b'{"broken": true}', None)
    later = (1, "t-1", None, 1, time.time(), again.task.to_json_bytes(), "alice")
    # As the writer process commits two batches waiting at once: one statement, the later row last.
    db = journalproc.connect(path)
    journalproc.commit(db, [(1, [first], [], [], {}), (2, [later], [], [], {})])
    db.close()
    journal, store, orphans, _ = await reopened(path)
    kept = store.get("t-1")
    assert orphans == [] and kept is not None and kept.owner == "alice" and kept.state is TaskState.completed
    await journal.close()


async def test_tasks_forgotten_and_written_again_keep_one_row_each(tmp_path: Path) -> None:
    """Retention deletes rows by the seq each task got; a task forgotten and added again (an orphan
    whose request came back) gets a new row, the old one gone."""
    path = tmp_path / "again.sqlite3"
    journal, store, _, _ = await reopened(path)
    store.max_finished = 3
    for n in range(10):
        record = TaskRecord.new(f"t-{n}", "ctx")
        store.add(record)
        record.set_status(TaskState.completed)
        store.finished(record)
        await asyncio.sleep(0)
    orphan = TaskRecord.new("t-orphan", "ctx")
    store.add(orphan)
    await journal.close()
    journal, store, orphans, _ = await reopened(path)
    assert [o.id for o in orphans] == ["t-orphan"]
    store.discard(orphans[0])
    store.add(TaskRecord.new("t-orphan", "ctx"))
    await journal.close()
    with contextlib.closing(sqlite3.connect(path)) as db:
        rows = sorted(task_id for (task_id,) in db.execute("SELECT id FROM task_rows"))
    assert rows == ["t-7", "t-8", "t-9", "t-orphan"]


async def test_retention_forgets_in_the_store_too(engine: Opener) -> None:
    """What the bounds forget leaves the store: a restart gets back the tasks kept, no more."""
    journal, store, _, _ = await reopened(engine)
    store.max_finished = 3
    for n in range(10):
        record = TaskRecord.new(f"t-{n}", "ctx")
        store.add(record)
        record.set_status(TaskState.completed)
        store.finished(record)
        await asyncio.sleep(0)
    await journal.close()
    journal = engine()
    loaded = await asyncio.to_thread(journal.load)
    assert sorted(t.task.id for t in loaded.tasks) == ["t-7", "t-8", "t-9"]
    await journal.close()


async def test_a_task_forgotten_and_added_again_before_the_commit_is_kept(engine: Opener) -> None:
    """One commit deletes a task (retention) and writes a new task of its id: the new row stays."""
    journal, store, _, _ = await reopened(engine)
    store.max_finished = 1
    for task_id in ("t-1", "t-2"):  # t-2 finishing forgets t-1
        record = TaskRecord.new(task_id, "ctx")
        store.add(record)
        record.set_status(TaskState.completed)
        store.finished(record)
    assert store.get("t-1") is None
    store.add(TaskRecord.new("t-1", "ctx"))  # a new task of that id, in the same commit
    await journal.close()
    journal = engine()
    loaded = await asyncio.to_thread(journal.load)
    assert sorted((t.task.id, t.task.status.state.value) for t in loaded.tasks) == [
        ("t-1", "submitted"),
        ("t-2", "completed"),
    ]
    await journal.close()


async def test_migrations_are_versioned_and_run_once(postgres_url: str) -> None:
    from mesh.store import Migration
    from mesh.store import postgres as pg

    url = parse_store_url(postgres_url)
    journal = PostgresJournal(url, namespace="test/m", agent_name="t", instance="t", shared=False)
    await asyncio.to_thread(journal.load)
    await asyncio.to_thread(journal.load)  # a second start: nothing to apply, nothing broken
    server, versions = await asyncio.to_thread(pg.check, url)
    assert server.split(".")[0].isdigit() and versions["task_journal"] == len(pgjournal.MIGRATIONS)
    component = f"test_{uuid.uuid4().hex[:8]}"
    table = f"{component}_rows"
    steps = [
        Migration(1, (f"CREATE TABLE {table} (n INTEGER)",)),
        Migration(2, (f"ALTER TABLE {table} ADD m INTEGER",)),
    ]
    with pg.connect(url) as db:
        assert pg.migrate(db, component, steps[:1]) == 1
        assert pg.migrate(db, component, steps) == 2  # only step 2 runs (step 1 again would fail)
        assert pg.migrate(db, component, steps) == 2
        with pytest.raises(ConfigError, match="newer than this mesh knows"):
            pg.migrate(db, component, steps[:1])
        db.execute(f"DROP TABLE {table}")
