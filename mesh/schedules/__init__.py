"""Scheduled tasks: a mesh file's ``schedules:`` start ordinary tasks on a cron or an interval,
exactly once per tick across every scheduler that shares their record: the machine's, or the
PostgreSQL store of the file's agents across machines (docs/schedules.md).

- :mod:`mesh.schedules.spec`: an entry and its ticks (cron by cronsim, ``every:`` from the epoch);
- :mod:`mesh.schedules.store`: the shared record where a tick is claimed, atomically (SQLite;
  PostgreSQL in :mod:`mesh.schedules.pgstore`);
- :mod:`mesh.schedules.runs`: one run (claim, send, record the outcome);
- :mod:`mesh.schedules.scheduler`: the component ``mesh run`` / ``mesh up --config`` start;
- :mod:`mesh.schedules.clock`: the system clock, or a :class:`ManualClock` for tests.
"""

from mesh.schedules.clock import Clock, ManualClock, SystemClock
from mesh.schedules.spec import ScheduleSpec

__all__ = ["Clock", "ManualClock", "ScheduleSpec", "SystemClock"]
