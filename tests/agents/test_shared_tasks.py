"""Replicas on a shared PostgreSQL store: any answers for any task, a dead one's are taken over.

Each test asks one replica about a task another holds by sending the follow-up to that other
replica's instance topic (the client told it owns the task), as a caller that reached it would.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import textwrap
import time
from pathlib import Path

import pytest

from agents import Agent, AgentSettings
from agents.context import TaskContext
from agents.pgjournal import PostgresJournal
from agents.service import AgentService
from agents.sharedtasks import SharedTasks
from agents.tasks import TaskRecord, TaskStore
from mesh.a2a import Message, Task, TaskState, get_text_from_message
from mesh.artifacts import ArtifactRef, ArtifactSettings, read_all
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.errors import ConfigError
from mesh.store import parse_store_url
from mesh.telemetry.metrics import METRICS
from tests.agents.service_agents import Blocker, Echo, Namer
from tests.conftest import ServeAgent
from tests.support import start_replica_script


def replicas(postgres_url: str, **more: object) -> AgentSettings:
    return AgentSettings(shared_subscription=True, store=postgres_url, **more)  # type: ignore[arg-type]


def ask_via(client: MeshClient, agent: str, task_id: str, instance: str | None) -> None:
    """Send the task's next follow-up to ``instance``."""
    assert instance is not None
    client.calls.learned_owner(agent, task_id, instance)


async def two(serve_agent: ServeAgent, agent: type[Echo | Blocker], settings: AgentSettings) -> list[AgentService]:
    return [await serve_agent(agent(), settings) for _ in range(2)]


def holder(services: list[AgentService], task_id: str) -> tuple[AgentService, AgentService]:
    """(the replica that holds the task, the other one)."""
    first, second = services
    return (first, second) if first.tasks.get(task_id) is not None else (second, first)


async def test_any_replica_answers_get_and_list_for_the_others_tasks(
    serve_agent: ServeAgent, client: MeshClient, postgres_url: str
) -> None:
    services = await two(serve_agent, Echo, replicas(postgres_url))
    sent = [await client.send("echo", f"hello {n}") for n in range(20)]
    tasks = [t for t in sent if isinstance(t, Task)]
    assert len(tasks) == 20
    for task in tasks:
        ran, other = holder(services, task.id)
        assert other.tasks.get(task.id) is None  # only in the store for the other
        await wait_until_stored(SharedTasks(ran.journal), task.id, terminal=True)  # type: ignore[arg-type]
        ask_via(client, "echo", task.id, other.instance)
        got = await client.get_task("echo", task.id)
        assert got.id == task.id and got.status.state is TaskState.completed
        assert client.calls.owner_of("echo", task.id) == other.instance  # the other one answered
    listed = await client.list_tasks("echo")
    assert {t.id for t in tasks} <= {t.id for t in listed.tasks}


async def test_cancel_and_resubscribe_reach_the_replica_running_the_task(
    serve_agent: ServeAgent, client: MeshClient, postgres_url: str
) -> None:
    services = await two(serve_agent, Blocker, replicas(postgres_url))
    sent = [await client.send("blocker", f"work {n}", blocking=False) for n in range(6)]
    tasks = [t for t in sent if isinstance(t, Task)]
    for task in tasks:  # stored (its request acknowledged only then) before the other is asked
        ran, other = holder(services, task.id)
        shared = SharedTasks(ran.journal)  # type: ignore[arg-type]
        await wait_until_stored(shared, task.id)
        ask_via(client, "blocker", task.id, other.instance)
        stream = client.resubscribe("blocker", task.id)
        first = await anext(stream)
        await stream.aclose()
        assert isinstance(first, Task) and first.id == task.id and first.status.state is TaskState.working
        ask_via(client, "blocker", task.id, other.instance)
        canceled = await client.cancel_task("blocker", task.id)
        assert canceled.status.state is TaskState.canceled
        record = ran.tasks.get(task.id)
        assert record is not None and record.state is TaskState.canceled  # canceled where it ran
        assert other.tasks.get(task.id) is None


