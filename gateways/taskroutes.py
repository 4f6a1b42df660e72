"""What a gateway remembers of the tasks it forwarded: which agent has each, whose it is, its
last known state. It routes a later request about a task (GetTask, CancelTask, resubscribe) to
its agent, keeps one caller off another's tasks and answers ListTasks."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mesh.a2a import TERMINAL_STATES
from mesh.calls import CallOptions, CallPath
from mesh.errors import MeshError

__all__ = ["TaskRoute", "TaskRoutes"]

log = logging.getLogger(__name__)

_TERMINAL = {state.value for state in TERMINAL_STATES}


@dataclass(slots=True)
class TaskRoute:
    """What the gateway remembers of a task it forwarded: which agent has it, its last state."""

    task_id: str
    agent: str
    context_id: str | None
    owner: str | None
    state: str | None = None
    task: dict[str, Any] | None = None  # the last Task seen, as A2A 0.3 JSON
    updated: float = 0.0


class TaskRoutes:
    """The ``max_tasks`` most recent tasks forwarded (the oldest forgotten first)."""

    def __init__(self, calls: CallPath, token_for: Callable[[str | None], str | None], *, max_tasks: int) -> None:
        self._calls = calls
        self._token_for = token_for  # the user token the gateway signs for a user, if any
        self._tasks: OrderedDict[str, TaskRoute] = OrderedDict()
        self._max_tasks = max_tasks

    def get(self, task_id: str) -> TaskRoute | None:
        return self._tasks.get(task_id)

    def all(self) -> list[TaskRoute]:
        return list(self._tasks.values())

    def remember(self, task_id: str, agent: str, params: dict[str, Any], owner: str | None) -> None:
        """A send to ``agent`` started task ``task_id`` for ``owner``."""
        message = params.get("message") or {}
        route = self._tasks.get(task_id)
        if route is None:
            route = self._tasks[task_id] = TaskRoute(task_id, agent, message.get("contextId"), owner)
            while len(self._tasks) > self._max_tasks:
                self._tasks.popitem(last=False)
        route.updated = time.time()

    def observe(self, result: dict[str, Any]) -> None:
        """Keep the latest known state of a task the gateway forwarded (a Task or an event)."""
        task_id = result.get("id") if result.get("kind") == "task" else result.get("taskId")
        route = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if route is None:
            return
        status = result.get("status")
        if isinstance(status, dict):
            route.state = status.get("state")
        if result.get("kind") == "task":
            route.task = result
            route.context_id = result.get("contextId", route.context_id)
        route.updated = time.time()

    async def refresh(self, owner: str | None, *, limit: int = 100, timeout_s: float = 2.0) -> None:
        """Ask the agents where ``owner``'s unfinished tasks stand (the ``limit`` most recent), so
        ListTasks shows live states: a task sent without blocking goes on without the gateway
        seeing it. A task whose agent does not answer within ``timeout_s`` keeps its last state."""
        unfinished = [
            route
            for route in reversed(self._tasks.values())  # the most recent first
            if route.owner == owner and route.state not in _TERMINAL
        ][:limit]
        gate = asyncio.Semaphore(16)  # a page of tasks must not become a burst of requests

        async def refresh(route: TaskRoute) -> None:
            options = CallOptions(
                user_id=owner,
                auth_token=self._token_for(owner),
                idle_timeout_s=timeout_s,
                deadline_s=timeout_s,
                events=False,
            )
            async with gate:
                try:
                    async with self._calls.call(route.agent, "tasks/get", {"id": route.task_id}, options) as call:
                        answer = await call.result()
                except MeshError as exc:  # gone, timed out, forgotten by the agent: keep what we know
                    log.debug("ListTasks: task %s of %r not refreshed: %s", route.task_id, route.agent, exc)
                    return
            if isinstance(answer.json, dict):
                self.observe(answer.json)

        await asyncio.gather(*(refresh(route) for route in unfinished))
