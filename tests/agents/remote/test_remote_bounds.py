"""The proxy's bounds: redirects to private addresses refused unless allowed, calls in flight bounded."""

from __future__ import annotations

import asyncio

import pytest

from mesh.a2a import Task, TaskState, TextPart
from mesh.client import MeshClient
from tests.agents.remote.conftest import Remote, ServeRemote
from tests.support import wait_until


def text_of(task: object) -> str:
    assert isinstance(task, Task) and task.status.message is not None, task
    return "".join(p.text for p in task.status.message.parts if isinstance(p, TextPart))


async def test_a_redirect_to_a_private_address_is_refused_naming_the_setting(
    remote: Remote, serve_remote: ServeRemote
) -> None:
    agent, _ = await serve_remote(card_url=f"http://127.0.0.1:{remote.port}/moved", health_interval_s=0.2)
    assert not agent.watch.alive
    changed = asyncio.Event()
    await asyncio.wait_for(agent.watch.check(), 10)
    await wait_until(lambda: agent.watch.present is False, changed, 1)
    reason = agent.watch.reason or ""
    assert "redirects to 127.0.0.1, a loopback address" in reason and "allow_private_redirects: true" in reason


async def test_an_allowed_redirect_is_followed(remote: Remote, serve_remote: ServeRemote, client: MeshClient) -> None:
    await serve_remote(card_url=f"http://127.0.0.1:{remote.port}/moved", allow_private_redirects=True)
    await client.wait_for_agent("weather", timeout=5)
    assert text_of(await client.send("weather", "moved")) == "echo: moved"


@pytest.mark.timeout(60)
async def test_calls_in_flight_to_a_remote_are_bounded(
    remote: Remote, serve_remote: ServeRemote, client: MeshClient
) -> None:
    await serve_remote(card_url=remote.card_url, max_concurrent=1)
    await client.wait_for_agent("weather", timeout=5)
    slow = await client.send("weather", "slow", blocking=False)
    assert isinstance(slow, Task)
    received, changed = remote.executor.received, remote.executor.changed
    await wait_until(lambda: received == ["slow"], changed, 10)
    queued = await client.send("weather", "next", blocking=False)
    assert isinstance(queued, Task)
    got = await client.get_task("weather", queued.id)
    assert received == ["slow"] and got.status.state in (TaskState.submitted, TaskState.working)
    await client.cancel_task("weather", slow.id)
    await wait_until(lambda: received == ["slow", "next"], changed, 10)  # the place freed: it went out
    done = await client.get_task("weather", queued.id)
    assert done.status.state in (TaskState.working, TaskState.completed)