async def wait_until_stored(shared: SharedTasks, task_id: str, *, terminal: bool = False) -> None:
    """Answers do not wait for the store (agents.journal): a just finished task is written a batch later."""
    async with asyncio.timeout(10):
        while (found := await shared.get(task_id)) is None or (terminal and not found.terminal):
            await asyncio.sleep(0.02)


async def start_replica(
    broker_url: str, namespace: str, store: str, agent: str = "Blocker"
) -> tuple[asyncio.subprocess.Process, str]:
    """A replica of ``agent`` (of tests.agents.service_agents) on the shared store in a process of
    its own (to kill -9), and its instance id."""
    script = textwrap.dedent(
        f"""
        import asyncio
        from agents import AgentSettings
        from agents.service import AgentService
        from mesh.broker import BrokerSettings
        from tests.agents.service_agents import {agent}
        async def main():
            broker = BrokerSettings.from_url({broker_url!r})
            settings = AgentSettings(shared_subscription=True, store={store!r})
            service = AgentService({agent}(), broker=broker, namespace={namespace!r}, settings=settings)
            await service.start()
            print("ready", service.instance, flush=True)
            await asyncio.Event().wait()
        asyncio.run(main())
        """
    )
    return await start_replica_script(script, timeout_s=30)


async def test_a_killed_replicas_running_tasks_are_failed_by_another_saying_why(
    serve_agent: ServeAgent,
    client: MeshClient,
    broker_url: str,
    namespace: str,
    postgres_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    proc, victim = await start_replica(broker_url, namespace, postgres_url)
    try:
        sent = [await client.send("blocker", f"work {n}", blocking=False) for n in range(5)]
        tasks = [t for t in sent if isinstance(t, Task)]
        assert len(tasks) == 5  # all on the victim: the only replica yet
        survivor = await serve_agent(Blocker(), replicas(postgres_url))
        shared = SharedTasks(survivor.journal)  # type: ignore[arg-type]
        for task in tasks:
            await wait_until_stored(shared, task.id)
        caplog.set_level(logging.WARNING, logger="agents.takeover")
        killed_at = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        for task in tasks:
            await wait_until_stored(shared, task.id, terminal=True)
        took = time.monotonic() - killed_at
        for task in tasks:
            ask_via(client, "blocker", task.id, survivor.instance)
            got = await client.get_task("blocker", task.id)
            assert got.status.state is TaskState.failed
            assert got.status.message is not None
            reason = get_text_from_message(got.status.message)
            assert victim in reason and "on_owner_lost: fail" in reason, reason
        assert any(victim in r.getMessage() and "took over 5" in r.getMessage() for r in caplog.records)
        assert METRICS.component(namespace, "blocker").taken_over.get("failed") == 5
        print(f"takeover after kill -9: {took:.2f} s")  # measured in bench/agent.py; not asserted
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()


async def test_a_lapsed_lease_is_taken_over_and_its_late_writes_are_fenced_out(
    serve_agent: ServeAgent, namespace: str, postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A replica cut off from the broker sends no will: its lease lapses, another takes its tasks,
    and what the cut-off one writes later (its task completed after all) leaves the outcome be."""
    url = parse_store_url(postgres_url)
    ghost = PostgresJournal(url, namespace=namespace, agent_name="blocker", instance="blocker-ghost", shared=True)
    ghost.lease_s = 0.3
    await asyncio.to_thread(ghost.load)
    ghost.start(asyncio.get_running_loop())
    store = TaskStore(retention_s=3600, max_finished=100, max_bytes=10_000_000, journal=ghost)
    record = TaskRecord.new("t-ghost", "ctx")
    store.add(record)
    record.set_status(TaskState.working)
    store.changed(record)
    stored = asyncio.get_running_loop().create_future()
    ghost.after_durable(lambda: stored.set_result(None))
    await asyncio.wait_for(stored, 5)
    ghost._renewer.cancel()  # type: ignore[union-attr]  # cut off: it renews no more
    survivor = await serve_agent(Blocker(), replicas(postgres_url, task_lease_s=0.6))
    shared = SharedTasks(survivor.journal)  # type: ignore[arg-type]
    async with asyncio.timeout(10):
        while not (found := await shared.get("t-ghost")) or not found.terminal:
            await asyncio.sleep(0.05)
    assert found.instance == survivor.instance and found.task.status.state is TaskState.failed
    caplog.set_level(logging.INFO, logger="agents.pgjournal")
    record.set_status(TaskState.completed)  # the cut-off replica finishes it after all
    store.changed(record)
    store.finished(record)
    await ghost.close()
    after = await shared.get("t-ghost")
    assert after is not None and after.task.status.state is TaskState.failed  # one terminal state, kept
    assert any("blocker-ghost" in r.getMessage() and "not stored" in r.getMessage() for r in caplog.records)
    taken = survivor.tasks.get("t-ghost")
    assert taken is not None and taken.state is TaskState.failed


class Finisher(Agent):
    """A replica of ``blocker`` that resumes the tasks it takes over, and finishes them."""

    name = "blocker"
    resumes_tasks = True

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        return f"finished here: {get_text_from_message(message)}"


async def test_on_owner_lost_resume_runs_a_dead_replicas_tasks_again_where_the_agent_resumes(
    serve_agent: ServeAgent, client: MeshClient, broker_url: str, namespace: str, postgres_url: str
) -> None:
    proc, victim = await start_replica(broker_url, namespace, postgres_url)
    try:
        sent = [await client.send("blocker", f"work {n}", blocking=False) for n in range(3)]
        tasks = [t for t in sent if isinstance(t, Task)]
        survivor = await serve_agent(Finisher(), replicas(postgres_url, on_owner_lost="resume"))
        shared = SharedTasks(survivor.journal)  # type: ignore[arg-type]
        for task in tasks:
            await wait_until_stored(shared, task.id)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        for n, task in enumerate(tasks):
            await wait_until_stored(shared, task.id, terminal=True)
            found = await shared.get(task.id)
            assert found is not None and found.task.status.state is TaskState.completed
            assert found.instance == survivor.instance and victim != survivor.instance
            record = survivor.tasks.get(task.id)
            assert record is not None
            assert f"finished here: work {n}" in record.task.model_dump_json()
        assert METRICS.component(namespace, "blocker").taken_over.get("resumed") == 3
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()


async def test_a_store_that_refuses_the_login_fails_the_start_saying_what_to_check(
    serve_agent: ServeAgent, postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MESH_STORE_PASSWORD", "not-the-password")
    with pytest.raises(ConfigError) as raised:
        await serve_agent(Echo(), replicas(postgres_url))
    message = str(raised.value)
    assert postgres_url in message and "MESH_STORE_PASSWORD" in message and "mesh doctor --store" in message
    assert "not-the-password" not in message


class Saver(Agent):
    """Saves each message's text as an artifact and answers with its URI."""

    name = "saver"

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        return await ctx.save_artifact("note.txt", get_text_from_message(message).encode(), "text/plain")


async def test_an_artifact_one_replica_saved_is_listed_and_read_by_another_through_the_shared_catalog(
    broker_settings: BrokerSettings, client: MeshClient, namespace: str, postgres_url: str, tmp_path: Path
) -> None:
    shared_folder = ArtifactSettings(store=postgres_url, path=str(tmp_path / "shared-volume"))
    services = [
        AgentService(Saver(), broker=broker_settings, namespace=namespace, settings=replicas(postgres_url), artifacts=a)
        for a in (shared_folder, shared_folder.model_copy())
    ]
    for service in services:
        await service.start()
    try:
        await client.wait_for_agent("saver", 5)
        done = [await client.send("saver", f"text {n}") for n in range(8)]
        for n, task in enumerate(done):
            assert isinstance(task, Task) and task.status.state is TaskState.completed
            _, other = holder(services, task.id)
            uri = get_text_from_message(task.status.message) if task.status.message else ""
            ref = ArtifactRef.parse(uri)
            listed = await other.artifacts.list(task.context_id)  # the other replica's own catalog connection
            assert [(i.name, i.owner_task) for i in listed] == [("note.txt", task.id)]
            assert await read_all(other.artifacts, ref) == f"text {n}".encode()
        # Saves on both replicas at once: each gets its own version, none lost.
        a, b = (s.artifacts for s in services)
        saved = await asyncio.gather(*(store.save("ctx", "same.txt", b"x") for _ in range(5) for store in (a, b)))
        assert sorted(i.version for i in saved) == list(range(1, 11))
        assert [i.version for i in await a.list("ctx")] == list(range(1, 11))
    finally:
        for service in services:
            await service.stop()


async def waiting_on_a_killed_owner(
    serve_agent: ServeAgent, client: MeshClient, broker_url: str, namespace: str, postgres_url: str, count: int
) -> tuple[asyncio.subprocess.Process, str, AgentService, list[Task]]:
    """``count`` input-required tasks of a Namer replica the client knows as their owner, that
    replica killed (kill -9) and its tasks taken over by the survivor (in this process)."""
    proc, victim = await start_replica(broker_url, namespace, postgres_url, "Namer")
    await client.wait_for_agent("namer", 5)
    sent = [await client.send("namer", f"hi {n}") for n in range(count)]
    tasks = [t for t in sent if isinstance(t, Task)]
    assert [t.status.state for t in tasks] == [TaskState.input_required] * count
    assert {client.calls.owner_of("namer", t.id) for t in tasks} == {victim}  # the client remembers the owner
    survivor = await serve_agent(Namer(), replicas(postgres_url))
    shared = SharedTasks(survivor.journal)  # type: ignore[arg-type]
    for task in tasks:
        await wait_until_stored(shared, task.id)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    async with asyncio.timeout(10):  # its will came: the survivor claimed them (they stay input-required)
        while any(survivor.tasks.get(t.id) is None for t in tasks):
            await asyncio.sleep(0.02)
    return proc, victim, survivor, tasks


async def test_a_follow_up_message_to_a_killed_owner_continues_the_input_required_task_on_another_replica(
    serve_agent: ServeAgent, client: MeshClient, broker_url: str, namespace: str, postgres_url: str
) -> None:
    proc, victim, survivor, tasks = await waiting_on_a_killed_owner(
        serve_agent, client, broker_url, namespace, postgres_url, 2
    )
    try:
        answered = await client.send("namer", "name:Ada", task_id=tasks[0].id, timeout=10)
        assert isinstance(answered, Task) and answered.status.state is TaskState.completed
        assert answered.status.message is not None and get_text_from_message(answered.status.message) == "Hello, Ada!"
        streamed = [item async for item in client.stream("namer", "name:Bo", task_id=tasks[1].id, idle_timeout=10)]
        last = streamed[-1]
        assert isinstance(last, Task) and last.status.state is TaskState.completed
        for task in tasks:  # continued where the tasks now live
            record = survivor.tasks.get(task.id)
            assert record is not None and record.state is TaskState.completed
            assert client.calls.owner_of("namer", task.id) != victim
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()


async def test_get_cancel_and_resubscribe_after_the_owner_was_killed_reach_the_replica_that_took_over(
    serve_agent: ServeAgent, client: MeshClient, broker_url: str, namespace: str, postgres_url: str
) -> None:
    proc, _, survivor, tasks = await waiting_on_a_killed_owner(
        serve_agent, client, broker_url, namespace, postgres_url, 3
    )
    try:
        got = await client.get_task("namer", tasks[0].id)
        assert got.id == tasks[0].id and got.status.state is TaskState.input_required
        stream = client.resubscribe("namer", tasks[1].id)
        first = await anext(stream)
        await stream.aclose()
        assert isinstance(first, Task) and first.id == tasks[1].id and first.status.state is TaskState.input_required
        canceled = await client.cancel_task("namer", tasks[2].id)
        assert canceled.status.state is TaskState.canceled
        record = survivor.tasks.get(tasks[2].id)
        assert record is not None and record.state is TaskState.canceled
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGKILL)
            await proc.wait()


async def test_a_follow_up_message_reaching_another_replica_is_forwarded_to_the_live_owner(
    serve_agent: ServeAgent, client: MeshClient, postgres_url: str
) -> None:
    services = await two(serve_agent, Namer, replicas(postgres_url))
    for n in range(4):
        task = await client.send("namer", f"hi {n}")
        assert isinstance(task, Task) and task.status.state is TaskState.input_required
        ran, other = holder(services, task.id)
        await wait_until_stored(SharedTasks(ran.journal), task.id)  # type: ignore[arg-type]
        ask_via(client, "namer", task.id, other.instance)  # the follow-up reaches the replica without it
        answered = await client.send("namer", f"name:N{n}", task_id=task.id, timeout=10)
        assert isinstance(answered, Task) and answered.status.state is TaskState.completed
        record = ran.tasks.get(task.id)
        assert record is not None and record.state is TaskState.completed  # continued where it waited
        assert other.tasks.get(task.id) is None


@pytest.mark.parametrize("via", ["another replica", "the dead owner"])
async def test_a_follow_up_message_for_a_dead_owner_whose_will_never_came_takes_the_task_over_first(
    serve_agent: ServeAgent, client: MeshClient, namespace: str, postgres_url: str, via: str
) -> None:
    """Its lease still runs and no will came (a partition), but nobody listens on its instance
    topic: the replica the follow-up reaches claims the task and continues it, no "task not found".
    Sent to the dead owner's instance topic (the client remembers it), the broker finds no
    subscriber there and the call path sends it to the agent's shared topic instead."""
    url = parse_store_url(postgres_url)
    ghost = PostgresJournal(url, namespace=namespace, agent_name="namer", instance="namer-ghost", shared=True)
    await asyncio.to_thread(ghost.load)
    ghost.start(asyncio.get_running_loop())
    store = TaskStore(retention_s=3600, max_finished=100, max_bytes=10_000_000, journal=ghost)
    record = TaskRecord.new("t-ghost", "ctx-ghost")
    store.add(record)
    record.set_status(TaskState.input_required)
    store.changed(record)
    stored = asyncio.get_running_loop().create_future()
    ghost.after_durable(lambda: stored.set_result(None))
    await asyncio.wait_for(stored, 5)
    survivor = await serve_agent(Namer(), replicas(postgres_url))
    try:
        found = await SharedTasks(survivor.journal).get("t-ghost")  # type: ignore[arg-type]
        assert found is not None and found.leased and found.instance == "namer-ghost"
        await client.list_tasks("namer")  # the client watches the agent's replica cards from now on
        async with asyncio.timeout(5):  # its retained replica card came
            while survivor.instance not in client.calls.owners._live.get("namer", ()):
                await asyncio.sleep(0.02)
        ask_via(client, "namer", "t-ghost", "namer-ghost" if via == "the dead owner" else survivor.instance)
        answered = await client.send("namer", "name:Gus", task_id="t-ghost", timeout=10)
        assert isinstance(answered, Task) and answered.status.state is TaskState.completed
        taken = survivor.tasks.get("t-ghost")
        assert taken is not None and taken.state is TaskState.completed
    finally:
        await ghost.close()
