"""Worker-backed agents on the real broker: the example workers and a misbehaving one."""

from __future__ import annotations

import asyncio
import logging
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agents.a2e import WorkerAgent, WorkerStartError
from mesh.a2a import (
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
    get_text_from_message,
)
from mesh.client import MeshClient, StreamItem
from mesh.discovery.registry import DiscoveryRegistry
from tests.conftest import ServeAgent

EXAMPLES = Path(__file__).resolve().parent.parents[2] / "agents" / "a2e" / "examples"
SCRIPT = Path(__file__).resolve().parent.parent / "a2e_worker_script.py"
# Fast supervision for the tests; the defaults suit production.
FAST: dict[str, Any] = {"backoff_s": 0.05, "ping_interval_s": 0, "handshake_timeout_s": 10.0}


def script_worker(name: str = "misfit", env: dict[str, str] | None = None, **options: Any) -> WorkerAgent:
    return WorkerAgent(name=name, worker=[sys.executable, str(SCRIPT)], env=env, **{**FAST, **options})


def text_of(task: object) -> str:
    assert isinstance(task, Task) and task.status.message is not None
    return get_text_from_message(task.status.message)


def skill(name: str) -> dict[str, Any]:
    return {"skill": name}


async def send(client: MeshClient, agent: str, name: str, text: str = "", **kw: Any) -> Task:
    result = await client.send(agent, text, metadata=skill(name), **kw)
    assert isinstance(result, Task)
    return result


def statuses(items: Sequence[StreamItem]) -> list[str]:
    return [
        get_text_from_message(i.status.message)
        for i in items
        if isinstance(i, TaskStatusUpdateEvent) and i.status.message is not None
    ]


def chunks(items: Sequence[StreamItem]) -> list[TaskArtifactUpdateEvent]:
    return [i for i in items if isinstance(i, TaskArtifactUpdateEvent)]


