"""Input timeouts: a task left in ``input-required`` too long is canceled.

A task waiting for input holds its handler (a suspended generator) and its record; without a
bound, a client that never answers would keep both forever. ``AgentSettings.input_timeout_s``
is that bound (``None``: wait forever).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from agents.tasks import TaskRecord
from mesh.a2a import TaskState
from mesh.background import BackgroundTasks

__all__ = ["InputTimers"]

log = logging.getLogger(__name__)


class InputTimers:
    """Arms a timer while a task is input-required; when it fires, ``cancel`` ends the task."""

    def __init__(self, timeout_s: float | None, cancel: Callable[[TaskRecord, str], Awaitable[None]]) -> None:
        self.timeout_s = timeout_s
        self._cancel = cancel
        self._firing = BackgroundTasks(log, "input timers")  # kept until they finish, failures logged

    def update(self, record: TaskRecord) -> None:
        """Called after every event of a task: (re)arm its timer or disarm it."""
        if record.input_timer is not None:
            record.input_timer.cancel()
            record.input_timer = None
        timeout = self.timeout_s
        if timeout is not None and record.state is TaskState.input_required:
            loop = asyncio.get_running_loop()
            reason = f"no input within {timeout:g} s"
            record.input_timer = loop.call_later(timeout, self._fire, record, reason)

    def _fire(self, record: TaskRecord, reason: str) -> None:
        record.input_timer = None
        self._firing.spawn(self._run(record, reason), name=f"input-timeout:{record.task.id}")

    async def _run(self, record: TaskRecord, reason: str) -> None:
        await self._cancel(record, reason)
