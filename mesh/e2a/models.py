"""E2A data model: the request :class:`E2AEnvelope`, the response :class:`E2AResponse` and
their nested types, as plain dataclasses with ``to_dict`` / ``from_dict``.

Field names, order and defaults follow jiuwenswarm ``common/e2a/models.py``; JSON keys are
snake_case. The ``_meta`` slots of :class:`E2AFileRef` and :class:`E2AAuth` are the Python
attribute ``meta`` serialized under the key ``_meta`` (a leading underscore reads as "private"
in Python and a field named ``_meta`` would need ``obj._meta`` everywhere).

``from_dict`` is the trust boundary: it accepts the legacy shapes listed in the spec (``channel_id``,
``req_method``, ``metadata``, ``payload``, ``binding``, epoch ``timestamp``...) and raises
:class:`~mesh.e2a.errors.E2AValidationError` naming the field for anything of the wrong type.
Unknown keys are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass, replace
from enum import Enum, StrEnum
from typing import Any

from mesh.e2a import _compat
from mesh.e2a.constants import (
    E2A_PROTOCOL_VERSION,
    E2A_RESPONSE_STATUS_IN_PROGRESS,
    E2A_SOURCE_PROTOCOL_E2A,
)
from mesh.e2a.errors import E2AValidationError
from mesh.e2a.reader import FieldReader
from mesh.timestamps import utc_now_iso

# Dataclass field metadata key holding the JSON key when it differs from the attribute name.
_WIRE_KEY = "wire_key"


class IdentityOrigin(StrEnum):
    """Who triggered the request to the agent."""

    SYSTEM = "system"
    USER = "user"
    AGENT = "agent"
    SERVICE = "service"


@dataclass
class E2AProvenance:
    """Where an envelope came from: native E2A, or converted from ACP / A2A, by whom and when."""

    source_protocol: str = E2A_SOURCE_PROTOCOL_E2A
    converter: str | None = None
    converted_at: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return _fields_json(self)

    @classmethod
    def from_dict(cls, data: Any) -> E2AProvenance:
        return cls._read(FieldReader(data, cls.__name__))

    @classmethod
    def _read(cls, r: FieldReader) -> E2AProvenance:
        return cls(
            source_protocol=r.text("source_protocol", E2A_SOURCE_PROTOCOL_E2A),
            converter=r.string("converter"),
            converted_at=r.string("converted_at"),
            details=r.obj("details"),
        )


@dataclass
class E2AFileRef:
    """One attachment in ``params.files`` / ``params.attachments``; ``uri`` is required."""

    uri: str
    name: str | None = None
    mime_type: str | None = None
    size: int | None = None
    meta: dict[str, Any] = field(default_factory=dict, metadata={_WIRE_KEY: "_meta"})

    def to_dict(self) -> dict[str, Any]:
        return _fields_json(self)

    @classmethod
    def from_dict(cls, data: Any) -> E2AFileRef:
        return cls._read(FieldReader(data, cls.__name__))

    @classmethod
    def _read(cls, r: FieldReader) -> E2AFileRef:
        return cls(
            uri=r.required_string("uri"),
            name=r.string("name"),
            mime_type=r.string("mime_type"),
            size=r.integer("size"),
            meta=r.obj("_meta"),
        )


@dataclass
class E2AAuth:
    """Credentials for the request; prefer ``credential_ref`` / ``api_key_ref`` over raw tokens."""

    method_id: str | None = None
    # Credentials never in a repr (a log line, a traceback); the refs name a secret, not hold it.
    bearer_token: str | None = field(default=None, repr=False)
    api_key_ref: str | None = None
    credential_ref: str | None = None
    extra_headers: dict[str, str] = field(default_factory=dict, repr=False)
    meta: dict[str, Any] = field(default_factory=dict, metadata={_WIRE_KEY: "_meta"})

    def to_dict(self) -> dict[str, Any]:
        return _fields_json(self)

    @classmethod
    def from_dict(cls, data: Any) -> E2AAuth:
        return cls._read(FieldReader(data, cls.__name__))

    @classmethod
    def _read(cls, r: FieldReader) -> E2AAuth:
        return cls(
            method_id=r.string("method_id"),
            bearer_token=r.string("bearer_token"),
            api_key_ref=r.string("api_key_ref"),
            credential_ref=r.string("credential_ref"),
            extra_headers=r.str_map("extra_headers"),
            meta=r.obj("_meta"),
        )


@dataclass
class E2AEnvelope:
    """A normalized inbound request (Gateway -> AgentServer).

    ``method`` is a Gateway RPC name (``chat.send``) or, after ACP ingress, the ACP method;
    ``params`` is the single business-parameter dict. See spec sections 2 and 4.
    """

    # core / correlation
    protocol_version: str = E2A_PROTOCOL_VERSION
    provenance: E2AProvenance = field(default_factory=E2AProvenance)
    request_id: str | None = None
    jsonrpc_id: str | int | None = None
    correlation_id: str | None = None
    task_id: str | None = None
    context_id: str | None = None
    session_id: str | None = None
    message_id: str | None = None
    # business time (RFC 3339 UTC), not provenance.converted_at
    timestamp: str | None = None
    # identity and ingress
    identity_origin: IdentityOrigin = IdentityOrigin.USER
    channel: str | None = None
    user_id: str | None = None
    agent_ref: dict[str, Any] | None = None
    chat_id: str | None = None
    source_agent_id: str | None = None
    agent_id: str | None = None
    service_id: str | None = None
    workspace_key: str | None = None
    # operation
    method: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    ext_method: str | None = None
    session_update_kind: str | None = None
    is_stream: bool = False
    expected_output_modes: list[str] = field(default_factory=list)
    auth: E2AAuth | None = None
    # extension slots
    channel_context: dict[str, Any] = field(default_factory=dict)
    a2a_metadata: dict[str, Any] = field(default_factory=dict)
    acp_meta: dict[str, Any] = field(default_factory=dict)

    def ensure_timestamp(self) -> None:
        """Set ``timestamp`` to now when it is unset."""
        if self.timestamp is None:
            self.timestamp = utc_now_iso()

    def file_refs(self) -> list[E2AFileRef]:
        """The attachments of ``params.files`` then ``params.attachments``, parsed."""
        return _file_refs(self.params, f"{type(self).__name__}.params")

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON (snake_case keys, enums as values), in field order."""
        return _fields_json(self)

    @classmethod
    def from_dict(cls, data: Any) -> E2AEnvelope:
        """Parse wire data, applying the legacy rules of spec section 9 (see ``_compat``).

        ``params.files`` / ``params.attachments`` are checked as file references but stay plain
        JSON in ``params``; :meth:`file_refs` returns them parsed.
        """
        r = FieldReader(data, cls.__name__)
        params = _compat.params_with_legacy_payload(r)
        _file_refs(params, r.at("params"))  # validate only; params stays plain JSON
        auth = r.child("auth")
        return cls(
            protocol_version=r.text("protocol_version", E2A_PROTOCOL_VERSION),
            provenance=_provenance(r, migrate_binding=True),
            request_id=r.string("request_id"),
            jsonrpc_id=r.identifier("jsonrpc_id"),
            correlation_id=r.string("correlation_id"),
            task_id=r.string("task_id"),
            context_id=r.string("context_id"),
            session_id=r.string("session_id"),
            message_id=r.string("message_id"),
            timestamp=_compat.timestamp(r),
            identity_origin=_identity_origin(r, IdentityOrigin.USER),
            channel=_compat.channel(r),
            user_id=r.string("user_id"),
            agent_ref=r.struct("agent_ref"),
            chat_id=r.string("chat_id"),
            source_agent_id=r.string("source_agent_id"),
            agent_id=_compat.agent_id(r),
            service_id=r.stripped("service_id"),
            workspace_key=_compat.workspace_key(r),
            method=_compat.method(r),
            params=params,
            ext_method=r.string("ext_method"),
            session_update_kind=r.string("session_update_kind"),
            is_stream=r.flag("is_stream"),
            expected_output_modes=r.strings("expected_output_modes"),
            auth=E2AAuth._read(auth) if auth is not None else None,
            channel_context=_compat.channel_context(r),
            a2a_metadata=r.obj("a2a_metadata"),
            acp_meta=r.obj("acp_meta"),
        )