async def test_python_worker_serves_send_and_stream(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(WorkerAgent(name="pyworker", worker=[sys.executable, str(EXAMPLES / "echo_worker.py")], **FAST))
    card = await client.wait_for_agent("pyworker")
    assert [(s.id, s.examples) for s in card.skills] == [
        ("echo", ["hello"]),
        ("countdown", ["a whole number from 1 to 20"]),
    ]
    assert text_of(await send(client, "pyworker", "echo", "hi there")) == "hi there"
    items = [i async for i in client.stream("pyworker", "3", metadata=skill("countdown"))]
    assert statuses(items) == ["3...", "2...", "1...", "0...", "Liftoff! Counted down from 3."]
    progress = [i.status.message.metadata for i in items if isinstance(i, TaskStatusUpdateEvent) and i.status.message]
    assert progress[:4] == [{"progress": 0}, {"progress": 33}, {"progress": 67}, {"progress": 100}]
    parts = chunks(items)
    assert [c.artifact.parts[0].text for c in parts] == ["3\n", "2\n", "1\n", "0\n"]  # type: ignore[union-attr]
    assert [bool(c.append) for c in parts] == [False, True, True, True]
    assert [bool(c.last_chunk) for c in parts] == [False, False, False, True]
    final = items[-1]
    assert isinstance(final, Task) and final.status.state is TaskState.completed
    assert final.status.message is not None and final.status.message.parts[1].data == {"from": 3}  # type: ignore[union-attr]
    [artifact] = final.artifacts or []
    assert "".join(p.text for p in artifact.parts) == "3\n2\n1\n0\n"  # type: ignore[union-attr]


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
async def test_javascript_worker_serves_send_and_stream(serve_agent: ServeAgent, client: MeshClient) -> None:
    agent = WorkerAgent(name="shout", worker="node shout.js", cwd=EXAMPLES, env={"SHOUT_LEVEL": "2"}, **FAST)
    await serve_agent(agent)
    card = await client.wait_for_agent("shout")
    assert [s.id for s in card.skills] == ["shout", "spell"]
    assert text_of(await send(client, "shout", "shout", "hello")) == "HELLO!!"
    items = [i async for i in client.stream("shout", "mesh", metadata=skill("spell"))]
    assert statuses(items) == ["m", "e", "s", "h", "mesh has 4 letters"]
    assert "".join(c.artifact.parts[0].text for c in chunks(items)) == "mesh"  # type: ignore[union-attr]
    assert chunks(items)[-1].last_chunk is True
    final = items[-1]
    assert isinstance(final, Task) and final.status.state is TaskState.completed
    failed = await send(client, "shout", "spell", "   ")
    assert (
        failed.status.state is TaskState.failed
        and text_of(failed) == "skill 'spell' failed: skill_error: spell needs a word"
    )


async def test_failing_and_unknown_skills(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(script_worker())
    failed = await send(client, "misfit", "fail")
    assert failed.status.state is TaskState.failed
    assert text_of(failed) == "skill 'fail' failed: skill_error: the input is upside down"
    unknown = await send(client, "misfit", "juggle")
    assert unknown.status.state is TaskState.failed
    assert text_of(unknown).startswith(
        "unknown_skill: agent 'misfit' has no skill 'juggle'; its skills are: echo, fail"
    )
    unnamed = await client.send("misfit", "which one?")
    assert isinstance(unnamed, Task) and unnamed.status.state is TaskState.failed
    assert "serves 7 skills" in text_of(unnamed) and '{"skill": "<name>"}' in text_of(unnamed)
    assert "name one: mesh send misfit --skill echo ..., or" in text_of(unnamed)  # the CLI's way first


async def test_the_only_skill_needs_no_name_and_data_parts_are_the_arguments(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    from mesh.a2a import DataPart, Message, Role, new_id

    await serve_agent(WorkerAgent(name="one", worker=[sys.executable, str(SCRIPT)], **FAST))
    agent_skills = (await client.wait_for_agent("one")).skills
    assert len(agent_skills) == 7
    message = Message(message_id=new_id(), role=Role.user, parts=[DataPart(data={"seconds": 0.01})])
    slept = await client.send("one", message, metadata=skill("slow"))
    assert isinstance(slept, Task) and slept.status.state is TaskState.completed and text_of(slept) == "slept"


async def test_a_retryable_error_is_retried(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(script_worker(retry_backoff_s=0.01))
    task = await send(client, "misfit", "flaky")
    assert task.status.state is TaskState.completed and text_of(task) == "worked the second time"


async def test_a_crash_fails_the_task_at_once_and_the_worker_restarts(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    await serve_agent(script_worker())
    stream = client.stream("misfit", "", metadata=skill("crash"))
    first = await anext(stream)
    assert isinstance(first, TaskStatusUpdateEvent)
    rest = await asyncio.wait_for(_collect(stream), 2.0)  # the bound: failed within 2 s
    final = rest[-1]
    assert isinstance(final, Task) and final.status.state is TaskState.failed
    assert "exited with status 3" in text_of(final) and "fatal: the flux capacitor broke" in text_of(final)
    assert "x" * 2000 + " | fatal" in text_of(final)  # the huge line, cut
    assert text_of(await send(client, "misfit", "echo", "back again")) == "back again"


async def _collect(stream: Any) -> list[StreamItem]:
    return [item async for item in stream]


async def test_a_worker_that_refuses_the_handshake_fails_the_start(serve_agent: ServeAgent) -> None:
    with pytest.raises(WorkerStartError) as refused:
        await serve_agent(script_worker(env={"REFUSE": "no licence for this host"}))
    assert "refused the handshake: no licence for this host" in str(refused.value)
    assert "refusing: no licence for this host" in str(refused.value)  # its stderr tail
    silent = WorkerAgent(
        name="mute", worker=[sys.executable, "-c", "import time; time.sleep(60)"], handshake_timeout_s=0.3
    )
    with pytest.raises(WorkerStartError, match=r"did not answer the handshake within 0.3 s"):
        await serve_agent(silent)
    with pytest.raises(WorkerStartError, match=r"cannot run .*no-such-worker"):
        await serve_agent(WorkerAgent(name="ghost", worker=["no-such-worker"]))


async def test_garbage_lines_are_reported_and_skipped(
    serve_agent: ServeAgent, client: MeshClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="agents.a2e.process"):
        await serve_agent(script_worker(env={"GARBAGE": "1"}, max_line_bytes=1000))
        assert text_of(await send(client, "misfit", "echo", "still fine")) == "still fine"
    bad = [r.getMessage() for r in caplog.records if "skipped a stdout line" in r.getMessage()]
    # Three bad lines before each of the handshake, discovery and call answers, once each.
    assert len(bad) == 9
    assert sum("not JSON" in m for m in bad) == 3 and sum("a JSON list" in m for m in bad) == 3
    assert sum("over the limit of 1000" in m for m in bad) == 3


async def test_max_parallel_bounds_the_calls_in_flight(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(script_worker(env={"MAX_PARALLEL": "2"}))
    tasks = await asyncio.gather(*(send(client, "misfit", "slow", "0.2") for _ in range(5)))
    assert all(t.status.state is TaskState.completed for t in tasks)
    seen = [t.status.message.parts[1].data["max_in_flight"] for t in tasks]  # type: ignore[union-attr]
    assert max(seen) == 2


async def test_cancel_ends_the_task_at_once_and_discards_the_late_answer(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    await serve_agent(script_worker(env={"MAX_PARALLEL": "1", "CANCEL_CAP": "1"}))
    stream = client.stream("misfit", "1.0", metadata=skill("slow"))
    first = await anext(stream)
    assert isinstance(first, TaskStatusUpdateEvent)
    canceled = await client.cancel_task("misfit", first.task_id)
    assert canceled.status.state is TaskState.canceled
    rest = await _collect(stream)
    assert isinstance(rest[-1], Task) and rest[-1].status.state is TaskState.canceled
    # The next call waits for the slot the canceled one holds until the worker answered it;
    # the worker (which accepted the cancel capability) got one skill/cancel.
    after = await send(client, "misfit", "cancels")
    assert after.status.state is TaskState.completed
    assert len(after.status.message.parts[0].data["cancels"]) == 1  # type: ignore[union-attr]
    done = await client.get_task("misfit", first.task_id)
    assert done.status.state is TaskState.canceled  # the late answer did not change it


async def test_a_worker_that_stops_answering_ping_is_killed_and_restarted(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    await serve_agent(script_worker(ping_interval_s=0.2, ping_timeout_s=0.5))
    stalled = await send(client, "misfit", "stall")
    assert stalled.status.state is TaskState.failed
    assert "killed by SIGKILL (it did not answer ping within 0.5 s)" in text_of(stalled)
    assert text_of(await send(client, "misfit", "echo", "alive")) == "alive"


async def test_past_its_restarts_the_agent_leaves_the_mesh(
    serve_agent: ServeAgent, client: MeshClient, namespace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    registry = DiscoveryRegistry(client.transport, namespace)
    gone = asyncio.Event()
    registry.add_listener(lambda e: gone.set() if e.type == "removed" and e.name == "misfit" else None)
    await registry.start()
    try:
        await serve_agent(script_worker(env={"ONCE": str(tmp_path / "started")}, max_restarts=2))
        await registry.wait_for("misfit", 5)
        crashed = await send(client, "misfit", "crash")
        assert crashed.status.state is TaskState.failed
        await gone.wait()
    finally:
        await registry.stop()
    assert "failed 3 times in a row; the agent gave up on it and leaves the mesh" in caplog.text
    assert "cannot start twice" in caplog.text


async def test_a_call_without_an_answer_times_out(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(script_worker(call_timeout_s=1, answer_grace_s=0.1))
    task = await send(client, "misfit", "slow", "30")
    assert task.status.state is TaskState.failed
    assert text_of(task).startswith("timeout: worker 'misfit' did not answer skill 'slow' within 1 s")
