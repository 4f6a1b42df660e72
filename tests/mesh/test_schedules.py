"""Schedules on the real broker: a tick fires on time (a clock the test moves), exactly once across
two schedulers and two ``mesh run`` processes, across a restart (``missed`` both ways), paused and
resumed from the CLI; bad cron, time zone and agent are refused with the fix.

The schedulers' tests run on both engines of the record: the machine's SQLite file, and a real
PostgreSQL where each scheduler has a connection of its own (as schedulers on several hosts)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agents import Agent, Reply, TaskContext
from agents.builtin.calculator import CalculatorAgent
from mesh.a2a import Message, get_text_from_message
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.config import load_config
from mesh.config.sections import build_components
from mesh.errors import ConfigError
from mesh.schedules import ManualClock, ScheduleSpec
from mesh.schedules.pgstore import PostgresScheduleStore
from mesh.schedules.runs import RunOutcome
from mesh.schedules.scheduler import Scheduler
from mesh.schedules.store import ScheduleStore, SqliteScheduleStore
from mesh.store import parse_store_url
from tests.conftest import ServeAgent
from tests.mesh.cli_process import mesh, start_mesh
from tests.support import wait_until

START = datetime(2026, 12, 3, 7, 0, 30, tzinfo=UTC)


def spec(name: str = "sum", **fields: Any) -> ScheduleSpec:
    return ScheduleSpec.model_validate({"name": name, "agent": "calculator", "message": "2 + 2", **fields})


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    """'' (the machine's SQLite record), or the test PostgreSQL's URL (its password in the environment)."""
    return "" if request.param == "sqlite" else str(request.getfixturevalue("postgres_url"))


def open_store(store_url: str, namespace: str) -> ScheduleStore:
    """A record of its own (a connection of its own, for PostgreSQL), as another process has."""
    if not store_url:
        return SqliteScheduleStore.of(namespace)
    return PostgresScheduleStore(parse_store_url(store_url), namespace)


def store_args(store_url: str) -> list[str]:
    return ["--store", store_url] if store_url else []


@pytest.fixture
async def schedulers(
    broker_settings: BrokerSettings, namespace: str, tmp_path: Path, store_url: str
) -> AsyncIterator[Callable[..., Any]]:
    started: list[Scheduler] = []

    async def make(specs: list[ScheduleSpec], clock: ManualClock) -> Scheduler:
        scheduler = Scheduler(
            specs,
            broker=broker_settings,
            namespace=namespace,
            source=tmp_path / "mesh.yaml",
            clock=clock,
            store=open_store(store_url, namespace),
        )
        await scheduler.start()
        started.append(scheduler)
        return scheduler

    yield make
    for scheduler in started:
        await scheduler.stop()


async def ran(scheduler: Scheduler, count: int) -> list[tuple[str, RunOutcome]]:
    """The scheduler's first ``count`` outcomes, once it has them."""
    async with asyncio.timeout(30), scheduler.ran:
        await scheduler.ran.wait_for(lambda: len(scheduler.outcomes) >= count)
    return scheduler.outcomes[:count]


async def scheduled_ticks(broker_settings: BrokerSettings, namespace: str) -> list[str]:
    """The schedule ticks of the calculator's tasks, as its task history has them."""
    async with MeshClient.connect(broker_settings, namespace) as client:
        listed = await client.list_tasks("calculator", page_size=100, history_length=10)
    ticks = []
    for task in listed.tasks:
        for message in task.history or ():
            if schedule := (message.metadata or {}).get("schedule"):
                ticks.append(str(schedule["tick"]))
    return sorted(ticks)


class CountingCalculator(CalculatorAgent):
    """The calculator, noting the schedule tick of each task it gets."""

    def __init__(self) -> None:
        super().__init__()
        self.ticks: list[str] = []
        self.changed = asyncio.Event()

    async def handle(self, message: Message, ctx: TaskContext) -> Reply:
        self.ticks.append(str((message.metadata or {}).get("schedule", {}).get("tick")))
        self.changed.set()
        return await super().handle(message, ctx)


async def test_a_tick_fires_on_time_as_an_ordinary_task(
    serve_agent: ServeAgent, schedulers: Callable[..., Any], broker_settings: BrokerSettings, namespace: str
) -> None:
    await serve_agent(CalculatorAgent())
    clock = ManualClock(START)
    scheduler = await schedulers([spec(cron="*/5 * * * *", user="alice")], clock)
    await clock.set(datetime(2026, 12, 3, 7, 4, 59, tzinfo=UTC))  # before the tick: nothing runs
    await clock.set(datetime(2026, 12, 3, 7, 5, 0, tzinfo=UTC))
    [(name, outcome)] = await ran(scheduler, 1)
    assert (name, outcome.tick, outcome.outcome) == ("sum", datetime(2026, 12, 3, 7, 5, tzinfo=UTC), "completed")
    assert outcome.task_id is not None
    async with MeshClient.connect(broker_settings, namespace) as client:
        task = await client.get_task("calculator", outcome.task_id, history_length=5)
    assert task.status.state.value == "completed"
    assert task.status.message is not None and get_text_from_message(task.status.message) == "4"
    [run] = scheduler.store.runs("sum")
    assert (run.task_id, run.outcome, run.manual) == (outcome.task_id, "completed", False)
    assert await scheduled_ticks(broker_settings, namespace) == ["2026-12-03T07:05:00.000Z"]


async def test_two_schedulers_of_one_schedule_run_each_tick_once(
    serve_agent: ServeAgent, schedulers: Callable[..., Any], broker_settings: BrokerSettings, namespace: str
) -> None:
    await serve_agent(CalculatorAgent())
    clock = ManualClock(START)
    first = await schedulers([spec(every="1m")], clock)
    second = await schedulers([spec(every="1m")], clock)  # another store connection, another client
    for minute in (1, 2, 3):
        await clock.set(START.replace(minute=minute, second=0))
        [*_, (_, mine)] = await ran(first, minute)
        [*_, (_, theirs)] = await ran(second, minute)
        assert {mine.refused, theirs.refused} == {None, "claimed already"}, (mine, theirs)
    assert await scheduled_ticks(broker_settings, namespace) == [f"2026-12-03T07:0{m}:00.000Z" for m in (1, 2, 3)]


async def test_a_restart_skips_or_runs_once_what_it_missed(
    serve_agent: ServeAgent, schedulers: Callable[..., Any], broker_settings: BrokerSettings, namespace: str
) -> None:
    await serve_agent(CalculatorAgent())
    specs = [spec("once", every="1m", missed="run_once"), spec("skip", every="1m", missed="skip")]
    clock = ManualClock(START)
    before = await schedulers(specs, clock)
    await clock.set(START.replace(minute=1, second=0))
    await ran(before, 2)
    await before.stop()
    # Nobody runs 07:02 and 07:03; the new process starts at 07:03:30.
    clock = ManualClock(START.replace(minute=3, second=30))
    after = await schedulers(specs, clock)
    [(name, late)] = await ran(after, 1)
    assert (name, late.tick, late.outcome) == ("once", START.replace(minute=3, second=0), "completed")
    await clock.set(START.replace(minute=4, second=0))
    await ran(after, 3)
    store = after.store
    assert sorted(r.tick_ms for r in store.runs("once")) == [tick(1), tick(3), tick(4)]
    assert sorted(r.tick_ms for r in store.runs("skip")) == [tick(1), tick(4)]
    # A restart with nothing missed runs nothing again (07:04 was claimed): its first runs are 07:05's.
    await after.stop()
    clock = ManualClock(START.replace(minute=4, second=10))
    again = await schedulers(specs, clock)
    await clock.set(START.replace(minute=5, second=0))
    assert sorted((name, o.tick, o.outcome) for name, o in await ran(again, 2)) == [
        ("once", START.replace(minute=5, second=0), "completed"),
        ("skip", START.replace(minute=5, second=0), "completed"),
    ]


def tick_of(iso: str) -> int:
    return int(datetime.fromisoformat(iso).timestamp() * 1000)


def tick(minute: int) -> int:
    return int(START.replace(minute=minute, second=0).timestamp() * 1000)


async def test_pause_and_resume_from_the_cli_reach_the_running_scheduler(
    serve_agent: ServeAgent, schedulers: Callable[..., Any], broker_url: str, namespace: str, store_url: str
) -> None:
    await serve_agent(CalculatorAgent())
    clock = ManualClock(START)
    scheduler = await schedulers([spec(every="1m")], clock)
    env = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
    at = store_args(store_url)  # --store URL on PostgreSQL: the record the scheduler uses

    async def mesh_schedule(action: str, *args: str) -> Any:
        return await mesh("schedule", action, *args, *at, **env)

    paused = await mesh_schedule("pause", "sum")
    assert paused.code == 0, paused.stderr
    assert paused.stdout == "schedule sum paused: its ticks do not run until `mesh schedule resume sum`\n"
    await clock.set(START.replace(minute=1, second=0))
    [(_, skipped)] = await ran(scheduler, 1)
    assert skipped.refused == "paused"
    listed = await mesh_schedule("list")
    assert listed.stdout.splitlines()[0].split() == ["NAME", "AGENT", "WHEN", "STATE", "NEXT", "LAST", "RUN"]
    assert listed.stdout.splitlines()[1].split()[:5] == ["sum", "calculator", "every", "1m", "paused"]
    resumed = await mesh_schedule("resume", "sum")
    assert resumed.code == 0, resumed.stderr
    await clock.set(START.replace(minute=2, second=0))
    [_, (_, done)] = await ran(scheduler, 2)
    assert (done.refused, done.outcome) == (None, "completed")
    now = await mesh_schedule("run", "sum")
    assert now.code == 0, now.stderr
    assert now.stdout.splitlines()[1] == "4" and now.stdout.startswith("schedule sum: task ")
    assert [r.manual for r in scheduler.store.runs("sum")][:1] == [True]
    unknown = await mesh_schedule("pause", "summ")
    assert unknown.code == 2 and "no schedule 'summ'" in unknown.stderr and "did you mean 'sum'?" in unknown.stderr


async def test_two_mesh_run_processes_of_one_file_run_each_tick_once(
    serve_agent: ServeAgent, broker_url: str, broker_settings: BrokerSettings, namespace: str, tmp_path: Path
) -> None:
    calculator = CountingCalculator()
    await serve_agent(calculator)
    path = tmp_path / "schedules.yaml"
    path.write_text(
        f"namespace: {namespace}\nschedules:\n  - {{name: often, agent: calculator, message: '1 + 1', every: 1s}}\n"
    )
    env = {"MESH_BROKER_URL": broker_url}
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(2):
            process = await start_mesh("run", str(path), **env)
            stack.push_async_callback(process.stop)
            await process.wait_for_line("schedules:schedules.yaml: running often (every 1s)")
        await wait_until(lambda: len(calculator.ticks) >= 4, calculator.changed, 60, lambda: str(calculator.ticks))
    # Both processes tried every tick; each tick reached the agent once, from whichever claimed it.
    assert len(calculator.ticks) == len(set(calculator.ticks)), calculator.ticks
    claimed = {r.tick_ms: r.claimed_by for r in SqliteScheduleStore.of(namespace).runs("often")}
    assert {tick_of(t) for t in calculator.ticks} <= set(claimed)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("{name: a, agent: calculator, message: x, cron: '61 * * * *'}", "schedules[0].cron: bad cron expression"),
        (
            "{name: a, agent: calculator, message: x, cron: '0 7 * * *', timezone: Europe/Pariss}",
            "did you mean 'Europe/Paris'?",
        ),
        ("{name: a, agent: calculator, message: x, every: 15x}", "'15x' is not an interval"),
        ("{name: a, agent: calculator, message: x}", "give exactly one of cron:"),
        ("{name: a, agent: calculator, message: x, every: 1m, mised: skip}", "unknown key 'mised'"),
    ],
)
def test_a_bad_schedule_is_refused_at_load_time(tmp_path: Path, entry: str, message: str) -> None:
    path = tmp_path / "mesh.yaml"
    path.write_text(f"schedules:\n  - {entry}\n")
    with pytest.raises(ConfigError) as refused:
        build_components(load_config(path), BrokerSettings())
    assert str(refused.value).startswith(f"{path}: schedules[0]") and message in str(refused.value)


