"""The dashboard behind the page: a watched view of the mesh, its followers, and sending.

::

    dashboard = Dashboard(broker, "acme")
    async with contextlib.aclosing(dashboard.follow()) as changes:   # starts watching
        async for kind, data in changes:                             # "snapshot" first
            ...
    async for item in dashboard.send("countdown", "3"):              # message/stream, as wire dicts
        ...
    await dashboard.close()

Watching starts with the first follower and stops ``idle_stop_s`` after the last one left, so
a gateway whose page nobody looks at subscribes to nothing more. Recent tasks are those seen
while watching, plus those the agents list (``tasks/list``, the newest ``LISTED_PER_AGENT`` each)
when watching starts: a first page load shows the work done before it. A follower gets a
snapshot, then every change; one that falls ``max_backlog`` changes behind is ended (a
browser's EventSource reconnects and gets a fresh snapshot) rather than held in memory. Rates
go out every half second when they changed; the agents' schedules (``schedules``: the schedules'
record, :mod:`gateways.dashboard.schedules`) when a read of the record finds them changed.

Sending goes through :class:`mesh.client.MeshClient` (the mesh's one call path), connected on
the first send.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from gateways.dashboard.model import Bounds, Change, MeshView
from gateways.dashboard.schedules import SCHEDULES_EVERY_S, ScheduleFeed
from gateways.dashboard.watcher import MeshWatcher
from mesh.background import wait_ended
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.clientids import connect_as_role, own_client_id
from mesh.errors import MeshError

if TYPE_CHECKING:
    from mesh.schedules.store import ScheduleStore
    from mesh.trust import CardVerifier

__all__ = ["Dashboard", "FollowerTooSlow"]

log = logging.getLogger(__name__)

RATES_EVERY_S = 0.5  # how often changed rates go out to the followers
LISTED_PER_AGENT = 20  # recent tasks asked of each agent when watching starts
LISTING_TIMEOUT_S = 2.0  # a first page waits at most this long for them
LISTING_PARALLEL = 16  # agents asked at once


class FollowerTooSlow(Exception):
    """A follower fell too far behind; it should start again from a snapshot."""


class Dashboard:
    """One namespace's dashboard: shared by every page that follows it."""

    def __init__(
        self,
        broker: BrokerSettings,
        namespace: str,
        *,
        owner: str = "dashboard",
        verifier: CardVerifier | None = None,
        bounds: Bounds | None = None,
        idle_stop_s: float = 60.0,
        max_backlog: int = 1000,
        schedules: ScheduleStore | None = None,
        schedules_every_s: float = SCHEDULES_EVERY_S,
    ) -> None:
        self.broker = broker
        self.namespace = namespace
        self.owner = owner
        self.verifier = verifier
        self.bounds = bounds or Bounds()
        self.idle_stop_s = idle_stop_s
        self.max_backlog = max_backlog
        self._client_name = f"{owner}-ui"  # the client that sends from the page and lists recent tasks
        self.view = MeshView(self.bounds, quiet_caller=self._client_name)
        self._watcher: MeshWatcher | None = None
        self._starting: asyncio.Future[None] | None = None
        self._followers: set[asyncio.Queue[Change | None]] = set()
        self._idle_stop: asyncio.TimerHandle | None = None
        self._ticker: asyncio.Task[None] | None = None
        #: The schedules' record the agents' tiles show (None: no schedules shown).
        self._schedules = ScheduleFeed(schedules, schedules_every_s) if schedules is not None else None
        self._schedules_task: asyncio.Task[None] | None = None
        self._client: MeshClient | None = None
        self._client_lock = asyncio.Lock()
        self._pinned = False
        self._closed = False
        self._stopping: asyncio.Task[None] | None = None
        self.view.add_listener(self._fan_out)

    async def start(self) -> None:
        """Watch from now on, followers or not (``mesh dashboard``: tasks from before the page opened
        show too, and a broker that cannot be reached fails the command at once)."""
        self._pinned = True
        await self._ensure_watching()

    # ------------------------------------------------------------------ following

    async def follow(self) -> AsyncGenerator[Change]:
        """A snapshot of the mesh, then every change, until closed (raises :class:`FollowerTooSlow`)."""
        if self._closed:
            return  # the server is shutting down: nothing more to follow
        queue: asyncio.Queue[Change | None] = asyncio.Queue()
        self._followers.add(queue)
        if self._idle_stop is not None:
            self._idle_stop.cancel()
            self._idle_stop = None
        try:
            await self._ensure_watching()
            if self._schedules is not None:
                self._schedules.want()  # a new page: the record as it is now, not as it was seconds ago
            yield "snapshot", self.snapshot()
            while True:
                change = await queue.get()
                if change is None:
                    if self.is_closed():
                        return
                    raise FollowerTooSlow(f"more than {self.max_backlog} changes behind")
                yield change
        finally:
            self._followers.discard(queue)
            if not self._followers and not self._pinned and not self._closed:
                self._idle_stop = asyncio.get_running_loop().call_later(self.idle_stop_s, self._stop_soon)

    @property
    def watching(self) -> bool:
        """Whether it watches the mesh now (a page follows it, or it was started)."""
        return self._watcher is not None

    def is_closed(self) -> bool:
        """Closed (shutting down): followers end and new ones get nothing."""
        return self._closed

    def snapshot(self) -> dict[str, Any]:
        watcher = self._watcher
        return self.view.snapshot() | {
            "namespace": self.namespace,
            "now": time.time(),
            "blindSpots": dict(watcher.blind_spots) if watcher is not None else {},
        }

    def _fan_out(self, change: Change) -> None:
        for queue in tuple(self._followers):
            if queue.qsize() >= self.max_backlog:
                self._followers.discard(queue)
                queue.put_nowait(None)
            else:
                queue.put_nowait(change)

    async def _ensure_watching(self) -> None:
        stopping = self._stopping
        if stopping is not None and not stopping.done():
            await stopping  # an idle stop under way: start afresh after it
        if self._starting is None:
            self._starting = asyncio.ensure_future(self._start_watching())
        try:
            await asyncio.shield(self._starting)
        except BaseException:
            if self._starting.done():
                self._starting = None
            raise

    async def _start_watching(self) -> None:
        watcher = MeshWatcher(self.view, self.broker, self.namespace, owner=self.owner, verifier=self.verifier)
        try:
            await watcher.start()
        except BaseException:
            await watcher.stop()
            raise
        self._watcher = watcher
        self._ticker = asyncio.get_running_loop().create_task(self._tick_rates())
        if self._schedules is not None:
            self._schedules_task = asyncio.get_running_loop().create_task(self._schedules.run(self.view))
        await self._load_recent_tasks(watcher)

    async def _load_recent_tasks(self, watcher: MeshWatcher) -> None:
        """Ask each agent for its newest tasks (``tasks/list``): a best effort, bounded in time,
        so an agent that is slow, refuses or predates ``tasks/list`` costs only its own tasks."""
        registry = watcher.registry
        if registry is None:
            return
        names = [entry.name for entry in registry.agents()]
        if not names:
            return
        per_agent = min(LISTED_PER_AGENT, self.bounds.max_tasks)
        room = asyncio.Semaphore(LISTING_PARALLEL)
        listed: list[tuple[str, dict[str, Any]]] = []

        async def list_one(agent: str) -> None:
            async with room:
                try:
                    client = await self._connected_client()
                    page = await client.list_tasks(
                        agent, page_size=per_agent, history_length=2, timeout=LISTING_TIMEOUT_S
                    )
                except (MeshError, TimeoutError, OSError) as exc:
                    log.debug("dashboard: no recent tasks from %r: %s", agent, exc)
                    return
            listed.extend((agent, task.to_wire_dict()) for task in page.tasks)

        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LISTING_TIMEOUT_S):
                await asyncio.gather(*(list_one(name) for name in names))
        # Newest first: each goes before the ones already placed, so the oldest ends up first.
        listed.sort(key=lambda item: str(item[1].get("status", {}).get("timestamp", "")), reverse=True)
        for agent, task in listed:
            self.view.task_listed(agent, task)

    def _stop_soon(self) -> None:
        self._idle_stop = None
        if not self._followers and not self._pinned:
            self._stopping = asyncio.get_running_loop().create_task(self._stop_watching())

    async def _stop_watching(self) -> None:
        starting, self._starting = self._starting, None
        if starting is not None:
            await wait_ended(starting)
        for task in (self._ticker, self._schedules_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._ticker = self._schedules_task = None
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            await watcher.stop()
        self.view.remove_listener(self._fan_out)
        self.view = MeshView(
            self.bounds, quiet_caller=self._client_name
        )  # a fresh picture next time: what we missed is unknown
        self.view.add_listener(self._fan_out)

    async def _tick_rates(self) -> None:
        last: dict[str, dict[str, int]] | None = None
        while True:
            await asyncio.sleep(RATES_EVERY_S)
            rates = self.view.rates.snapshot()
            if rates != last:
                self._fan_out(("rates", {"rates": rates}))
                last = rates

    # ------------------------------------------------------------------ sending

    async def send(self, agent: str, text: str, *, idle_timeout_s: float = 60.0) -> AsyncGenerator[dict[str, Any]]:
        """``message/stream`` to ``agent``: each event, then the final Task, as A2A wire dicts."""
        client = await self._connected_client()
        async for item in client.stream(agent, text, idle_timeout=idle_timeout_s):
            yield item.to_wire_dict()

    async def _connected_client(self) -> MeshClient:
        async with self._client_lock:
            if self._client is None:
                broker = self.broker
                if broker.password and broker.username == self.owner:  # a gateway's: its @ui user (mesh.clientids)
                    own = own_client_id("gateway", self.namespace, self.owner, broker.password)
                    otherwise = f"{self._client_name}-{uuid.uuid4().hex[:12]}"
                    transport = await connect_as_role(broker, "ui", own, otherwise)
                    client = MeshClient(transport, self.namespace, name=self._client_name)
                else:
                    client = MeshClient.create(broker, self.namespace, name=self._client_name)
                    await client.transport.connect()
                self._client = client
            return self._client

    async def close(self) -> None:
        """End every follower and stop watching; later followers end at once."""
        self._closed = True
        if self._idle_stop is not None:
            self._idle_stop.cancel()
            self._idle_stop = None
        for queue in tuple(self._followers):
            queue.put_nowait(None)
        self._followers.clear()
        await self._stop_watching()
        client, self._client = self._client, None
        if client is not None:
            await client.calls.flush()
            await client.transport.close()
