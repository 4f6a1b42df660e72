"""Running the handlers and listeners a transport calls: never raising, async ones as tasks."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

__all__ = ["CallbackRunner"]

log = logging.getLogger(__name__)


class CallbackRunner:
    """Calls handlers on the loop; a coroutine result runs as a task, tracked until it ends.

    A handler that raises is logged and delivery goes on: no handler can break the network
    path or the dispatch of the next message.
    """

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def run(self, callback: Callable[..., Any], *args: Any) -> None:
        """Call ``callback(*args)``; never raises."""
        try:
            result = callback(*args)
        except Exception:
            log.exception("handler %r failed", callback)
            return
        if asyncio.iscoroutine(result):
            task = asyncio.get_running_loop().create_task(result)
            self._tasks.add(task)
            task.add_done_callback(self._done)

    async def cancel_all(self) -> None:
        """Cancel the handler tasks still running and wait for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("message handler task failed", exc_info=task.exception())
