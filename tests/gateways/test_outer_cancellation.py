"""Stopping a child never swallows the stopper's own cancellation (issue 41).

Each of the three places that stop a child task while they wait (the HTTP stream's first frame,
``mesh acp``'s background connect, the dashboard's idle stop) waits for a child that is slow to
end (it finishes its cleanup first); cancelling the task that waits must end that task canceled,
and not let it go on as if nothing happened, as ``suppress(BaseException)`` around the await did.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from gateways.acp.server import AcpGateway
from gateways.dashboard.service import Dashboard
from gateways.http.serving import _prepended
from mesh.background import cancel_and_wait, wait_ended
from mesh.broker import BrokerSettings
from mesh.e2a import E2AResponse


class SlowToEnd:
    """A child that, asked to stop, finishes its cleanup (until ``release``) before it ends."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.cleaning = asyncio.Event()
        self.release = asyncio.Event()

    async def run(self) -> Any:
        self.started.set()
        try:
            await asyncio.Event().wait()
        finally:
            self.cleaning.set()
            await self.release.wait()


async def cancel_while_it_waits(child: SlowToEnd, waiter: Callable[[], Awaitable[None]]) -> tuple[bool, bool]:
    """Run ``waiter``, cancel it while ``child`` cleans up; (the waiter ended canceled, it went on)."""
    went_on = False

    async def waiting() -> None:
        nonlocal went_on
        await waiter()
        went_on = True

    task = asyncio.create_task(waiting())
    await asyncio.wait_for(child.cleaning.wait(), 5)
    task.cancel()
    child.release.set()
    await asyncio.wait([task], timeout=5)
    return task.cancelled(), went_on


async def test_the_helpers_propagate_the_waiters_cancellation() -> None:
    for helper in (cancel_and_wait, wait_ended):
        child = SlowToEnd()
        running = asyncio.create_task(child.run())
        await child.started.wait()
        if helper is wait_ended:
            running.cancel()  # someone else stopped it; we only wait
        canceled, went_on = await cancel_while_it_waits(child, lambda: helper(running))  # noqa: B023
        assert canceled and not went_on, helper.__name__
        assert running.done()


async def test_the_http_stream_whose_reader_is_canceled_before_its_first_frame() -> None:
    child = SlowToEnd()
    first: asyncio.Task[E2AResponse] = asyncio.create_task(child.run())

    async def frames() -> AsyncIterator[E2AResponse]:
        await asyncio.Event().wait()
        yield  # type: ignore[misc]  # never reached: an agent that has not answered yet

    async def read() -> None:
        async for _ in _prepended(first, frames()):
            pass

    reader = asyncio.create_task(read())
    await child.started.wait()
    await asyncio.sleep(0)  # the reader waits on the first frame
    reader.cancel()  # the client left: its cancel reaches the first frame's task, slow to end
    await asyncio.wait_for(child.cleaning.wait(), 5)
    child.release.set()
    await asyncio.wait([reader], timeout=5)
    assert reader.cancelled() and first.done()


class _SlowRuntime:
    """Stands for the gateway runtime: its start is slow to stop; its stop must not be reached."""

    def __init__(self, child: SlowToEnd) -> None:
        self.child = child
        self.stopped = False

    async def start(self) -> None:
        await self.child.run()

    async def stop(self) -> None:
        self.stopped = True


async def test_mesh_acp_stopped_while_it_still_connects() -> None:
    child = SlowToEnd()
    runtime = _SlowRuntime(child)
    gateway = AcpGateway(runtime, "echo")  # type: ignore[arg-type]
    gateway.connect_in_background()
    await child.started.wait()
    canceled, went_on = await cancel_while_it_waits(child, gateway.stop)
    assert canceled and not went_on and not runtime.stopped


async def test_the_dashboard_stopping_while_it_still_starts() -> None:
    child = SlowToEnd()
    dashboard = Dashboard(BrokerSettings(), "ns")
    starting = asyncio.ensure_future(child.run())
    dashboard._starting = starting  # a start under way, as _ensure_watching leaves it
    await child.started.wait()
    starting.cancel()  # the start fails: the idle stop waits for it to end
    canceled, went_on = await cancel_while_it_waits(child, dashboard._stop_watching)
    assert canceled and not went_on
