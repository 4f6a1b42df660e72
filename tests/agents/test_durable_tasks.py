"""Tasks outlive their agent's process (DESIGN, "Delivery guarantees"), on the real broker.

The agent runs in a process of its own with the default task store (SQLite under the test
run's state directory) and is killed with SIGKILL. What a restart must give back: finished
tasks for ``tasks/get``; the requests that were delivered but not yet acknowledged (the agent
was frozen with SIGSTOP when they arrived) redelivered by the broker and run exactly once;
a task that was running fails "agent restarted"; a repeated request is answered from the
recorded task, not run again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from agents.journal import journal_path
from mesh.a2a import Task, TaskState, get_text_from_message, request_bytes
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.properties import MessageProperties
from mesh.transport import MqttTransport
from tests.conftest import TransportFactory
from tests.mesh.cli_process import start_mesh
from tests.support import Inbox, raw_request, start_agent_process
from topics import get_agent_request_topic, get_client_response_topic


def send_payload(text: str, ledger: Path, request_id: str) -> bytes:
    message = {"role": "user", "parts": [{"kind": "text", "text": text}], "messageId": uuid.uuid4().hex}
    return request_bytes("message/send", request_id, {"message": message, "metadata": {"ledger": str(ledger)}})


def stored(store: Path, task_id: str) -> bool:
    """Whether the agent's task store has committed a row for the task (read from outside)."""
    # A URI: the path quoted (a namespace's directory holds percent-encoded characters).
    with contextlib.closing(sqlite3.connect(f"file:{quote(str(store))}?mode=ro", uri=True)) as db:
        return db.execute("SELECT 1 FROM task_rows WHERE id = ?", (task_id,)).fetchone() is not None


def runs(ledger: Path) -> list[str]:
    return ledger.read_text().split() if ledger.exists() else []


