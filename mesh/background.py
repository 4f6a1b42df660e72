"""Background tasks that are kept and whose failures are logged.

The event loop holds tasks only weakly: a task nobody references can vanish mid-way, and one
whose exception nobody retrieves ends as "Task exception was never retrieved" at garbage
collection, far from its cause. :class:`BackgroundTasks` keeps each task until it ends and
logs its exception, naming what it was doing::

    background = BackgroundTasks(log, "dashboard watcher")
    background.spawn(work())          # kept, and its failure logged
    await background.cancel_all()     # on stop
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["BackgroundTasks", "cancel_and_wait", "wait_ended"]

T = TypeVar("T")


class BackgroundTasks:
    """The running background tasks of one component."""

    def __init__(self, log: logging.Logger, owner: str) -> None:
        self._log = log
        self._owner = owner
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Any:
        return iter(list(self._tasks))

    def spawn(self, work: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Run ``work`` in the background: kept until it ends, its exception logged."""
        task = asyncio.get_running_loop().create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._ended)
        return task

    def _ended(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            self._log.error("%s: background task %s failed: %r", self._owner, task.get_name(), error, exc_info=error)

    async def cancel_all(self) -> None:
        """Cancel every task still running and wait for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def wait_ended(task: asyncio.Future[Any]) -> None:
    """Wait for ``task`` to end, whatever it ends with (its error is the caller's to have logged).

    Unlike ``with suppress(BaseException): await task``, a cancellation of the *waiting* task is
    not swallowed: it stops the wait and propagates (asyncio.wait does not raise the child's
    outcome, and does raise its caller's own CancelledError).
    """
    await asyncio.wait([task])
    if not task.cancelled():
        task.exception()  # retrieved: asyncio would otherwise log it as never retrieved


async def cancel_and_wait(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait for it to end; the caller's own cancellation still propagates."""
    task.cancel()
    await wait_ended(task)
