"""Tagged unions and readable validation errors.

Every A2A union (parts, files, security schemes, results, errors) is validated by
pydantic-core's tagged-union validator, picked by a small callable so a missing or unknown tag
gives one clear error instead of one error per union member.

Pydantic puts the chosen tag into an error's location (``parts.0.TextPart.text``). Tags are
therefore the member class names, which never collide with a camelCase wire name, and
:func:`validation_error_details` strips them so every path reads like the JSON it points into
(``params.message.parts.0.text``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

from pydantic import BaseModel, Discriminator, Tag, ValidationError

# Re-exported: the A2A 1.0 translation modules of the HTTP gateway import only mesh.a2a.
from mesh.errors import short_repr as short_repr

#: pydantic error type used by every discriminator built here.
DISCRIMINATOR_ERROR = "invalid_discriminator"

# Tags pydantic may insert into error locations; filled as unions are declared.
_UNION_TAGS: set[str] = set()


def tag(model: type[BaseModel]) -> Tag:
    """The tag of one union member: its class name."""
    _UNION_TAGS.add(model.__name__)
    return Tag(model.__name__)


def discriminator(
    members: Mapping[Hashable, type[BaseModel]],
    *,
    read: Callable[[dict[str, Any]], Any],
    field: str | None,
    expected: str,
) -> Discriminator:
    """Build the discriminator of a union whose members are declared with :func:`tag`.

    ``read`` extracts the key looked up in ``members`` from an input dict (``None`` or an
    unknown key is a validation error); ``field`` is the wire key the error path should point
    at, if any; ``expected`` describes the valid choices for the error message.
    """
    tags = {key: model.__name__ for key, model in members.items()}
    own_tags = frozenset(tags.values())

    def pick(value: Any) -> str | None:
        if isinstance(value, dict):
            key = read(value)
        elif isinstance(value, BaseModel):
            name = type(value).__name__
            if name in own_tags:  # an already-built member: keep it as it is
                return name
            key = getattr(value, field, None) if field else None
        else:
            return None
        try:
            return tags.get(key)
        except TypeError:  # unhashable key, e.g. "kind": []
            return None

    pick.__name__ = f"pick_by_{field or 'keys'}"
    return Discriminator(
        pick,
        custom_error_type=DISCRIMINATOR_ERROR,
        custom_error_message=f"{field + ' ' if field else ''}must be {expected}",
        custom_error_context={"field": field or "", "expected": expected},
    )


def read_field(field: str) -> Callable[[dict[str, Any]], Any]:
    """A ``read`` function for :func:`discriminator` taking the key from one member."""

    def read(value: dict[str, Any]) -> Any:
        return value.get(field)

    return read


def _is_tag(item: str | int) -> bool:
    return isinstance(item, str) and item in _UNION_TAGS


def _reason(error: Mapping[str, Any]) -> tuple[str, str | None]:
    """The human reason of one pydantic error and the wire key to append to its path."""
    value = error.get("input")
    if error["type"] == DISCRIMINATOR_ERROR:
        ctx = error.get("ctx") or {}
        field, expected = ctx.get("field", ""), ctx.get("expected", "")
        if not isinstance(value, dict):
            return f"expected an object, got {type(value).__name__} {short_repr(value)}", None
        if not field:
            return f"must be {expected} (keys: {', '.join(map(str, value)) or 'none'})", None
        if field in value:
            return f"unknown {field} {short_repr(value[field])}; expected {expected}", field
        return f"missing; expected {expected}", field
    reason = str(error["msg"])
    if error["type"] != "missing" and (value is None or isinstance(value, str | int | float)):
        reason += f" (got {short_repr(value)})"
    return reason, None


def validation_error_details(exc: ValidationError, *, prefix: str = "", limit: int = 50) -> list[dict[str, str]]:
    """One ``{"path", "reason", "type"}`` dict per bad field, paths in wire (camelCase) names.

    ``prefix`` is the path of the validated value inside its document, e.g. ``"params"``.
    At most ``limit`` entries are returned: a hostile payload must not buy a huge error reply.
    """
    details: list[dict[str, str]] = []
    for error in exc.errors(include_url=False)[:limit]:
        reason, extra_key = _reason(error)
        parts = [prefix] if prefix else []
        parts.extend(str(item) for item in error["loc"] if not _is_tag(item))
        if extra_key:
            parts.append(extra_key)
        path = ".".join(parts) or "<root>"
        details.append({"path": path, "reason": reason, "type": error["type"]})
    return details


def format_validation_error(exc: ValidationError, *, prefix: str = "", limit: int = 10) -> str:
    """Readable one-line text of a ``ValidationError``: ``path: reason; path: reason``."""
    details = validation_error_details(exc, prefix=prefix, limit=limit)
    text = "; ".join(f"{d['path']}: {d['reason']}" for d in details)
    hidden = exc.error_count() - len(details)
    return f"{text}; ... and {hidden} more" if hidden > 0 else text