async def test_an_agent_nowhere_on_the_mesh_ends_the_start_with_the_fix(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(CalculatorAgent())
    path = tmp_path / "mesh.yaml"
    path.write_text(f"namespace: {namespace}\nschedules:\n  - {{name: a, agent: calculater, message: x, every: 1m}}\n")
    result = await mesh("run", str(path), MESH_BROKER_URL=broker_url, timeout=60)
    assert result.code == 2, result.stderr
    assert f"{path}: schedules[0].agent: no agent 'calculater' on the mesh" in result.stderr
    assert "did you mean 'calculator'?" in result.stderr and "Traceback" not in result.stderr


def test_every_counts_from_the_epoch_and_cron_follows_its_time_zone() -> None:
    every = spec(every="15m")
    assert every.next_after(START) == START.replace(minute=15, second=0)
    assert every.last_at_or_before(START) == START.replace(second=0)
    paris = spec(cron="0 7 * * 1-5", timezone="Europe/Paris")
    assert paris.next_after(START) == datetime(2026, 12, 4, 6, 0, tzinfo=UTC)  # 07:00 in Paris, winter
    assert paris.last_at_or_before(START) == datetime(2026, 12, 3, 6, 0, tzinfo=UTC)
    assert paris.next_after(datetime(2026, 12, 4, 6, 0, tzinfo=UTC)) - timedelta(days=3) == datetime(
        2026, 12, 4, 6, 0, tzinfo=UTC
    )  # Friday's next is Monday


class Gate(Agent):
    """Answers once the test opens the gate."""

    name = "gate"
    description = "Answers once let through"

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.open = asyncio.Event()

    async def handle(self, message: Message, ctx: TaskContext) -> Reply:
        self.entered.set()
        await self.open.wait()
        return Reply("through")


async def test_max_concurrent_bounds_the_runs_in_flight(
    serve_agent: ServeAgent, schedulers: Callable[..., Any]
) -> None:
    gate = Gate()
    await serve_agent(gate)
    clock = ManualClock(START)
    scheduler = await schedulers([spec(agent="gate", every="1m", max_concurrent=1)], clock)
    await clock.set(START.replace(minute=1, second=0))
    await asyncio.wait_for(gate.entered.wait(), 30)  # the 07:01 run is in flight
    await clock.set(START.replace(minute=2, second=0))
    [(_, refused)] = await ran(scheduler, 1)
    assert (refused.tick, refused.refused) == (
        START.replace(minute=2, second=0),
        "1 run(s) still in flight (max_concurrent: 1)",
    )
    gate.open.set()
    [_, (_, first)] = await ran(scheduler, 2)
    assert (first.tick, first.outcome) == (START.replace(minute=1, second=0), "completed")
    await clock.set(START.replace(minute=3, second=0))
    [*_, (_, third)] = await ran(scheduler, 3)
    assert (third.tick, third.outcome) == (START.replace(minute=3, second=0), "completed")


async def test_a_scheduler_woken_late_runs_the_newest_tick_once(
    serve_agent: ServeAgent, schedulers: Callable[..., Any]
) -> None:
    await serve_agent(CalculatorAgent())
    clock = ManualClock(START)
    scheduler = await schedulers([spec(every="1m")], clock)
    await clock.set(START.replace(minute=3, second=30))  # 07:01, 07:02 and 07:03 passed while it slept
    [(_, late)] = await ran(scheduler, 1)
    assert (late.tick, late.outcome) == (START.replace(minute=3, second=0), "completed")
    await clock.set(START.replace(minute=4, second=0))
    [_, (_, next_one)] = await ran(scheduler, 2)
    assert next_one.tick == START.replace(minute=4, second=0)
    assert sorted(r.tick_ms for r in scheduler.store.runs("sum")) == [tick(3), tick(4)]


async def test_a_pause_through_one_record_stops_every_scheduler_and_a_resume_through_another_restarts_them(
    serve_agent: ServeAgent, schedulers: Callable[..., Any]
) -> None:
    await serve_agent(CalculatorAgent())
    clock = ManualClock(START)
    first = await schedulers([spec(every="1m")], clock)
    second = await schedulers([spec(every="1m")], clock)
    assert first.store is not second.store
    assert await asyncio.to_thread(first.store.set_paused, "sum", True)
    await clock.set(START.replace(minute=1, second=0))
    assert [o.refused for _, o in await ran(first, 1)] == ["paused"]
    assert [o.refused for _, o in await ran(second, 1)] == ["paused"]
    assert await asyncio.to_thread(second.store.set_paused, "sum", False)
    await clock.set(START.replace(minute=2, second=0))
    [_, (_, mine)] = await ran(first, 2)
    [_, (_, theirs)] = await ran(second, 2)
    assert sorted([str(mine.refused), str(theirs.refused)]) == ["None", "claimed already"]
    assert [r.tick_ms for r in first.store.runs("sum")] == [tick(2)]


async def test_two_mesh_run_processes_of_two_state_dirs_share_a_postgresql_record_and_run_each_tick_once(
    postgres_url: str, broker_url: str, broker_settings: BrokerSettings, namespace: str, tmp_path: Path
) -> None:
    """Two hosts' `mesh run` of one file: each its own state dir, both a replica of the calculator
    whose tasks are in the file's PostgreSQL store; the schedules claim their ticks there too."""
    path = tmp_path / "schedules.yaml"
    path.write_text(
        f"namespace: {namespace}\n"
        "agents:\n"
        "  - {class: agents.builtin.calculator:CalculatorAgent, shared_subscription: true, store: "
        f"'{postgres_url}'}}\n"
        "schedules:\n  - {name: often, agent: calculator, message: '1 + 1', every: 1s}\n"
    )
    async with contextlib.AsyncExitStack() as stack:
        processes = []
        for host in ("a", "b"):
            env = {"MESH_BROKER_URL": broker_url, "MESH_STATE_DIR": str(tmp_path / host)}
            process = await start_mesh("run", str(path), **env)
            stack.push_async_callback(process.stop)
            processes.append(process)
            line = await process.wait_for_line("schedules:schedules.yaml: running often (every 1s)", timeout=60)
            assert line.rstrip().endswith(f"runs claimed in {postgres_url}"), line
        await lines_in(processes, "of calculator completed", 4)
        env = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace, "MESH_STATE_DIR": str(tmp_path / "c")}
        shown = await mesh("agents", "--store", postgres_url, **env)  # a third host: the shared record
        assert "scheduled: calculator by often (every 1s), next " in shown.stdout, shown
        alone = await mesh("agents", **env)  # its own machine's record has no schedule
        assert alone.code == 0 and "scheduled:" not in alone.stdout, alone
        store = PostgresScheduleStore(parse_store_url(postgres_url), namespace)
        stack.callback(store.close)
        runs = [r for r in store.runs("often") if r.outcome == "completed"]
        ticks = await scheduled_ticks(broker_settings, namespace)  # the calculator's tasks, in the shared store
    assert len(ticks) == len(set(ticks)), ticks  # each tick reached the agent once
    assert {r.tick_ms for r in runs} <= {tick_of(t) for t in ticks}
    assert not any((tmp_path / host / namespace / "schedules.sqlite").exists() for host in ("a", "b"))


