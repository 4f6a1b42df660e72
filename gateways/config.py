"""The ``gateways:`` section of a mesh config file (the ``mesh.sections`` entry point).

Each entry names its ``kind``; ``http`` is the A2A-over-HTTP gateway
(:class:`gateways.http.settings.HttpGatewaySettings` lists its keys).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from mesh.component import BuildContext, Component, component_trust
from mesh.config.errors import config_error, key_path, validation_error_text
from mesh.errors import ConfigError

KINDS = ("http",)


def build_gateways(entries: Sequence[Any], ctx: BuildContext) -> list[Component]:
    """One component per entry; errors name the file, the entry's key and the fix."""
    from gateways.http.server import HttpGateway
    from gateways.http.settings import HttpGatewaySettings

    parsed: list[tuple[HttpGatewaySettings, Any]] = []
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):  # all checked before any is built
        here = (ctx.section, index)
        if not isinstance(entry, Mapping):
            raise config_error(ctx.source, here, "expected a mapping", "write the entry as 'kind: http' and its keys")
        kind = entry.get("kind")
        if kind not in KINDS:
            raise config_error(
                ctx.source, key_path(*here, "kind"), f"unknown gateway kind {kind!r}", f"use one of: {', '.join(KINDS)}"
            )
        entry_trust = entry.get("trust")  # the gateway's own trust: overrides the file's
        entry = {key: value for key, value in entry.items() if key != "trust"}
        try:
            settings = HttpGatewaySettings.model_validate(entry)
        except ValidationError as exc:
            raise ConfigError(
                validation_error_text(exc, source=ctx.source, prefix=here, model=HttpGatewaySettings)
            ) from exc
        if settings.id in seen:
            raise config_error(
                ctx.source,
                key_path(*here, "id"),
                f"gateway id {settings.id!r} is also used by {key_path(ctx.section, seen[settings.id])}",
                "give each gateway its own id",
            )
        seen[settings.id] = index
        parsed.append((settings, component_trust(ctx, settings.id, entry_trust, here)))
    return [
        HttpGateway(
            settings,
            broker=ctx.broker_for(settings.id),
            namespace=ctx.namespace,
            trust=trust,
            artifacts=ctx.artifacts,
            schedules_store=ctx.stores[0] if len(ctx.stores) == 1 else "",  # where the file's schedules claim
        )
        for settings, trust in parsed
    ]
