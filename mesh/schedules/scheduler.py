"""The component that runs a file's ``schedules:``: a loop per schedule that sleeps until its next
tick, claims it in the namespace's record (:mod:`mesh.schedules.store`: the machine's SQLite
file, or the PostgreSQL store every machine's schedulers share) and, if it won, sends the
task (:mod:`mesh.schedules.runs`).

It connects as the machine's CLI user (``cli``, the identity ``mesh send`` has on a secured
``mesh up``): a schedule is what ``mesh send`` from crontab would do, once across the mesh, so it
holds no broker right of its own. At start it waits for each target agent's card (the agents of
its own ``mesh run`` start first): a target that is nowhere on the mesh ends the start with an
error that names the schedule and the fix.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from mesh.background import BackgroundTasks
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.config.credentials import DEFAULT_CLIENT
from mesh.config.errors import config_error, suggest
from mesh.errors import AgentNotFoundError, ConfigError
from mesh.schedules.clock import Clock, SystemClock
from mesh.schedules.runs import RunOutcome, run_tick, tick_ms
from mesh.schedules.spec import ScheduleSpec
from mesh.schedules.store import ScheduleStore, open_schedule_store

__all__ = ["Scheduler"]

log = logging.getLogger("mesh.schedules")

#: How long the start waits for a target agent's card.
AGENT_WAIT_S = 5.0
#: The newest outcomes a scheduler keeps in memory (the store keeps them all).
_OUTCOMES_KEPT = 100
_T = TypeVar("_T")


class Scheduler:
    """Runs ``specs`` (one file's schedules) on ``namespace``; see the module docstring."""

    kind = "scheduler"

    def __init__(
        self,
        specs: Sequence[ScheduleSpec],
        *,
        broker: BrokerSettings,
        namespace: str,
        source: Path,
        clock: Clock | None = None,
        store: ScheduleStore | None = None,
        agent_wait_s: float = AGENT_WAIT_S,
    ) -> None:
        self.specs = list(specs)
        self.broker = broker.for_identity(DEFAULT_CLIENT)
        self.namespace = namespace
        self.source = source
        self.name = f"schedules:{source.name}"
        self.clock: Clock = clock or SystemClock()
        self.store: ScheduleStore = store or open_schedule_store(namespace)
        self.agent_wait_s = agent_wait_s
        self.instance = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.client: MeshClient | None = None
        #: The runs' outcomes in this process, newest last (the claims lost too; the last 100), for tests.
        self.outcomes: list[tuple[str, RunOutcome]] = []
        self._loops: list[asyncio.Task[None]] = []
        self._runs = BackgroundTasks(log, "scheduler")
        self.ran = asyncio.Condition()

    async def start(self) -> None:
        client = MeshClient.create(self.broker, self.namespace)
        await client.transport.connect()
        try:
            await self._check_agents(client)
        except BaseException:
            await client.transport.close()
            raise
        started = self.clock.now()  # ticks count from here, however late the loops first run
        try:
            for spec in self.specs:
                tick = spec.next_after(started) if spec.enabled else None
                entry = spec.model_dump(mode="json")
                await asyncio.to_thread(self.store.register, spec.name, entry, str(self.source), _ms(tick))
        except Exception as exc:  # psycopg's OperationalError, a file that cannot be written: say where and why
            await client.transport.close()
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise ConfigError(
                f"{self.name}: cannot write the schedules' record {self.store.where}: {first}; check its host, port, "
                "database and password ($MESH_STORE_PASSWORD or $MESH_STORE_PASSWORD_FILE), or its directory"
            ) from None
        self.client = client
        self._loops = [asyncio.create_task(self._loop(s, started), name=f"schedule {s.name}") for s in self.specs]
        names = ", ".join(f"{s.name} ({s.when}{'' if s.enabled else ', disabled'})" for s in self.specs)
        log.info("%s: running %s; runs claimed in %s", self.name, names, self.store.where)

    async def stop(self) -> None:
        for task in self._loops:
            task.cancel()
        await asyncio.gather(*self._loops, self._runs.cancel_all(), return_exceptions=True)
        if self.client is not None:
            await self.client.calls.flush()
            await self.client.transport.close()
            self.client = None
        close = getattr(self.store, "close", None)  # a PostgreSQL store's connection (it reopens if used again)
        if close is not None:
            await asyncio.to_thread(close)

    async def _check_agents(self, client: MeshClient) -> None:
        for index, spec in enumerate(self.specs):
            if not spec.enabled:
                continue
            try:
                await client.wait_for_agent(spec.agent, timeout=self.agent_wait_s)
            except AgentNotFoundError as exc:
                known = getattr(exc, "available", None) or []
                close = suggest(spec.agent, known)
                hint = f"did you mean {close!r}? " if close else ""
                raise config_error(
                    self.source,
                    ("schedules", index, "agent"),
                    f"no agent {spec.agent!r} on the mesh (namespace {self.namespace!r}) after {self.agent_wait_s:g} s",
                    f"{hint}start it first (mesh up, or in this file's agents:), or fix the name (see mesh agents)",
                ) from None

    async def _loop(self, spec: ScheduleSpec, after: datetime) -> None:
        if not spec.enabled:
            return
        if spec.missed == "run_once":
            last = await self._stored(self.store.last_tick, spec.name)
            due = spec.last_at_or_before(after)
            if last is not None and tick_ms(due) > last:  # ticks passed while no scheduler ran: the last one, once
                log.info("schedule %s: running the tick %s it missed (missed: run_once)", spec.name, due.isoformat())
                self._launch(spec, due)
        while True:
            tick = spec.next_after(after)
            entry = spec.model_dump(mode="json")
            await self._stored(self.store.register, spec.name, entry, str(self.source), _ms(tick))
            await self.clock.sleep_until(tick)
            # Woken late (a suspended machine, a busy loop): the newest tick due runs, once, not each one passed.
            latest = spec.last_at_or_before(self.clock.now())
            if latest > tick:
                log.warning("schedule %s: woke at %s, after ticks since %s: running the last", spec.name, latest, tick)
            self._launch(spec, latest)
            after = latest

    async def _stored(self, call: Callable[..., _T], *args: Any) -> _T | None:
        """``call(*args)`` on the record, in a thread; a record out of reach (a PostgreSQL outage) is
        logged and the schedule goes on: its claims fail, and are tried again, at its next ticks."""
        try:
            return await asyncio.to_thread(call, *args)
        except Exception as exc:
            log.warning("schedule record %s out of reach: %s", self.store.where, exc)
            return None

    def _launch(self, spec: ScheduleSpec, tick: datetime) -> None:
        """Run the tick beside the loop: a long run does not delay the next tick (max_concurrent bounds them)."""
        self._runs.spawn(self._run(spec, tick), name=f"schedule {spec.name} {tick.isoformat()}")

    async def _run(self, spec: ScheduleSpec, tick: datetime) -> None:
        assert self.client is not None  # noqa: S101 - loops run only between start and stop
        try:
            outcome = await run_tick(self.client, self.store, spec, tick, by=self.instance, component=self.name)
        except Exception:  # a broken store or a bug: logged, and the schedule goes on
            log.exception("schedule %s: the run of tick %s failed", spec.name, tick.isoformat())
            return
        async with self.ran:
            self.outcomes.append((spec.name, outcome))
            del self.outcomes[:-_OUTCOMES_KEPT]  # a schedule every second runs for months
            self.ran.notify_all()


def _ms(moment: datetime | None) -> int | None:
    return None if moment is None else tick_ms(moment)
