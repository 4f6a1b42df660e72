"""The ``schedules:`` section of a mesh file: its entries checked now (bad cron, unknown time zone,
a name given twice: load-time errors with the fix), one :class:`~mesh.schedules.scheduler.Scheduler`
per file built from them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ValidationError

from mesh.component import BuildContext, Component
from mesh.config.errors import config_error, type_name, validation_error_text
from mesh.errors import ConfigError
from mesh.schedules.spec import ScheduleSpec

__all__ = ["build_schedules", "parse_schedules"]


def parse_schedules(entries: Sequence[Any], ctx: BuildContext) -> list[ScheduleSpec]:
    specs: list[ScheduleSpec] = []
    for index, entry in enumerate(entries):
        where = (ctx.section, index)
        if not isinstance(entry, dict):
            raise config_error(
                ctx.source, where, f"expected a mapping, got {type_name(entry)}", "write - {name: ..., agent: ...}"
            )
        try:
            spec = ScheduleSpec.model_validate(entry)
        except ValidationError as exc:
            raise _refusal(exc, ctx, where) from exc
        if any(other.name == spec.name for other in specs):
            raise config_error(
                ctx.source, (*where, "name"), f"{spec.name!r} is taken", "give each schedule its own name"
            )
        specs.append(spec)
    return specs


def build_schedules(entries: Sequence[Any], ctx: BuildContext) -> list[Component]:
    from mesh.schedules.scheduler import Scheduler
    from mesh.schedules.store import open_schedule_store

    specs = parse_schedules(entries, ctx)
    if not specs:
        return []
    store = open_schedule_store(ctx.namespace, _store_of(ctx))
    return [Scheduler(specs, broker=ctx.broker, namespace=ctx.namespace, source=ctx.source, store=store)]


def _store_of(ctx: BuildContext) -> str:
    """Where the file's schedules claim their ticks: the one PostgreSQL store its entries share (else
    ``$MESH_STORE``, else the machine's SQLite record: :func:`~mesh.schedules.store.open_schedule_store`)."""
    if len(ctx.stores) > 1:
        from mesh.redaction import redact_url

        named = ", ".join(redact_url(url) for url in ctx.stores)
        raise config_error(
            ctx.source,
            ctx.section,
            f"the file's entries name {len(ctx.stores)} stores ({named}); the schedules claim their ticks in one",
            "give the file's agents one store:, or move the schedules to a file of their own and name the store "
            "in $MESH_STORE",
        )
    return ctx.stores[0] if ctx.stores else ""


def _refusal(exc: ValidationError, ctx: BuildContext, where: tuple[str, int]) -> ConfigError:
    """The entry's first problem: a check of ours says the problem and the fix itself
    ("bad cron expression ...; write five fields ..."), pydantic's get the shared wording."""
    first = exc.errors(include_url=False)[0]
    if first["type"] == "value_error":
        problem, _, fix = str(first["ctx"]["error"]).partition("; ")
        return config_error(ctx.source, (*where, *first["loc"]), problem, fix or "see docs/schedules.md")
    return ConfigError(validation_error_text(exc, source=ctx.source, prefix=where, model=ScheduleSpec))