async def lines_in(processes: list[Any], text: str, count: int, timeout: float = 60) -> None:
    """Until the processes' stderr together have ``count`` lines with ``text``."""

    def seen() -> int:
        return sum(text in line for p in processes for line in p.stderr_lines)

    async with asyncio.timeout(timeout):
        while seen() < count:
            waits = [asyncio.ensure_future(p._changed.wait()) for p in processes]
            for p in processes:
                p._changed.clear()
            if seen() < count:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for waiting in waits:
                waiting.cancel()


def test_the_schedules_of_a_file_claim_in_the_store_its_agents_share(tmp_path: Path) -> None:
    path = tmp_path / "mesh.yaml"
    agent = "{{class: agents.builtin.echo:EchoAgent, name: {name}, store: '{url}'}}"
    schedule = "schedules:\n  - {name: a, agent: one, message: x, every: 1m}\n"
    one = "postgresql://mesh@db.example:5432/mesh"
    path.write_text(
        f"agents:\n  - {agent.format(name='one', url=one)}\n  - {agent.format(name='two', url=one)}\n{schedule}"
    )
    [scheduler] = [c for c in build_components(load_config(path), BrokerSettings()) if isinstance(c, Scheduler)]
    assert isinstance(scheduler.store, PostgresScheduleStore) and scheduler.store.where == one
    other = "postgresql://mesh:secret@db2.example:5432/mesh"
    path.write_text(
        f"agents:\n  - {agent.format(name='one', url=one)}\n  - {agent.format(name='two', url=other)}\n{schedule}"
    )
    with pytest.raises(ConfigError) as refused:
        build_components(load_config(path), BrokerSettings())
    assert str(refused.value).startswith(f"{path}: schedules: the file's entries name 2 stores")
    assert "secret" not in str(refused.value) and "give the file's agents one store:" in str(refused.value)


