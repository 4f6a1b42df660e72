"""Size and nesting limits of a request, shared by agents and gateways (JAF's defaults).

Agents check them on receipt and the gateways at the edge, to refuse early; both answer with
the same ``InvalidParams`` naming the bad part. JAF sets no nesting depth; the mesh's default
of 32 levels (:data:`~mesh.a2a.DEFAULT_MAX_DEPTH`) is far beyond any real A2A message.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from mesh.a2a import DEFAULT_MAX_DEPTH, InvalidParams, InvalidRequest, find_unserializable
from mesh.properties import USER_CONFIG, MessageProperties


class MessageLimits(BaseModel):
    """How large a request may be; the field names are the ``limits:`` keys of config files."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_message_bytes: int = Field(1_000_000, gt=0, description="the whole request payload")
    max_parts: int = Field(100, gt=0, description="parts in one message")
    max_text_part_bytes: int = Field(100_000, gt=0, description="UTF-8 bytes of one text part")
    max_data_part_bytes: int = Field(1_000_000, gt=0, description="JSON bytes of one data part")
    max_nesting_depth: int = Field(
        DEFAULT_MAX_DEPTH, gt=0, description="objects and arrays nested in the params or the a2aUserConfig"
    )


def check_user_config(props: MessageProperties, limits: MessageLimits) -> None:
    """Refuse an ``a2aUserConfig`` that is no JSON object or nests too deep: :class:`InvalidRequest`."""
    raw = props.get_extra(USER_CONFIG)
    if raw is not None:  # what the properties could not read as a JSON object
        raise InvalidRequest(
            f"the a2aUserConfig user property must be a JSON object nested at most {limits.max_nesting_depth} "
            f"levels deep (limits.max_nesting_depth); got {len(raw)} characters that are not",
            data={"property": USER_CONFIG},
        )
    if props.user_config:
        found = find_unserializable(props.user_config, USER_CONFIG, limits.max_nesting_depth)
        if found is not None:
            where, reason = found
            raise InvalidRequest(f"{where}: {reason}", data={"property": USER_CONFIG, "path": where})


def check_message_limits(message: Any, limits: MessageLimits, *, path: str = "params.message") -> None:
    """Refuse a message with too many or too large parts: :class:`InvalidParams` naming the part.

    ``message`` is a message model or a parsed wire dict (A2A 0.3 or 1.0: a part's content is
    its ``text`` or ``data`` member). Parts of an unexpected shape are left to validation.
    """
    parts = _member(message, "parts")
    if not isinstance(parts, list):
        return
    if len(parts) > limits.max_parts:
        raise _too_big(f"{path}.parts", f"{len(parts)} parts", limits.max_parts, "max_parts")
    for index, part in enumerate(parts):
        text = _member(part, "text")
        if isinstance(text, str):
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > limits.max_text_part_bytes:
                limit = limits.max_text_part_bytes
                raise _too_big(f"{path}.parts.{index}.text", f"{size} bytes", limit, "max_text_part_bytes")
        data = _member(part, "data")
        if data is not None:
            size = len(json.dumps(data, separators=(",", ":")))
            if size > limits.max_data_part_bytes:
                limit = limits.max_data_part_bytes
                raise _too_big(f"{path}.parts.{index}.data", f"{size} bytes", limit, "max_data_part_bytes")


def _member(value: Any, name: str) -> Any:
    if isinstance(value, Mapping):
        return value.get(name)
    if isinstance(value, BaseModel):
        # Its fields and its extra fields, read directly: getattr of one it lacks (``data`` of a
        # TextPart) goes through pydantic's __getattr__ and an AttributeError, ~2 us a part.
        if name in value.__dict__:
            return value.__dict__[name]
        return (value.__pydantic_extra__ or {}).get(name)
    return getattr(value, name, None)


def _too_big(path: str, size: str, limit: int, setting: str) -> InvalidParams:
    return InvalidParams(
        f"{path}: {size}; the limit is {limit} (limits.{setting}); send large content as a file by URI",
        data={"errors": [{"path": path, "reason": f"{size} exceeds {limit}", "type": "too_large"}]},
    )
