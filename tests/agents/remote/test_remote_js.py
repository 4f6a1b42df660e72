"""The proxy against an @a2a-js/sdk server (Node, tests/agents/remote_js/server.mjs).

Skipped, saying so, when Node or the server's packages are missing (.ci/setup installs them:
``npm install --no-package-lock`` in tests/agents/remote_js).
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from mesh.a2a import Task, TaskState, TaskStatusUpdateEvent, TextPart
from mesh.brokertools.localbroker import free_port
from mesh.client import MeshClient
from tests.agents.remote.conftest import ServeRemote

SERVER = Path(__file__).resolve().parents[1] / "remote_js"
NODE = shutil.which("node")

pytestmark = [
    pytest.mark.skipif(NODE is None, reason="node is not installed: the @a2a-js/sdk tests need Node.js 20"),
    pytest.mark.skipif(
        not (SERVER / "node_modules" / "@a2a-js" / "sdk").is_dir(),
        reason=f"@a2a-js/sdk is not installed: run 'npm install --no-package-lock' in {SERVER} (.ci/setup does)",
    ),
]


def text_of(task: object) -> str:
    assert isinstance(task, Task) and task.status.message is not None, task
    return "".join(p.text for p in task.status.message.parts if isinstance(p, TextPart))


@pytest.fixture
async def js_card_url() -> AsyncIterator[str]:
    port = free_port()
    assert NODE is not None
    proc = await asyncio.create_subprocess_exec(
        NODE, "server.mjs", str(port), cwd=SERVER, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.strip() == b"ready", f"the Node server said {line!r}"
        yield f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    finally:
        proc.terminate()
        await proc.wait()


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_send_stream_and_input_required_with_a_js_remote(
    js_card_url: str, serve_remote: ServeRemote, client: MeshClient, binding: str
) -> None:
    await serve_remote("jsweather", card_url=js_card_url, binding=binding)
    card = await client.wait_for_agent("jsweather", timeout=5)
    assert card.version == "0.9.0" and [s.id for s in card.skills] == ["weather"]
    assert text_of(await client.send("jsweather", "hi")) == "echo: hi"
    items = [item async for item in client.stream("jsweather", "steps")]
    steps = [
        "".join(p.text for p in i.status.message.parts if isinstance(p, TextPart))
        for i in items
        if isinstance(i, TaskStatusUpdateEvent) and i.status.message is not None
    ]
    assert steps == ["one", "two", "three", "done"]
    asked = await client.send("jsweather", "ask")
    assert isinstance(asked, Task) and asked.status.state is TaskState.input_required
    answered = await client.send("jsweather", "Rome", task_id=asked.id, context_id=asked.context_id)
    assert text_of(answered) == "weather in Rome: sunny"
    got = await client.get_task("jsweather", asked.id)
    assert got.status.state is TaskState.completed


async def test_cancel_reaches_a_js_remote(js_card_url: str, serve_remote: ServeRemote, client: MeshClient) -> None:
    await serve_remote("jsweather", card_url=js_card_url)
    await client.wait_for_agent("jsweather", timeout=5)
    started = await client.send("jsweather", "slow", blocking=False)
    assert isinstance(started, Task)
    canceled = await client.cancel_task("jsweather", started.id)
    assert canceled.status.state is TaskState.canceled
