"""One entry of a mesh file's ``schedules:`` list, checked at load time, and its ticks.

::

    schedules:
      - name: morning-sum              # unique in the namespace: its runs are claimed under it
        agent: calculator
        message: "2 + 2"               # text, or {text: ..., data: {...}}
        cron: "0 7 * * 1-5"            # five-field cron (cronsim), or every: 15m (s, m, h, d; 1h30m)
        timezone: Europe/Paris         # the cron's zone (IANA name; default UTC)
        user: alice                    # the task's userId
        context_id: mornings           # optional: every run continues this conversation
        missed: skip                   # a tick missed while no scheduler ran: skip, or run_once
        max_concurrent: 1              # runs of this schedule in flight at once, across the mesh
        enabled: true
        timeout_s: 300                 # how long a run may take

An ``every:`` interval counts from the Unix epoch in UTC (``every: 15m`` fires at :00, :15...),
so every process computes the same ticks: the claim of a tick is keyed by its time.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from mesh.config.errors import suggest
from topics import validate_identifier

__all__ = ["ScheduleMessage", "ScheduleSpec", "parse_every"]

_EVERY = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def parse_every(text: str) -> timedelta:
    """``15m``, ``1h30m``, ``10s``, ``2d`` -> the interval; a ValueError naming the fix otherwise."""
    found = _EVERY.fullmatch(text.strip().lower()) if isinstance(text, str) else None
    if found is None or not any(found.groups()):
        raise ValueError(f"{text!r} is not an interval; write e.g. every: 15m (units: d, h, m, s; 1h30m)")
    days, hours, minutes, seconds = (int(g or 0) for g in found.groups())
    interval = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if interval <= timedelta(0):
        raise ValueError(f"{text!r} is no time at all; give an interval of at least 1s")
    return interval


class ScheduleMessage(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = ""
    data: dict[str, Any] | None = Field(None, description="a JSON object sent as a DataPart")


class ScheduleSpec(BaseModel):
    """What a ``schedules:`` entry says; see the module docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="the schedule's name, unique in the namespace (letters, digits, _ . -)")
    agent: str = Field(description="the agent that gets the task (as `mesh agents` lists it)")
    message: ScheduleMessage = Field(description="the task's message: text, or {text, data}")
    cron: str | None = Field(None, description="a five-field cron expression such as '0 7 * * 1-5'")
    every: str | None = Field(None, description="an interval such as 15m, 1h30m or 10s")
    timezone: str = Field("UTC", description="the IANA time zone of the cron, e.g. Europe/Paris")
    user: str | None = Field(None, description="the userId the tasks carry")
    context_id: str | None = Field(None, description="a contextId every run continues")
    missed: Literal["skip", "run_once"] = Field("skip", description="skip, or run_once: the last missed tick")
    max_concurrent: int = Field(1, ge=1, le=100, description="runs in flight at once across the mesh")
    enabled: bool = True
    timeout_s: float = Field(300.0, gt=0, description="how long one run may take, in seconds")

    @field_validator("name", "agent")
    @classmethod
    def _identifier(cls, value: str) -> str:
        try:
            return validate_identifier(value, "name")
        except ValueError as exc:  # it names the rule: letters, digits, '_', '.' and '-'
            raise ValueError(f"{exc}; a schedule names an agent as `mesh agents` lists it") from None

    @field_validator("message", mode="before")
    @classmethod
    def _text_message(cls, value: Any) -> Any:
        return {"text": value} if isinstance(value, str) else value

    @field_validator("every")
    @classmethod
    def _every(cls, value: str | None) -> str | None:
        if value is not None:
            parse_every(value)
        return value

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            close = suggest(value, available_timezones())
            hint = f"did you mean {close!r}? " if close else ""
            raise ValueError(
                f"unknown time zone {value!r}; {hint}use an IANA name such as Europe/Paris or UTC"
            ) from None
        return value

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str | None) -> str | None:
        if value is not None:
            from cronsim import CronSim, CronSimError

            try:
                CronSim(value, datetime.now(UTC))
            except CronSimError as exc:
                raise ValueError(
                    f"bad cron expression {value!r} ({exc}); write five fields: minute hour day-of-month month "
                    "day-of-week, e.g. '0 7 * * 1-5' (07:00 on weekdays)"
                ) from None
        return value

    @model_validator(mode="after")
    def _one_timing(self) -> ScheduleSpec:
        if (self.cron is None) == (self.every is None):
            raise ValueError("give exactly one of cron: (e.g. '0 7 * * 1-5') and every: (e.g. 15m)")
        return self

    @property
    def when(self) -> str:
        """How it is timed, for people: ``cron 0 7 * * 1-5 Europe/Paris`` or ``every 15m``."""
        return f"every {self.every}" if self.every is not None else f"cron {self.cron} {self.timezone}"

    def next_after(self, moment: datetime) -> datetime:
        """The first tick strictly after ``moment`` (aware), in UTC."""
        if self.every is not None:
            step = parse_every(self.every)
            count = (moment - _EPOCH) // step + 1
            return _EPOCH + count * step
        from cronsim import CronSim

        local = moment.astimezone(ZoneInfo(self.timezone))
        tick: datetime = next(CronSim(str(self.cron), local))
        return tick.astimezone(UTC)

    def last_at_or_before(self, moment: datetime) -> datetime:
        """The latest tick at or before ``moment``, in UTC."""
        if self.every is not None:
            step = parse_every(self.every)
            return _EPOCH + ((moment - _EPOCH) // step) * step
        from cronsim import CronSim

        # cronsim's reverse iteration starts strictly before its start: a tick exactly at `moment` comes first.
        local = (moment + timedelta(seconds=1)).astimezone(ZoneInfo(self.timezone))
        tick: datetime = next(CronSim(str(self.cron), local, reverse=True))
        return tick.astimezone(UTC)
