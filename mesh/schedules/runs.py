"""One run of a schedule: claim its tick in the store, send the task, record how it ended.

Used by the scheduler for each tick and by ``mesh schedule run NAME`` (a manual tick, "now").
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from mesh.a2a import Message, Part, Task, TextPart, create_data_part, create_user_message
from mesh.a2a.exceptions import RpcError
from mesh.client import MeshClient
from mesh.errors import MeshError
from mesh.schedules.spec import ScheduleSpec
from mesh.schedules.store import ScheduleStore
from mesh.telemetry.metrics import METRICS

__all__ = ["RunOutcome", "message_of", "run_tick", "tick_ms"]

log = logging.getLogger("mesh.schedules")


def tick_ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def message_of(spec: ScheduleSpec, tick: datetime, *, manual: bool = False) -> Message:
    """The run's message; its metadata names the schedule and the tick (kept in the task's history)."""
    parts: list[Part] = [TextPart(text=spec.message.text)] if spec.message.text else []
    if spec.message.data is not None:
        parts.append(create_data_part(spec.message.data))
    metadata = {"schedule": {"name": spec.name, "tick": _iso(tick), "manual": manual}}
    return create_user_message(parts, context_id=spec.context_id, metadata=metadata)


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """A tick's run: ``refused`` says why this process did not run it (claimed elsewhere, paused...)."""

    tick: datetime
    refused: str | None = None
    task_id: str | None = None
    outcome: str | None = None  # the task's final state, or "error: ..."
    answer: Task | Message | None = None


async def run_tick(
    client: MeshClient,
    store: ScheduleStore,
    spec: ScheduleSpec,
    tick: datetime,
    *,
    by: str,
    component: str,
    manual: bool = False,
) -> RunOutcome:
    """Run ``spec``'s ``tick`` if this process wins its claim; the outcome is in the store and the log."""
    at = tick_ms(tick)
    request = {"agent": spec.agent, "text": spec.message.text, "data": spec.message.data, "contextId": spec.context_id}
    refused = await asyncio.to_thread(
        functools.partial(
            store.claim,
            spec.name,
            at,
            by,
            max_concurrent=spec.max_concurrent,
            timeout_s=spec.timeout_s,
            manual=manual,
            user=spec.user,
            request=request,
        )
    )
    if refused is not None:
        log.debug("schedule %s: tick %s not run here: %s", spec.name, _iso(tick), refused)
        return RunOutcome(tick, refused=refused)
    sent: list[str | None] = []
    noted: list[asyncio.Future[None]] = []

    def on_sent(task_id: str | None) -> None:
        sent.append(task_id)
        if task_id is not None:  # the task is known before its answer: `mesh schedule list` shows it
            noted.append(asyncio.get_running_loop().run_in_executor(None, store.started, spec.name, at, task_id))

    started = time.monotonic()
    answer: Task | Message | None = None
    try:
        answer = await client.send(
            spec.agent,
            message_of(spec, tick, manual=manual),
            context_id=spec.context_id,
            timeout=spec.timeout_s,
            on_sent=on_sent,
            user_id=spec.user,
        )
        outcome = answer.status.state.value if isinstance(answer, Task) else "completed"
    except (MeshError, RpcError, TimeoutError) as exc:
        outcome = f"error: {exc}"
    except asyncio.CancelledError:
        await asyncio.to_thread(store.ended, spec.name, at, "unknown: the scheduler stopped during the run", None)
        raise
    await asyncio.gather(*noted)
    task_id = answer.id if isinstance(answer, Task) else (sent[0] if sent else None)
    kept = answer.to_wire_dict() if answer is not None else None  # the user's chat history shows it
    await asyncio.to_thread(store.ended, spec.name, at, outcome, task_id, kept)
    seconds = time.monotonic() - started
    METRICS.component(client.namespace, component).task_ended(outcome.partition(":")[0], seconds)
    level = logging.INFO if outcome == "completed" else logging.WARNING
    log.log(level, "schedule %s: tick %s: task %s of %s %s", spec.name, _iso(tick), task_id, spec.agent, outcome)
    return RunOutcome(tick, task_id=task_id, outcome=outcome, answer=answer)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