def test_a_record_made_before_runs_kept_their_user_is_brought_up_to_date(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "schedules.sqlite"
    with contextlib.closing(sqlite3.connect(path)) as db:  # the first version's runs table
        db.execute(
            "CREATE TABLE runs (schedule TEXT NOT NULL, tick INTEGER NOT NULL, claimed_by TEXT NOT NULL, "
            "claimed_at REAL NOT NULL, deadline REAL NOT NULL, manual INTEGER NOT NULL DEFAULT 0, task_id TEXT, "
            "outcome TEXT, ended_at REAL, PRIMARY KEY (schedule, tick))"
        )
        db.execute("INSERT INTO runs VALUES ('sum', 1, 'old', 0, 0, 0, 't0', 'completed', 0)")
        db.commit()
    store = SqliteScheduleStore(path)
    request = {"agent": "calculator", "text": "2 + 2", "data": None, "contextId": None}
    assert store.claim("sum", 2, "new", max_concurrent=1, timeout_s=60, user="ada", request=request) is None
    store.ended("sum", 2, "completed", "t1", {"kind": "message", "contextId": "c"})
    [run] = store.user_runs("ada", {})
    assert (run.tick_ms, run.task_id, run.request["text"], run.answer) == (
        2,
        "t1",
        "2 + 2",
        {"kind": "message", "contextId": "c"},
    )
    assert [r.tick_ms for r in store.runs("sum")] == [2, 1] and store.user_runs("ada", {"sum": 2}) == []


async def test_a_record_out_of_reach_ends_the_start_saying_where_and_what_to_check(
    serve_agent: ServeAgent, broker_settings: BrokerSettings, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(CalculatorAgent())
    url = "postgresql://mesh:hunter2@127.0.0.1:1/mesh"  # nothing listens on port 1
    store = PostgresScheduleStore(parse_store_url(url), namespace)
    scheduler = Scheduler(
        [spec(every="1m")], broker=broker_settings, namespace=namespace, source=tmp_path / "m.yaml", store=store
    )
    with pytest.raises(ConfigError) as refused:
        await scheduler.start()
    message = str(refused.value)
    assert message.startswith(
        "schedules:m.yaml: cannot write the schedules' record postgresql://mesh:***@127.0.0.1:1/mesh: "
    )
    assert "$MESH_STORE_PASSWORD" in message and "hunter2" not in message
    assert scheduler.client is None
