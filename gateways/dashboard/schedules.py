"""The schedules on the agents' tiles: each agent's enabled schedules a scheduler runs, with their
next tick, paused ones marked, read from the schedules' record (docs/schedules.md) the way
``mesh agents`` reads it (:func:`mesh.schedules.command.upcoming_runs`).

The record is read in a thread (SQLite or PostgreSQL calls block) every ``every_s`` seconds while
the dashboard watches, and at once when a page starts following it. No record yet means no
schedules (nothing is created); a record out of reach (a PostgreSQL outage, an unreadable file)
shows none and logs one warning until it can be read again: the dashboard goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from gateways.dashboard.model import MeshView
from mesh.schedules.command import NextRun, upcoming_runs
from mesh.schedules.store import ScheduleStore

__all__ = ["SCHEDULES_EVERY_S", "ScheduleFeed", "by_agent"]

log = logging.getLogger(__name__)

#: How often the record is read again while the dashboard watches.
SCHEDULES_EVERY_S = 5.0


def by_agent(runs: list[NextRun]) -> dict[str, list[dict[str, Any]]]:
    """The runs as the page takes them: by agent, each ``{name, when, nextTick (Unix ms), paused}``."""
    found: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        entry = {"name": run.schedule, "when": run.when, "nextTick": run.next_tick_ms, "paused": run.paused}
        found.setdefault(run.agent, []).append(entry)
    return found


class ScheduleFeed:
    """Reads ``store`` into a :class:`MeshView` while :meth:`run` runs (see the module doc)."""

    def __init__(self, store: ScheduleStore, every_s: float = SCHEDULES_EVERY_S) -> None:
        self.store = store
        self.every_s = every_s
        self._wanted = asyncio.Event()
        self._failing = False

    def want(self) -> None:
        """Read again now (a new page follows)."""
        self._wanted.set()

    async def read(self) -> dict[str, list[dict[str, Any]]]:
        """The record's schedules by agent; none when it cannot be read (one warning per outage)."""
        try:
            runs = await asyncio.to_thread(upcoming_runs, self.store)
        except Exception as exc:  # the store down, a file unreadable, a bad entry: the tiles go on without them
            if not self._failing:
                log.warning("dashboard: the schedules' record %s cannot be read: %s", self.store.where, exc)
            self._failing = True
            return {}
        if self._failing:
            log.info("dashboard: the schedules' record %s can be read again", self.store.where)
        self._failing = False
        return by_agent(runs)

    async def run(self, view: MeshView) -> None:
        """Keep ``view``'s schedules up to date, until cancelled."""
        while True:
            self._wanted.clear()
            view.schedules_read(await self.read())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.every_s):
                    await self._wanted.wait()
