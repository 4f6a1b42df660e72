"""What the dashboard keeps per task and per agent (:mod:`gateways.dashboard.model`): its
bounds, a task's record, and the rates per agent over a sliding window.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["RATE_KINDS", "TERMINAL_STATES", "Bounds", "RateKind", "Rates", "TaskRecord"]

RateKind = Literal["requests", "answers", "errors", "refusals"]
RATE_KINDS: tuple[RateKind, ...] = ("requests", "answers", "errors", "refusals")
TERMINAL_STATES = frozenset({"completed", "canceled", "failed", "rejected", "error"})


@dataclass(frozen=True, slots=True)
class Bounds:
    """How much the dashboard keeps (see the module docstring)."""

    max_tasks: int = 200
    max_events: int = 100
    max_text: int = 400
    max_calls: int = 1000
    rate_window_s: int = 60

    def to_json_dict(self) -> dict[str, int]:
        return {
            "maxTasks": self.max_tasks,
            "maxEventsPerTask": self.max_events,
            "maxText": self.max_text,
            "rateWindowS": self.rate_window_s,
        }


@dataclass(slots=True)
class TaskRecord:
    """One task seen on the mesh: its request, its state and its latest events."""

    key: str
    task_id: str
    agent: str
    method: str
    caller: str
    caller_kind: str
    started: float
    updated: float
    chain: list[str]
    depth: int
    parent_task_id: str | None
    delegated_by: str | None
    state: str = "submitted"
    events: deque[dict[str, Any]] = field(default_factory=deque)
    dropped_events: int = 0
    # A workflow's sub-task: the node it runs; a workflow's task: its nodes' states so far.
    workflow_node: str | None = None
    node_states: dict[str, str] = field(default_factory=dict)
    # An LLM agent's tool calls waiting for approval (gateways.dashboard.llm).
    approvals: list[dict[str, str]] = field(default_factory=list)

    def header(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "taskId": self.task_id,
            "agent": self.agent,
            "method": self.method,
            "caller": self.caller,
            "callerKind": self.caller_kind,
            "started": self.started,
            "updated": self.updated,
            "chain": self.chain,
            "depth": self.depth,
            "parentTaskId": self.parent_task_id,
            "delegatedBy": self.delegated_by,
            "state": self.state,
            "final": self.state in TERMINAL_STATES,
            "droppedEvents": self.dropped_events,
            "workflowNode": self.workflow_node,
            "nodeStates": self.node_states,
            "approvals": self.approvals,
        }

    def to_json_dict(self) -> dict[str, Any]:
        return self.header() | {"events": list(self.events)}


class Rates:
    """Counts per agent and kind over a sliding window of one-second buckets."""

    def __init__(self, window_s: int, clock: Callable[[], float]) -> None:
        self.window_s = window_s
        self.clock = clock
        # agent -> kind -> deque of [second, count]
        self._buckets: dict[str, dict[RateKind, deque[list[int]]]] = {}

    def count(self, agent: str, kind: RateKind) -> None:
        now = int(self.clock())
        per_kind = self._buckets.setdefault(agent, {k: deque() for k in RATE_KINDS})
        buckets = per_kind[kind]
        if buckets and buckets[-1][0] == now:
            buckets[-1][1] += 1
        else:
            buckets.append([now, 1])
        self._trim(buckets, now)

    def forget(self, agent: str) -> None:
        self._buckets.pop(agent, None)

    def snapshot(self) -> dict[str, dict[str, int]]:
        now = int(self.clock())
        result: dict[str, dict[str, int]] = {}
        for agent, per_kind in self._buckets.items():
            counts: dict[str, int] = {}
            for kind, buckets in per_kind.items():
                self._trim(buckets, now)
                counts[kind] = sum(count for _, count in buckets)
            result[agent] = counts
        return result

    def _trim(self, buckets: deque[list[int]], now: int) -> None:
        while buckets and buckets[0][0] <= now - self.window_s:
            buckets.popleft()