async def until(condition: Any, timeout: float = 10.0) -> None:
    """Poll a condition on another process's side effects (a file), up to ``timeout`` s."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


@pytest.fixture
async def client(make_transport: TransportFactory) -> MqttTransport:
    return await make_transport()


@pytest.fixture
async def agent_processes() -> AsyncIterator[list[asyncio.subprocess.Process]]:
    procs: list[asyncio.subprocess.Process] = []
    yield procs
    for proc in procs:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_a_restarted_agent_keeps_its_tasks_and_runs_redelivered_requests_once(
    broker_url: str,
    namespace: str,
    client: MqttTransport,
    tmp_path: Path,
    agent_processes: list[asyncio.subprocess.Process],
) -> None:
    ledger = tmp_path / "ledger.txt"
    request_topic = get_agent_request_topic(namespace, "ledger")
    agent_processes.append(proc := await start_agent_process(broker_url, namespace, "ledger", agent="Ledger"))
    store = journal_path("", namespace, "ledger")
    assert store is not None

    # A finished task, and one running when the agent dies.
    finished = json.loads(
        (
            await raw_request(
                client, namespace, request_topic, send_payload("done-1", ledger, "t-done"), correlation_id="c0"
            )
        ).payload
    )
    assert finished["result"]["status"]["state"] == "completed"
    # The default task store is a SQLite file per agent, made with its first task; an answer
    # leaves only once the task it reports is stored.
    await until(store.exists)
    inbox = Inbox()
    reply_topic = get_client_response_topic(namespace, f"durable-{uuid.uuid4().hex[:8]}")
    await client.subscribe(reply_topic, inbox)

    async def send(text: str, request_id: str) -> bytes:
        payload = send_payload(text, ledger, request_id)
        props = MessageProperties(reply_to=reply_topic, correlation_data=request_id.encode())
        await client.publish(request_topic, payload, properties=props)
        return payload

    async def get(task_id: str) -> dict[str, Any]:
        payload = request_bytes("tasks/get", uuid.uuid4().hex, {"id": task_id})
        answer = await raw_request(client, namespace, request_topic, payload, correlation_id=uuid.uuid4().hex)
        result: dict[str, Any] = json.loads(answer.payload)["result"]
        return result

    await send("hang-1", "t-hang")
    await until(lambda: "hang-1" in runs(ledger) and stored(store, "t-hang"))
    # Its acknowledgement was queued on the agent's loop when the row was committed, so it
    # went out before the agent reads this request (which crossed the broker after it).
    assert (await get("t-hang"))["status"]["state"] == "working"

    # Frozen, the agent receives three requests it can neither record nor acknowledge; then it dies.
    proc.send_signal(signal.SIGSTOP)
    for i in range(3):
        await send(f"redo-{i}", f"t-redo-{i}")
    proc.kill()
    await proc.wait()
    assert "redo-0" not in runs(ledger)

    agent_processes.append(await start_agent_process(broker_url, namespace, "ledger", agent="Ledger"))
    answers = await inbox.wait_for(3, timeout=10)
    by_id = {json.loads(m.payload)["id"]: json.loads(m.payload) for m in answers}
    for i in range(3):
        assert by_id[f"t-redo-{i}"]["result"]["status"]["state"] == "completed"
    await until(lambda: all(f"redo-{i}" in runs(ledger) for i in range(3)))

    done = await get("t-done")
    assert done["status"]["state"] == "completed"
    assert done["status"]["message"]["parts"][0]["text"] == "done-1"
    assert [m["parts"][0]["text"] for m in done["history"]] == ["done-1", "done-1"]

    # The task that was running fails once the redelivery window has passed.
    async with asyncio.timeout(10):
        while (hung := await get("t-hang"))["status"]["state"] != "failed":
            await asyncio.sleep(0.1)
    assert "restarted" in hung["status"]["message"]["parts"][0]["text"]

    # The same request id with other bytes (a new messageId) is another request: a new task.
    repeat_payload = send_payload("redo-0", ledger, "t-redo-0")
    fresh = json.loads(
        (await raw_request(client, namespace, request_topic, repeat_payload, correlation_id="cr")).payload
    )
    assert fresh["result"]["id"] != "t-redo-0"

    assert sorted(runs(ledger)) == sorted(["done-1", "hang-1", "redo-0", "redo-0", "redo-1", "redo-2"])
    assert os.path.getsize(store) > 0


async def test_a_repeated_request_is_answered_from_the_recorded_task(
    broker_url: str,
    namespace: str,
    client: MqttTransport,
    tmp_path: Path,
    agent_processes: list[asyncio.subprocess.Process],
) -> None:
    ledger = tmp_path / "ledger.txt"
    request_topic = get_agent_request_topic(namespace, "ledger")
    agent_processes.append(await start_agent_process(broker_url, namespace, "ledger", agent="Ledger"))
    inbox = Inbox()
    reply_topic = get_client_response_topic(namespace, "repeater")
    await client.subscribe(reply_topic, inbox)
    payload = send_payload("once", ledger, "t-once")
    props = MessageProperties(reply_to=reply_topic, correlation_data=b"t-once")
    for _ in range(3):
        await client.publish(request_topic, payload, properties=props)
    answers = [json.loads(m.payload) for m in await inbox.wait_for(3)]
    assert [a["result"]["id"] for a in answers] == ["t-once"] * 3
    assert all(a["result"]["status"]["state"] == "completed" for a in answers)
    assert runs(ledger) == ["once"]


async def test_a_task_waiting_for_input_outlives_a_clean_stop_and_its_answer_resumes_it(
    broker_settings: BrokerSettings, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    config = tmp_path / "agents.yaml"
    config.write_text("agents:\n  - class: agents.builtin.countdown:CountdownAgent\n    config: {interval_s: 0.01}\n")
    env = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
    running = await start_mesh("run", str(config), **env)
    async with MeshClient.connect(broker_settings, namespace) as client:
        await client.wait_for_agent("countdown", timeout=30)
        asked = await client.send("countdown", "count down please")
        assert isinstance(asked, Task) and asked.status.state is TaskState.input_required
        assert await running.stop(signal.SIGINT) == 0, running.output

        running = await start_mesh("run", str(config), **env)
        try:
            await client.wait_for_agent("countdown", timeout=30)
            waiting = await client.get_task("countdown", asked.id)
            assert waiting.status.state is TaskState.input_required  # the question is still there
            assert waiting.status.message is not None and waiting.status.message.parts == asked.status.message.parts  # type: ignore[union-attr]
            done = await client.send("countdown", "2", task_id=asked.id, context_id=asked.context_id)
            assert isinstance(done, Task) and done.status.state is TaskState.completed
            assert done.status.message is not None
            assert get_text_from_message(done.status.message) == "Liftoff! Counted down from 2."
        finally:
            assert await running.stop(signal.SIGINT) == 0, running.output
