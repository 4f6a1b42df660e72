"""The proxy against a real a2a-sdk 1.3 server: every method, each binding, through the mesh."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.remote.translate import REMOTE_EXTENSION
from agents.settings import AgentSettings
from mesh.a2a import FilePart, FileWithUri, Task, TaskArtifactUpdateEvent, TaskState, TaskStatusUpdateEvent, TextPart
from mesh.brokertools.localbroker import free_port
from mesh.client import MeshClient
from tests.agents.remote.conftest import Remote, ServeRemote
from tests.agents.remote.server import Weather, app, card, handler_for, serving, serving_grpc


def text_of(task: Task) -> str:
    message = task.status.message
    assert message is not None, task
    return "".join(p.text for p in message.parts if isinstance(p, TextPart))


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_send_reaches_the_remote_on_each_binding(
    remote: Remote, serve_remote: ServeRemote, client: MeshClient, binding: str
) -> None:
    agent, _ = await serve_remote(card_url=remote.card_url, binding=binding)
    assert (
        type(agent.client_transport).__name__ == {"JSONRPC": "JsonRpcTransport", "HTTP+JSON": "RestTransport"}[binding]
    )
    card = await client.wait_for_agent("weather", timeout=5)
    assert [s.id for s in card.skills] == ["weather"]
    assert card.version == "2.1.0"
    assert card.capabilities.streaming is True
    extension = (card.capabilities.extensions or [])[0]
    assert extension.uri == REMOTE_EXTENSION and extension.params == {"url": remote.card_url, "version": "2.1.0"}

    task = await client.send("weather", "hello")
    assert isinstance(task, Task)
    assert task.status.state is TaskState.completed
    assert text_of(task) == "echo: hello"
    got = await client.get_task("weather", task.id)
    assert got.status.state is TaskState.completed and text_of(got) == "echo: hello"


async def test_a_0_3_remote_is_reached_through_the_sdk_compat_transport(
    serve_remote: ServeRemote, client: MeshClient
) -> None:
    port = free_port()
    executor = Weather()
    async with serving(app(port, executor, agent_card=card(port, legacy=True)), port):
        # url: names the endpoint; the card (0.3 only) says which version is spoken there.
        agent, _ = await serve_remote(url=f"http://127.0.0.1:{port}/", binding="JSONRPC")
        assert type(agent.client_transport).__name__ == "CompatJsonRpcTransport"
        await client.wait_for_agent("weather", timeout=5)
        task = await client.send("weather", "old")
        assert isinstance(task, Task) and text_of(task) == "echo: old"
        items = [item async for item in client.stream("weather", "steps")]
        assert isinstance(items[-1], Task) and text_of(items[-1]) == "done"


async def test_stream_maps_the_remote_events_in_order(
    remote: Remote, serve_remote: ServeRemote, client: MeshClient
) -> None:
    await serve_remote(card_url=remote.card_url)
    await client.wait_for_agent("weather", timeout=5)
    items = [item async for item in client.stream("weather", "steps")]
    texts = [
        "".join(p.text for p in i.status.message.parts if isinstance(p, TextPart))
        for i in items
        if isinstance(i, TaskStatusUpdateEvent) and i.status.message is not None
    ]
    assert texts == ["one", "two", "three", "done"]
    chunks = [i for i in items if isinstance(i, TaskArtifactUpdateEvent)]
    assert [("".join(p.text for p in c.artifact.parts if isinstance(p, TextPart)), c.append) for c in chunks] == [
        ("first ", None),
        ("second", True),
    ]
    final = items[-1]
    assert isinstance(final, Task) and final.status.state is TaskState.completed


async def test_input_required_continues_the_remote_task(
    remote: Remote, serve_remote: ServeRemote, client: MeshClient
) -> None:
    await serve_remote(card_url=remote.card_url)
    await client.wait_for_agent("weather", timeout=5)
    asked = await client.send("weather", "ask")
    assert isinstance(asked, Task) and asked.status.state is TaskState.input_required
    assert text_of(asked) == "Which city?"
    answered = await client.send("weather", "Paris", task_id=asked.id, context_id=asked.context_id)
    assert isinstance(answered, Task) and answered.id == asked.id
    assert text_of(answered) == "weather in Paris: sunny"


async def test_cancel_cancels_the_remote_task(remote: Remote, serve_remote: ServeRemote, client: MeshClient) -> None:
    await serve_remote(card_url=remote.card_url)
    await client.wait_for_agent("weather", timeout=5)
    started = await client.send("weather", "slow", blocking=False)
    assert isinstance(started, Task)
    stream = client.resubscribe("weather", started.id)
    first = await anext(stream)  # the task as it is now: the resubscription is in place
    assert isinstance(first, Task)
    canceled = await client.cancel_task("weather", started.id)
    assert canceled.status.state is TaskState.canceled
    rest = [item async for item in stream]
    assert isinstance(rest[-1], Task) and rest[-1].status.state is TaskState.canceled
    assert len(remote.executor.canceled) == 1


async def test_a_large_remote_file_becomes_an_artifact_uri(
    remote: Remote, serve_remote: ServeRemote, client: MeshClient
) -> None:
    await serve_remote(card_url=remote.card_url)
    await client.wait_for_agent("weather", timeout=5)
    size = 1_500_000  # above the 1 MB threshold
    task = await client.send("weather", f"file {size}", timeout=60)
    assert isinstance(task, Task) and text_of(task) == f"{size} bytes"
    (artifact,) = task.artifacts or []
    (part,) = artifact.parts
    assert isinstance(part, FilePart) and isinstance(part.file, FileWithUri)
    assert part.file.uri.startswith(f"artifact://{task.context_id}/")
    assert (artifact.metadata or {}).get("size_bytes") == size


async def test_an_answer_after_a_restart_continues_the_same_remote_task(
    remote: Remote, serve_remote: ServeRemote, client: MeshClient, tmp_path: Path
) -> None:
    settings = AgentSettings(task_store=str(tmp_path / "weather.sqlite"))
    _, first = await serve_remote(card_url=remote.card_url, settings=settings)
    await client.wait_for_agent("weather", timeout=5)
    asked = await client.send("weather", "ask")
    assert isinstance(asked, Task) and asked.status.state is TaskState.input_required
    await first.stop()  # the proxy restarts; the remote task waits on the remote
    await serve_remote(card_url=remote.card_url, settings=settings)
    await client.wait_for_agent("weather", timeout=5)
    answered = await client.send("weather", "Quito", task_id=asked.id, context_id=asked.context_id)
    assert text_of(answered) == "weather in Quito: sunny"
    assert remote.executor.received == ["ask", "Quito"]  # one remote task, continued


async def test_a_grpc_remote(serve_remote: ServeRemote, client: MeshClient) -> None:
    pytest.importorskip("grpc", reason="the grpc extra is not installed")
    port, grpc_port = free_port(), free_port()
    the_card = card(port, grpc_port=grpc_port)
    handler = handler_for(Weather(), the_card)
    async with (
        serving(app(port, Weather(), agent_card=the_card, handler=handler), port),
        serving_grpc(handler, grpc_port),
    ):
        agent, _ = await serve_remote(card_url=f"http://127.0.0.1:{port}/.well-known/agent-card.json", binding="GRPC")
        assert type(agent.client_transport).__name__ == "GrpcTransport"
        await client.wait_for_agent("weather", timeout=5)
        assert text_of(await client.send("weather", "over grpc")) == "echo: over grpc"
        items = [item async for item in client.stream("weather", "steps")]
        assert isinstance(items[-1], Task) and text_of(items[-1]) == "done"
