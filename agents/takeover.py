"""A dead replica's running tasks taken over by another (DESIGN, "Stores").

On a shared store (:mod:`agents.sharedtasks`) each replica's running tasks carry its lease. A
replica learns that another died from its instance card going empty (its will: within the
broker's keepalive of the death) or, where no will arrives (a partition of the store's host,
a broker that lost it), from the lease running out. It then claims the dead one's running
tasks; each claimed task is one of:

- ``running``: it runs here already (its request, never acknowledged, was redelivered here);
- ``resumed``: ``on_owner_lost: resume`` and an agent that resumes its tasks (workflows, from
  their recorded nodes), or a task waiting for its user's answer, which now comes here;
- ``failed``: otherwise, with a message saying which replica died and how to go on.

Each takeover is logged and counted (``mesh_tasks_taken_over_total``). A replica that finds a
task of its own claimed by another (it was cut off longer than its lease) cancels it here: the
store keeps the other's outcome (a row is never written again once terminal).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Literal

from agents.journal import LoadedTasks, StoredTask
from agents.runner import TaskRunner
from agents.sharedtasks import SharedTask, SharedTasks
from agents.tasks import TaskRecord, TaskStore
from mesh.a2a import INTERRUPTED_STATES, TaskState, TextPart
from mesh.background import BackgroundTasks
from mesh.telemetry.metrics import ComponentMetrics

__all__ = ["Takeover"]

log = logging.getLogger(__name__)


class Takeover:
    """Claims the running tasks of dead replicas of one agent and applies its ``on_owner_lost``."""

    def __init__(
        self,
        shared: SharedTasks,
        *,
        agent_name: str,
        policy: Literal["fail", "resume"],
        tasks: TaskStore,
        runner: TaskRunner,
        resume: Callable[[TaskRecord], bool] | None,
        metrics: ComponentMetrics,
    ) -> None:
        self.shared = shared
        self.agent_name = agent_name
        self.policy = policy
        self.tasks = tasks
        self.runner = runner
        self.resume = resume  # None: the agent cannot resume a task
        self.metrics = metrics
        self._sweeper: asyncio.Task[None] | None = None
        self._claims = BackgroundTasks(log, f"agent {self.agent_name} takeover")

    def start(self) -> None:
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    async def stop(self) -> None:
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
        await asyncio.gather(*([sweeper] if sweeper else []), self._claims.cancel_all(), return_exceptions=True)

    def replica_gone(self, instance: str) -> None:
        """Replica ``instance``'s card went empty (its will): claim its tasks now."""
        if instance == self.shared.instance:
            return
        self._claims.spawn(self.claim(dead=instance, how="its connection ended"), name=f"claim {instance}")

    async def settled(self) -> None:
        """Return once the claims under way here (a will's) have settled their tasks."""
        if self._claims:
            await asyncio.gather(*self._claims, return_exceptions=True)

    async def claim(self, *, dead: str | None, how: str, task_id: str | None = None) -> int:
        """Claim and settle what ``dead`` ran (None: every lapsed lease); how many were claimed."""
        try:
            claimed = await self.shared.claim(dead=dead, task_id=task_id)
        except Exception as exc:  # the store is away: the next sweep tries again
            log.warning("agent %s: cannot take over tasks from the shared store: %s", self.agent_name, exc)
            return 0
        if claimed:  # a lapsed lease's claim does not say whose it was: the tasks' messages say how
            self._settle(dead or "(unknown: its lease ran out)", claimed, how)
        return len(claimed)

    def _settle(self, dead: str, claimed: list[SharedTask], how: str) -> None:
        outcomes = {"running": 0, "resumed": 0, "failed": 0}
        for found in claimed:
            local = self.tasks.get(found.task.id)
            if local is not None and not local.is_terminal:
                outcomes["running"] += 1
                continue
            if local is not None:  # ended here, its row fenced out meanwhile: write it again as ours
                self.tasks.changed(local)
                continue
            orphans = self.tasks.restore(LoadedTasks([StoredTask(found.task, found.request_key, 0.0, found.owner)]))
            record = self.tasks.get(found.task.id)
            if record is None:  # the retention bounds dropped it at once
                continue
            if record.state in INTERRUPTED_STATES or (
                orphans and self.policy == "resume" and self.resume is not None and self.resume(record)
            ):
                outcomes["resumed"] += 1
                self.tasks.changed(record)  # written as ours
                continue
            self.runner.transition(record, TaskState.failed, [TextPart(text=self._reason(dead, how))])
            outcomes["failed"] += 1
        for outcome, count in outcomes.items():
            if count:
                self.metrics.took_over(outcome, count)
        log.warning(
            "agent %s (replica %s): took over %d running task(s) of replica %s (%s): %d failed, %d resumed, "
            "%d running here already (on_owner_lost: %s)",
            self.agent_name,
            self.shared.instance,
            len(claimed),
            dead,
            how,
            outcomes["failed"],
            outcomes["resumed"],
            outcomes["running"],
            self.policy,
        )

    def _reason(self, dead: str, how: str) -> str:
        why = f"replica {dead} of agent {self.agent_name!r}, which ran the task, is gone ({how})"
        if self.policy == "resume":
            return f"{why}; this agent cannot resume a task (on_owner_lost: resume needs a workflow); send it again"
        return f"{why}; the task failed (on_owner_lost: fail); send it again"

    async def _sweep(self) -> None:
        """Every third of the lease: claim lapsed leases; cancel what another replica took from us."""
        period = self.shared.journal.lease_s / 3
        while True:
            await asyncio.sleep(period)
            await self.claim(dead=None, how="its lease ran out")
            try:
                lost = await self.shared.taken_from_me(r.id for r in self.tasks.active())
            except Exception as exc:  # the store is away
                log.warning("agent %s: cannot check its task leases: %s", self.agent_name, exc)
                continue
            for task_id in lost:
                record = self.tasks.get(task_id)
                if record is not None and not record.is_terminal:
                    log.warning(
                        "agent %s (replica %s): task %s was taken over by another replica while this one was "
                        "cut off; canceled here, the store keeps the other's outcome",
                        self.agent_name,
                        self.shared.instance,
                        task_id,
                    )
                    await self.runner.cancel(record, "another replica took the task over")
