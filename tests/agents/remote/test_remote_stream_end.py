"""The answer of a remote call reaches the mesh caller as it arrives, before the remote's stream
ends; the rest of the stream is read in the background (its connection goes back to the pool),
within ``DRAIN_S``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agents.remote import agent as remote_agent
from mesh.a2a import Task, TaskState, TextPart
from mesh.brokertools.localbroker import free_port
from mesh.client import MeshClient
from tests.agents.remote.conftest import ServeRemote
from tests.agents.remote.server import Weather, app, serving

Asgi = Any


def held_open(application: Asgi, release: asyncio.Event) -> Asgi:
    """``application`` whose JSON-RPC responses end only once ``release`` is set (as behind a
    proxy that is slow to close): the end of the body waits, the events before it do not."""

    async def serve(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] != "/":
            await application(scope, receive, send)
            return

        async def send_late_end(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                await release.wait()
            await send(message)

        await application(scope, receive, send_late_end)

    return serve


def answer_of(task: Task) -> str:
    assert task.status.state is TaskState.completed, task
    message = task.status.message
    assert message is not None
    return "".join(p.text for p in message.parts if isinstance(p, TextPart))


async def test_the_answer_is_relayed_before_the_remote_stream_ends(
    serve_remote: ServeRemote, client: MeshClient
) -> None:
    release = asyncio.Event()
    port = free_port()
    async with serving(held_open(app(port, Weather()), release), port):  # type: ignore[arg-type]
        try:
            agent, _ = await serve_remote(url=f"http://127.0.0.1:{port}/", binding="JSONRPC")
            await client.wait_for_agent("weather", timeout=5)
            started = time.monotonic()
            try:
                task = await asyncio.wait_for(client.send("weather", "hello"), 5)
            except TimeoutError:
                pytest.fail("the answer waited for the end of the remote's stream")
            took = time.monotonic() - started
            assert answer_of(task) == "echo: hello"
            assert took < 1.0, f"the answer was slow ({took:.2f} s)"
            assert len(agent.draining) == 1  # the stream is still being read: its end is held
            release.set()
            done, _ = await asyncio.wait(set(agent.draining), timeout=5)
            assert done and not agent.draining
            assert agent.watch.alive
            assert answer_of(await client.send("weather", "again")) == "echo: again"
        finally:
            release.set()  # the server's handlers end before it stops, whatever happened


async def test_a_stream_that_does_not_end_is_cut_after_drain_s(
    serve_remote: ServeRemote, client: MeshClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(remote_agent, "DRAIN_S", 0.3)
    release = asyncio.Event()  # set only at the end: until then the remote never ends a stream
    port = free_port()
    async with serving(held_open(app(port, Weather()), release), port):  # type: ignore[arg-type]
        try:
            agent, _ = await serve_remote(url=f"http://127.0.0.1:{port}/", binding="JSONRPC")
            await client.wait_for_agent("weather", timeout=5)
            assert answer_of(await client.send("weather", "hello")) == "echo: hello"
            draining = set(agent.draining)
            assert len(draining) == 1
            started = time.monotonic()
            await asyncio.wait(draining, timeout=5)
            assert not agent.draining and time.monotonic() - started < 2, "the stream was not cut at DRAIN_S"
            assert agent.watch.alive  # cutting a stream after its answer is not the remote failing
            assert answer_of(await client.send("weather", "again")) == "echo: again"
        finally:
            release.set()  # the server's handlers end before it stops
