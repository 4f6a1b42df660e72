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


@pytest.mark.timeout(60)
async def test_max_concurrent_bounds_the_calls_in_flight_at_the_remote(
    remote: Remote, serve_remote: ServeRemote, client: MeshClient
) -> None:
    await serve_remote(card_url=remote.card_url, max_concurrent=3)
    await client.wait_for_agent("weather", timeout=5)
    executor, count = remote.executor, 8
    calls = [asyncio.create_task(client.send("weather", "hold", timeout=30)) for _ in range(count)]
    await wait_until(lambda: executor.in_flight == 3, executor.changed, 10, lambda: f"{executor.in_flight} in flight")
    for released in range(1, count + 1):  # one call ends: one more goes out, never a fourth at once
        executor.passes.release()
        arrived, held = min(count, 3 + released), min(3, count - released)
        await wait_until(
            lambda: len(executor.received) == arrived and executor.in_flight == held,  # noqa: B023
            executor.changed,
            10,
            lambda: f"{len(executor.received)} arrived, {executor.in_flight} in flight",
        )
    assert [text_of(task) for task in await asyncio.gather(*calls)] == ["released"] * count
    assert executor.peak == 3


RATE_PER_S = 10.0


@pytest.mark.timeout(60)
async def test_calls_to_a_remote_start_at_most_rate_per_s(
    remote: Remote, serve_remote: ServeRemote, client: MeshClient
) -> None:
    await serve_remote(card_url=remote.card_url, rate_per_s=RATE_PER_S, max_concurrent=50)
    await client.wait_for_agent("weather", timeout=5)
    count = 30
    answers = await asyncio.gather(*(client.send("weather", f"n{i}", timeout=30) for i in range(count)))
    assert sorted(text_of(task) for task in answers) == sorted(f"echo: n{i}" for i in range(count))
    # A bucket of one second's burst: at most RATE_PER_S at once, then RATE_PER_S a second. Any
    # window of W seconds at the remote holds at most RATE_PER_S * (1 + W) arrivals (+2 for the
    # jitter between the proxy's start of a call and its arrival); unbounded, all 30 come at once.
    arrivals = sorted(remote.executor.arrivals)
    window = 0.5
    crowded = max(sum(1 for t in arrivals if start <= t < start + window) for start in arrivals)
    assert crowded <= RATE_PER_S * (1 + window) + 2, (crowded, arrivals)
    # And the whole: the calls past the burst came one per 1/RATE_PER_S (a quarter second of margin).
    assert arrivals[-1] - arrivals[0] >= (count - RATE_PER_S) / RATE_PER_S - 0.25, arrivals
