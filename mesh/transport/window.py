"""The bound on QoS 1 publishes awaiting their PUBACK."""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque

__all__ = ["InflightWindow"]


class InflightWindow:
    """A FIFO counting limiter whose size follows the broker's Receive Maximum."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._closed: BaseException | None = None

    @property
    def waiting(self) -> int:
        """How many wait for a slot."""
        return len(self._waiters)

    def try_acquire(self) -> bool:
        """Take a slot now if one is free and nobody is queued ahead; never waits."""
        if self._closed is not None:
            raise self._closed
        if self.used < self.size and not self._waiters:
            self.used += 1
            return True
        return False

    async def acquire(self) -> None:
        if self._closed is not None:
            raise self._closed
        if self.used < self.size and not self._waiters:
            self.used += 1
            return
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                self.release()  # the slot was granted just as we gave up
            else:
                with contextlib.suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        self.used -= 1
        self._wake()

    def resize(self, size: int) -> None:
        self.size = max(1, size)
        self._wake()

    def close(self, error: BaseException) -> None:
        self._closed = error
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(error)

    def _wake(self) -> None:
        while self.used < self.size and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                self.used += 1
                waiter.set_result(None)
