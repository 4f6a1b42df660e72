"""The scheduler's clock: the system's, or one a test moves by hand (:class:`ManualClock`)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Protocol

__all__ = ["Clock", "ManualClock", "SystemClock"]

#: The longest the system clock sleeps at once: a clock set forward (NTP, a laptop waking) is seen within it.
_NAP_S = 30.0


class Clock(Protocol):
    def now(self) -> datetime:
        """The time now, aware (UTC)."""
        ...

    async def sleep_until(self, moment: datetime) -> None:
        """Return once ``now() >= moment``."""
        ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep_until(self, moment: datetime) -> None:
        # Naps, not one long sleep: the loop's clock is monotonic, a tick is wall-clock time.
        while (left := (moment - self.now()).total_seconds()) > 0:  # noqa: ASYNC110 - no event tells a time
            await asyncio.sleep(min(left, _NAP_S))


class ManualClock:
    """Time stands still until :meth:`advance` / :meth:`set` moves it; sleepers due then wake."""

    def __init__(self, start: datetime) -> None:
        self._now = start.astimezone(UTC)
        self._moved = asyncio.Condition()

    def now(self) -> datetime:
        return self._now

    async def set(self, moment: datetime) -> None:
        async with self._moved:
            self._now = moment.astimezone(UTC)
            self._moved.notify_all()

    async def sleep_until(self, moment: datetime) -> None:
        async with self._moved:
            await self._moved.wait_for(lambda: self._now >= moment)