@dataclass
class E2AResponse:
    """One outbound record (Agent -> Gateway -> client), including each streaming frame.

    ``response_kind`` discriminates ``body`` (spec 12.5); ``projections`` holds optional
    pre-built ACP / A2A wire JSON and is never the only source of truth.
    """

    protocol_version: str = E2A_PROTOCOL_VERSION
    response_id: str | None = None
    request_id: str | None = None
    sequence: int = 0
    is_final: bool = False
    status: str = E2A_RESPONSE_STATUS_IN_PROGRESS
    response_kind: str = ""
    timestamp: str | None = None
    provenance: E2AProvenance = field(default_factory=E2AProvenance)
    body: dict[str, Any] = field(default_factory=dict)

    jsonrpc_id: str | int | None = None
    correlation_id: str | None = None
    task_id: str | None = None
    context_id: str | None = None
    session_id: str | None = None
    message_id: str | None = None
    is_stream: bool = False
    identity_origin: IdentityOrigin = IdentityOrigin.AGENT
    channel: str | None = None
    user_id: str | None = None
    agent_ref: dict[str, Any] | None = None
    source_agent_id: str | None = None
    method: str | None = None

    projections: dict[str, Any] = field(default_factory=dict)
    channel_context: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    a2a_metadata: dict[str, Any] = field(default_factory=dict)
    acp_meta: dict[str, Any] = field(default_factory=dict)

    def ensure_timestamp(self) -> None:
        """Set ``timestamp`` to now when it is unset."""
        if self.timestamp is None:
            self.timestamp = utc_now_iso()

    def to_dict(self) -> dict[str, Any]:
        """Every field as plain JSON (snake_case keys, enums as values), in field order."""
        return _fields_json(self)

    @classmethod
    def from_dict(cls, data: Any) -> E2AResponse:
        """Parse wire data; ``channel_id`` and epoch timestamps are read, ``sequence`` coerced."""
        r = FieldReader(data, cls.__name__)
        return cls(
            protocol_version=r.text("protocol_version", E2A_PROTOCOL_VERSION),
            response_id=r.string("response_id"),
            request_id=r.string("request_id"),
            sequence=_compat.sequence(r.raw("sequence")),
            is_final=r.flag("is_final"),
            status=r.text("status", E2A_RESPONSE_STATUS_IN_PROGRESS),
            response_kind=r.text("response_kind", ""),
            timestamp=_compat.timestamp(r),
            provenance=_provenance(r),
            body=r.obj("body"),
            jsonrpc_id=r.identifier("jsonrpc_id"),
            correlation_id=r.string("correlation_id"),
            task_id=r.string("task_id"),
            context_id=r.string("context_id"),
            session_id=r.string("session_id"),
            message_id=r.string("message_id"),
            is_stream=r.flag("is_stream"),
            identity_origin=_identity_origin(r, IdentityOrigin.AGENT),
            channel=_compat.channel(r),
            user_id=r.string("user_id"),
            agent_ref=r.struct("agent_ref"),
            source_agent_id=r.string("source_agent_id"),
            method=r.string("method"),
            projections=r.obj("projections"),
            channel_context=r.obj("channel_context"),
            metadata=r.obj("metadata"),
            a2a_metadata=r.obj("a2a_metadata"),
            acp_meta=r.obj("acp_meta"),
        )


