"""Type string -> message model, which plugins extend; decoding never loses a ``req_id``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agents.a2e.artifacts import ARTIFACT_TYPE_MAP
from agents.a2e.messages import (
    A2EError,
    A2EEvent,
    A2EMessage,
    GenericMessage,
    HandshakeRequest,
    HandshakeResponse,
    Ping,
    Pong,
    Shutdown,
    SkillCallRequest,
    SkillCallResponse,
    SkillCancel,
    SkillDiscoverRequest,
    SkillDiscoverResponse,
    SkillEvent,
)

__all__ = ["A2E_BASE_TYPE_MAP", "SKILL_TYPE_MAP", "TypeRegistry"]

log = logging.getLogger(__name__)

MessageMap = Mapping[str, type[A2EMessage]]

A2E_BASE_TYPE_MAP: MessageMap = {
    model.TYPE: model for model in (HandshakeRequest, HandshakeResponse, A2EEvent, Ping, Pong, Shutdown, A2EError)
}
SKILL_TYPE_MAP: MessageMap = {
    model.TYPE: model
    for model in (
        SkillDiscoverRequest,
        SkillDiscoverResponse,
        SkillCallRequest,
        SkillCallResponse,
        SkillEvent,
        SkillCancel,
    )
}


class TypeRegistry:
    """Decodes JSON objects into the registered models.

    A type nobody registered, or a message its model refuses, becomes a :class:`GenericMessage`
    that keeps every field, ``req_id`` included, so the call it answers still resolves.
    """

    def __init__(self, *maps: MessageMap) -> None:
        self._models: dict[str, type[A2EMessage]] = {}
        for mapping in maps or (A2E_BASE_TYPE_MAP, SKILL_TYPE_MAP, ARTIFACT_TYPE_MAP):
            self.register(mapping)

    def register(self, mapping: MessageMap) -> None:
        """Add (or replace) type strings, as a plugin does at startup."""
        for type_, model in mapping.items():
            if not (isinstance(model, type) and issubclass(model, A2EMessage)):
                raise TypeError(f"A2E type {type_!r} maps to {model!r}; map it to an A2EMessage subclass")
            self._models[type_] = model

    def model_for(self, type_: str) -> type[A2EMessage] | None:
        return self._models.get(type_)

    def decode(self, obj: Mapping[str, Any]) -> A2EMessage:
        type_ = obj.get("type")
        model = self._models.get(type_) if isinstance(type_, str) else None
        if model is not None:
            try:
                return model.model_validate(obj)
            except ValidationError as exc:
                log.warning("A2E %s message does not fit its model (%s); kept as a generic message", type_, _brief(exc))
        return _generic(obj, type_ if isinstance(type_, str) else "")


def _generic(obj: Mapping[str, Any], type_: str) -> GenericMessage:
    req_id = obj.get("req_id")
    fields = {**obj, "type": type_, "req_id": None if req_id is None else str(req_id)}
    try:
        return GenericMessage.model_validate(fields)
    except ValidationError:  # bad base fields (an id that is a list...): keep what correlates
        return GenericMessage(type=type_, req_id=fields["req_id"])


def _brief(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "message"
    return f"{where}: {first['msg']}"
