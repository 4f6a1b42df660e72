"""The read-compatibility rules of spec section 9, applied by the ``from_dict`` methods.

Each function reads the raw wire object through a :class:`FieldReader` and returns the value
of one normalized field, accepting the legacy shapes (jiuwenswarm AgentRequest and earlier E2A).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from mesh.e2a.constants import (
    E2A_SOURCE_PROTOCOL_A2A,
    E2A_SOURCE_PROTOCOL_ACP,
    E2A_SOURCE_PROTOCOL_E2A,
    E2A_WIRE_INTERNAL_METADATA_KEYS,
)
from mesh.e2a.errors import E2AValidationError
from mesh.e2a.reader import FieldReader
from mesh.timestamps import utc_iso


def channel(r: FieldReader) -> str | None:
    """``channel``, else the legacy ``channel_id``."""
    value = r.string("channel")
    return value if value is not None else r.string("channel_id")


def method(r: FieldReader) -> str | None:
    """``method``, else the legacy ``req_method``."""
    value = r.string("method")
    return value if value is not None else r.string("req_method")


def agent_id(r: FieldReader) -> str | None:
    """``agent_id``, else ``source_agent_id``; never ``agent_ref.id``, a routing identity
    (often the sentinel ``default``) rather than the tenant agent id."""
    return r.stripped("agent_id") or r.stripped("source_agent_id")


def workspace_key(r: FieldReader) -> str | None:
    """``workspace_key``, else the legacy ``workspace_dir``."""
    return r.stripped("workspace_key") or r.stripped("workspace_dir")


def params_with_legacy_payload(r: FieldReader) -> dict[str, Any]:
    """``params`` plus the keys of a legacy top-level ``payload`` it lacks; empties skipped."""
    params = r.obj("params")
    for key, value in r.obj("payload").items():
        if key in params or value is None or value == [] or value == {}:
            continue
        params[key] = value
    return params


def channel_context(r: FieldReader) -> dict[str, Any]:
    """``channel_context`` plus legacy top-level ``metadata`` keys and ``app_id``, never overwriting."""
    context = r.obj("channel_context")
    for key, value in r.obj("metadata").items():
        # Wire-internal keys are codec bookkeeping; forwarding them would let a channel forge them.
        if key not in E2A_WIRE_INTERNAL_METADATA_KEYS:
            context.setdefault(key, value)
    app_id = r.string("app_id")
    if app_id:
        context.setdefault("app_id", app_id)
    return context


def legacy_binding(r: FieldReader, source_protocol: str, details: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """Fold a legacy top-level ``binding`` into provenance ``(source_protocol, details)``.

    The binding lands in ``details["migrated_from_binding"]`` unless that is already set; a
    binding of ``acp`` / ``a2a`` upgrades a provenance still at the default ``e2a``.
    """
    legacy = r.raw("binding")
    if legacy is None or details.get("migrated_from_binding") is not None:
        return source_protocol, details
    if isinstance(legacy, Mapping) and "value" in legacy:  # a serialized enum {"value": "acp"}
        legacy = legacy["value"]
    if not isinstance(legacy, str):
        raise E2AValidationError(r.at("binding"), "a string such as 'acp' or 'a2a'", legacy)
    # An explicit acp/a2a source wins over the legacy field.
    if source_protocol == E2A_SOURCE_PROTOCOL_E2A and legacy in (
        E2A_SOURCE_PROTOCOL_ACP,
        E2A_SOURCE_PROTOCOL_A2A,
    ):
        source_protocol = legacy
    return source_protocol, {**details, "migrated_from_binding": legacy}


def timestamp(r: FieldReader) -> str | None:
    """RFC 3339 strings pass through; legacy epoch seconds (int or float) become UTC ISO strings."""
    raw = r.raw("timestamp")
    if raw is None or isinstance(raw, str):
        return raw
    if isinstance(raw, (int, float)) and not isinstance(raw, bool) and math.isfinite(raw):
        try:
            return utc_iso(float(raw))
        except (OverflowError, OSError, ValueError):
            pass
    raise E2AValidationError(r.at("timestamp"), "an RFC 3339 string or epoch seconds", raw)


def sequence(raw: Any) -> int:
    """Legacy producers sent ``sequence`` as a string or float; anything unparsable counts as 0."""
    try:
        return int(raw)
    except (TypeError, ValueError, OverflowError):
        return 0
