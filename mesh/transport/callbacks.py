"""Running the handlers and listeners a transport calls: never raising, async ones as tasks.

The handler tasks running at once are bounded: at ``max_tasks`` the transport stops reading
from its socket (the broker holds what follows, within its own queue limits) and reads again
once they are down to three quarters of it. Memory thus stays bounded however fast messages
come, and nothing is dropped on our side.
"""

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

    def __init__(self, *, max_tasks: int = 10_000) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()
        self.max_tasks = max_tasks
        self._resume_below = max(1, max_tasks * 3 // 4)
        self._pause: Callable[[], None] = _nothing
        self._resume: Callable[[], None] = _nothing
        #: Whether reading is paused because ``max_tasks`` handler tasks are running.
        self.saturated = False

    def on_saturation(self, pause: Callable[[], None], resume: Callable[[], None]) -> None:
        """What to call when the handler tasks reach ``max_tasks``, and when they are few again."""
        self._pause, self._resume = pause, resume

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
            if len(self._tasks) >= self.max_tasks and not self.saturated:
                self.saturated = True
                log.warning("%d message handlers are running; reading paused until some finish", len(self._tasks))
                self._pause()

    async def cancel_all(self) -> None:
        """Cancel the handler tasks still running and wait for them to end."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if self.saturated and len(self._tasks) < self._resume_below:
            self.saturated = False
            log.info("message handlers down to %d; reading again", len(self._tasks))
            self._resume()
        if not task.cancelled() and task.exception() is not None:
            log.error("message handler task failed", exc_info=task.exception())


def _nothing() -> None:
    pass
