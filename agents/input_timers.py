"""Input timeouts: a task left in ``input-required`` too long is canceled.

A task waiting for input holds its handler (a suspended generator) and its record; without a
bound, a client that never answers would keep both forever. ``AgentSettings.input_timeout_s``
is that bound (``None``: wait forever). A question may bring its own bound
(:attr:`~agents.updates.InputRequired.timeout_s`, e.g. an LLM agent's ``approval_timeout_s``):
past it the task fails, with the reason the question gave. Its deadline goes in the question's
metadata (``inputDeadline``: wall clock and reason), journaled with the task, so an agent
restarted while the task waits arms the rest of it (:meth:`InputTimers.restore`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from agents.tasks import TaskRecord
from mesh.a2a import TaskState
from mesh.background import BackgroundTasks

__all__ = ["DEADLINE_KEY", "InputTimers", "deadline_metadata"]

#: The question's metadata key holding its own deadline: ``{"at": epoch seconds, "reason": ...}``.
DEADLINE_KEY = "inputDeadline"


def deadline_metadata(metadata: dict[str, Any] | None, timeout_s: float, reason: str) -> dict[str, Any]:
    """``metadata`` with the question's deadline, ``timeout_s`` from now."""
    return {**(metadata or {}), DEADLINE_KEY: {"at": time.time() + timeout_s, "reason": reason}}


log = logging.getLogger(__name__)


class InputTimers:
    """Arms a timer while a task is input-required; when it fires, ``cancel`` ends the task."""

    def __init__(self, timeout_s: float | None, cancel: Callable[..., Awaitable[None]]) -> None:
        self.timeout_s = timeout_s
        self._cancel = cancel
        self._firing = BackgroundTasks(log, "input timers")  # kept until they finish, failures logged

    def update(self, record: TaskRecord) -> None:
        """Called after every event of a task: (re)arm its timer or disarm it."""
        if record.input_timer is not None:
            record.input_timer.cancel()
            record.input_timer = None
        if record.state is not TaskState.input_required:
            return
        loop = asyncio.get_running_loop()
        if record.input_timeout is not None:
            own, reason = record.input_timeout
            record.input_timer = loop.call_later(own, self._fire, record, reason, TaskState.failed)
        elif (timeout := self.timeout_s) is not None:
            reason = f"no input within {timeout:g} s"
            record.input_timer = loop.call_later(timeout, self._fire, record, reason, TaskState.canceled)

    def restore(self, records: Iterable[TaskRecord]) -> None:
        """Arm the timers of questions journaled with a deadline (the tasks of a restarted agent)."""
        now = time.time()
        for record in records:
            message = record.task.status.message
            deadline = (message.metadata or {}).get(DEADLINE_KEY) if message is not None else None
            if record.state is not TaskState.input_required or not isinstance(deadline, dict):
                continue
            at = deadline.get("at")
            if isinstance(at, int | float):
                record.input_timeout = (max(at - now, 0.001), str(deadline.get("reason") or "no input in time"))
                self.update(record)

    def _fire(self, record: TaskRecord, reason: str, state: TaskState) -> None:
        record.input_timer = None
        self._firing.spawn(self._run(record, reason, state), name=f"input-timeout:{record.task.id}")

    async def _run(self, record: TaskRecord, reason: str, state: TaskState) -> None:
        await self._cancel(record, reason, state=state)