# --- serialization -------------------------------------------------------------------------


def _fields_json(value: Any) -> dict[str, Any]:
    """A dataclass's fields as JSON, keyed by their wire keys, in field order."""
    out: dict[str, Any] = {}
    for f in fields(value):
        key = f.metadata.get(_WIRE_KEY, f.name)
        item = getattr(value, f.name)
        # Underscore keys are optional extension slots: omitted when None, but an empty
        # ``_meta: {}`` is still emitted.
        if item is None and key.startswith("_"):
            continue
        out[key] = _to_json(item)
    return out


def _to_json(value: Any) -> Any:
    """Recursively turn dataclasses, enums, mappings and sequences into JSON-ready values."""
    if is_dataclass(value) and not isinstance(value, type):
        return _fields_json(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Mapping):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    return value


# --- from_dict helpers (the legacy rules live in _compat) ----------------------------------


def _provenance(r: FieldReader, *, migrate_binding: bool = False) -> E2AProvenance:
    child = r.child("provenance")
    provenance = E2AProvenance._read(child) if child is not None else E2AProvenance()
    if migrate_binding:
        source, details = _compat.legacy_binding(r, provenance.source_protocol, provenance.details)
        provenance = replace(provenance, source_protocol=source, details=details)
    return provenance


def _identity_origin(r: FieldReader, default: IdentityOrigin) -> IdentityOrigin:
    raw = r.raw("identity_origin")
    if raw is None:
        return default
    try:
        return IdentityOrigin(raw)
    except ValueError:
        allowed = ", ".join(repr(o.value) for o in IdentityOrigin)
        raise E2AValidationError(r.at("identity_origin"), f"one of {allowed}", raw) from None


def _file_refs(params: Mapping[str, Any], path: str) -> list[E2AFileRef]:
    refs: list[E2AFileRef] = []
    for key in ("files", "attachments"):
        items = params.get(key)
        if items is None:
            continue
        if not isinstance(items, (list, tuple)):
            raise E2AValidationError(f"{path}.{key}", "a list of file references", items)
        for i, item in enumerate(items):
            if isinstance(item, E2AFileRef):
                refs.append(item)
            else:
                refs.append(E2AFileRef._read(FieldReader(item, f"{path}.{key}[{i}]")))
    return refs
