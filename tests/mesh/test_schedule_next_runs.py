"""The next runs ``mesh agents`` and the dashboard show (:func:`mesh.schedules.command.upcoming_runs`),
read from a real SQLite record written through the store's API."""

from __future__ import annotations

import time

from mesh.schedules import ScheduleSpec
from mesh.schedules.command import NextRun, next_runs, upcoming_runs
from mesh.schedules.store import SqliteScheduleStore


def entry(name: str, agent: str, **fields: object) -> dict[str, object]:
    spec = ScheduleSpec.model_validate({"name": name, "agent": agent, "message": "2 + 2", "every": "5m", **fields})
    return spec.model_dump(mode="json")


def test_upcoming_runs_are_the_enabled_schedules_a_scheduler_runs_paused_ones_marked(namespace: str) -> None:
    store = SqliteScheduleStore.of(namespace)
    assert upcoming_runs(store) == [] and not store.exists()  # no record: none, and none made
    soon = int(time.time() * 1000) + 300_000
    store.register("often", entry("often", "calculator"), "a.yaml", soon)
    store.register("nightly", entry("nightly", "calculator", every=None, cron="0 3 * * *"), "a.yaml", soon)
    store.register("off", entry("off", "calculator", enabled=False), "a.yaml", None)
    store.register("gone", entry("gone", "calculator"), "a.yaml", soon - 3_600_000)  # its scheduler stopped
    store.register("echoes", entry("echoes", "echo"), "a.yaml", soon)
    store.set_paused("nightly", True)

    assert upcoming_runs(store, {"calculator"}) == [
        NextRun("nightly", "calculator", "cron 0 3 * * * UTC", soon, paused=True),
        NextRun("often", "calculator", "every 5m", soon, paused=False),
    ]
    assert [run.schedule for run in upcoming_runs(store)] == ["echoes", "nightly", "often"]
    [line] = next_runs(namespace, {"calculator"})  # the paused one is not `mesh agents`' line
    assert line.startswith("scheduled: calculator by often (every 5m), next ") and line.endswith(" UTC")
