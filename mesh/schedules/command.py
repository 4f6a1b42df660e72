"""What ``mesh schedule ...`` does (its arguments: :mod:`mesh.cli.schedule_command`), and the next
runs ``mesh agents`` and the dashboard show (:func:`upcoming_runs`)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime

from mesh.cli.common import EXIT_OK, EXIT_TASK_NOT_COMPLETED
from mesh.config.errors import suggest
from mesh.errors import ConfigError
from mesh.schedules.spec import ScheduleSpec
from mesh.schedules.store import RunRecord, ScheduleRecord, ScheduleStore, open_schedule_store

__all__ = ["ACTIONS", "NextRun", "next_runs", "upcoming_runs"]

#: How late a next tick may be before `list` says no scheduler runs it (a run takes a moment to claim).
_STALE_S = 5.0


def _store(args: argparse.Namespace) -> ScheduleStore:
    return open_schedule_store(args.namespace, getattr(args, "store", None) or "")


async def _record(store: ScheduleStore, name: str) -> ScheduleRecord:
    records = await asyncio.to_thread(store.schedules)
    for record in records:
        if record.name == name:
            return record
    known = [r.name for r in records]
    close = suggest(name, known)
    hint = f"did you mean {close!r}? " if close else ""
    raise ConfigError(
        f"no schedule {name!r} in {store.where}; {hint}schedules: {', '.join(known) or 'none yet'} "
        "(a schedule is known once `mesh run FILE` of its file has started, in this namespace and store: "
        "give --store postgresql://... where the schedulers share one)"
    )


def _when(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _next(ms: int | None) -> str:
    """The next tick a scheduler waits for; one long past means no scheduler runs the schedule now."""
    if ms is not None and ms < (time.time() - _STALE_S) * 1000:
        return "- (no scheduler runs it)"
    return _when(ms)


@dataclass(frozen=True, slots=True)
class NextRun:
    """A schedule a scheduler runs now, with its next tick (what ``mesh agents`` and the dashboard show)."""

    schedule: str
    agent: str
    #: How it is timed, for people: ``every 15m``, ``cron 0 7 * * 1-5 Europe/Paris``.
    when: str
    next_tick_ms: int
    #: Paused (``mesh schedule pause``): its scheduler keeps the next tick, and skips it.
    paused: bool


def upcoming_runs(store: ScheduleStore, agents: Collection[str] | None = None) -> list[NextRun]:
    """The enabled schedules in ``store`` (of ``agents``, else all) whose next tick a scheduler waits
    for, paused ones included, by name. No record yet: none (reading creates nothing). Blocking."""
    if not store.exists():  # no schedule ever ran here: nothing to read, nothing to create
        return []
    stale_ms = (time.time() - _STALE_S) * 1000
    found = []
    for record in store.schedules():
        spec = ScheduleSpec.model_validate(record.spec)
        tick = record.next_tick_ms
        if (agents is None or spec.agent in agents) and spec.enabled and tick is not None and tick >= stale_ms:
            found.append(NextRun(record.name, spec.agent, spec.when, tick, record.paused))
    return found


def next_runs(namespace: str, agents: set[str], store_setting: str = "") -> list[str]:
    """For ``mesh agents``: a line per running, unpaused schedule of one of ``agents``, with its next tick
    (from the record ``store_setting`` names, else ``$MESH_STORE``'s, else the machine's)."""
    runs = upcoming_runs(open_schedule_store(namespace, store_setting), agents)
    return [
        f"scheduled: {run.agent} by {run.schedule} ({run.when}), next {_when(run.next_tick_ms)}"
        for run in runs
        if not run.paused
    ]


async def list_schedules(args: argparse.Namespace) -> int:
    store = _store(args)
    records = await asyncio.to_thread(store.schedules)
    last: dict[str, RunRecord] = {}
    for run in await asyncio.to_thread(store.runs, None, 1000):
        last.setdefault(run.schedule, run)
    if args.json:
        print(json.dumps([_as_dict(r, last.get(r.name)) for r in records], indent=2))
        return EXIT_OK
    if not records:
        print(f"no schedules yet in namespace {args.namespace!r} (mesh run FILE of a file with schedules: adds them)")
        return EXIT_OK
    rows = [["NAME", "AGENT", "WHEN", "STATE", "NEXT", "LAST RUN"]]
    for record in records:
        spec = ScheduleSpec.model_validate(record.spec)
        latest = last.get(record.name)
        state = "paused" if record.paused else ("enabled" if spec.enabled else "disabled")
        ran = f"{_when(latest.tick_ms)} {latest.outcome or 'running'}" if latest is not None else "-"
        rows.append([record.name, spec.agent, spec.when, state, _next(record.next_tick_ms), ran])
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK


def _as_dict(record: ScheduleRecord, run: RunRecord | None) -> dict[str, object]:
    return {
        "name": record.name,
        "spec": record.spec,
        "source": record.source,
        "paused": record.paused,
        "next_tick": _when(record.next_tick_ms),
        "last_run": None
        if run is None
        else {"tick": _when(run.tick_ms), "task_id": run.task_id, "outcome": run.outcome, "manual": run.manual},
    }


async def run_now(args: argparse.Namespace) -> int:
    from mesh.cli.client_calls import connect
    from mesh.cli.render import answer_text, as_json
    from mesh.schedules.runs import run_tick

    store = _store(args)
    spec = ScheduleSpec.model_validate((await _record(store, args.name)).spec)
    async with connect(args) as client:
        outcome = await run_tick(
            client, store, spec, datetime.now(UTC), by=f"mesh schedule run ({client.client_id})", component="cli",
            manual=True,
        )  # fmt: skip
    if outcome.refused is not None:
        raise ConfigError(f"schedule {spec.name!r} did not run: {outcome.refused}; try again once a run has ended")
    if args.json and outcome.answer is not None:
        print(as_json(outcome.answer, indent=2))
    else:
        print(f"schedule {spec.name}: task {outcome.task_id} {outcome.outcome}")
        if outcome.answer is not None and (text := answer_text(outcome.answer)):
            print(text)
    return EXIT_OK if outcome.outcome == "completed" else EXIT_TASK_NOT_COMPLETED


async def _set_paused(args: argparse.Namespace, paused: bool) -> int:
    store = _store(args)
    await _record(store, args.name)  # an unknown name: the error with the known ones
    await asyncio.to_thread(store.set_paused, args.name, paused)
    if paused:
        print(f"schedule {args.name} paused: its ticks do not run until `mesh schedule resume {args.name}`")
    else:
        print(f"schedule {args.name} resumed: its next tick runs")
    return EXIT_OK


async def pause(args: argparse.Namespace) -> int:
    return await _set_paused(args, True)


async def resume(args: argparse.Namespace) -> int:
    return await _set_paused(args, False)


ACTIONS: dict[str, Callable[[argparse.Namespace], Awaitable[int]]] = {
    "list": list_schedules,
    "run": run_now,
    "pause": pause,
    "resume": resume,
}
