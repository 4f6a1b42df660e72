"""The other dialect: EMQX's "A2A over MQTT" profile v0.1, as a codec over the one A2A 1.0 translation.

Agents and clients of the mesh speak A2A 0.3 on the SAM topics. The profile (a profile of A2A
1.0; topics in :mod:`topics.profile`) differs in the envelope only, so it is served by
translating at the edge with the A2A 1.0 code the HTTP gateway uses (:mod:`mesh.profile.v1_requests`
for requests, :mod:`mesh.profile.v1` for results and streams, :mod:`mesh.profile.v1_card` for the card):

- requests are A2A 1.0 JSON-RPC (``SendMessage``, ``SendStreamingMessage``, ``GetTask``,
  ``CancelTask``...) with the MQTT v5 Response Topic and Correlation Data, the bearer token in
  ``a2a-authorization``; the requester generates ``Task.id`` (``message.taskId``) and the
  responder de-duplicates on it (:func:`request_from_profile` refuses a message without one);
- every answer echoes the Correlation Data; stream items are ``StreamResponse`` objects
  (:class:`ProfileAnswer`), a pool member adds ``a2a-responder-agent-id``;
- the card is A2A 1.0 with a ``supportedInterfaces`` entry of the profile's binding, retained
  on the discovery topic, with ``a2a-status`` (``online``/``offline``) and
  ``a2a-status-source`` (``agent``/``lwt``/``broker``); the will republishes it offline;
- the profile's own errors carry ``data.a2a_error``: -32003 ``request_expired``, -32004
  ``responder_unavailable`` (both retryable), -32005 ``transport_protocol_error``. The codes
  collide with A2A's own -32003 (push notifications not supported), -32004 (unsupported
  operation) and -32005 (content type not supported), so the name, never the code, says which
  is meant: only the profile's conditions are named (:func:`profile_error`).

Facts: ``shared/reference/emqx-a2a-over-mqtt.md``; the official SDK ``a2a-over-mqtt`` is the
tie-breaker (its Requester and Responder are what the conformance tests run against).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, field_validator

from mesh.a2a import (
    AgentCard,
    AgentExtension,
    InvalidRequest,
    Message,
    Method,
    MethodNotFound,
    RpcError,
    Task,
    decode_json,
)
from mesh.a2a.methods import TASK_ANSWER_METHODS
from mesh.a2a.validation import short_repr
from mesh.profile.v1 import JSON, StreamToV1, result_v1
from mesh.profile.v1_card import served_card
from mesh.profile.v1_requests import V1_METHODS, params_from_v1
from topics import validate_identifier, validate_namespace, validate_profile_id

__all__ = [
    "A2A_ERRORS",
    "AUTHORIZATION",
    "BOTH_DIALECTS_EXTENSION",
    "CONTEXT_ID",
    "PROFILE_BINDING",
    "PROFILE_BINDINGS",
    "REQUEST_EXPIRED",
    "RESPONDER_AGENT_ID",
    "RESPONDER_UNAVAILABLE",
    "STATUS",
    "STATUS_SOURCE",
    "TRANSPORT_PROTOCOL_ERROR",
    "DialectClaim",
    "EmqxProfile",
    "ProfileAnswer",
    "ProfileRequest",
    "bearer_token",
    "dialect_claim",
    "profile_card",
    "profile_error",
    "request_from_profile",
    "transport_protocol_error",
    "with_dialect_claim",
]

#: The ``protocolBinding`` of the profile's interface on mesh cards: a URI, as A2A 1.0 asks of a
#: custom binding. Cards written by the SDK say ``MQTTv5+JSONRPCv2``; readers accept both.
PROFILE_BINDING: Final = "urn:a2a:binding:mqtt5:jsonrpc2:emqx-a2a-over-mqtt:0.1"
PROFILE_BINDINGS: Final = frozenset({PROFILE_BINDING, "MQTTv5+JSONRPCv2"})

# User properties of the profile.
STATUS: Final = "a2a-status"
STATUS_SOURCE: Final = "a2a-status-source"
AUTHORIZATION: Final = "a2a-authorization"
CONTEXT_ID: Final = "a2a-context-id"
RESPONDER_AGENT_ID: Final = "a2a-responder-agent-id"

# The profile's error codes (their ``data.a2a_error`` names in A2A_ERRORS).
REQUEST_EXPIRED: Final = -32003
RESPONDER_UNAVAILABLE: Final = -32004
TRANSPORT_PROTOCOL_ERROR: Final = -32005
A2A_ERRORS: Mapping[int, str] = {
    REQUEST_EXPIRED: "request_expired",
    RESPONDER_UNAVAILABLE: "responder_unavailable",
    TRANSPORT_PROTOCOL_ERROR: "transport_protocol_error",
}
#: The card extension by which one agent serving both dialects names both its addresses.
BOTH_DIALECTS_EXTENSION: Final = "urn:mesh:extension:both-dialects:v1"
_TASK_RESULTS: Final = frozenset(m.v1_name for m in TASK_ANSWER_METHODS)
# The mesh's own codes a profile requester should retry: busy (-32050) and agent gone (-32010).
_BUSY: Final = -32050
_UNAVAILABLE_CODES: Final = frozenset({_BUSY, -32010})


class EmqxProfile(BaseModel):
    """``emqx:`` in a mesh config (top level or per agent): serve and reach the profile's agents.

    Off when absent. ``agent_id`` defaults to the agent's name; ``pool`` makes replicas
    (``shared_subscription``) members of ``$a2a/v1/request/{org}/{unit}/pool/{pool}``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    org: str = Field(description="the profile's org level: $a2a/v1/.../{org}/{unit}/{agent}")
    unit: str = Field(description="the profile's unit level")
    agent_id: str | None = Field(None, description="the agent's id in the profile (default: its mesh name)")
    pool: str | None = Field(None, description="replicas also serve this pool (default: the agent id)")

    @field_validator("org", "unit", "agent_id", "pool")
    @classmethod
    def _profile_id(cls, value: str | None) -> str | None:
        return None if value is None else validate_profile_id(value)


def transport_protocol_error(message: str, request_id: str | int | None = None) -> RpcError:
    """-32005 ``transport_protocol_error``: the request breaks the profile's transport rules (not retryable).

    The error carries its ``data.a2a_error`` name from here on: it is the profile's condition,
    which A2A's own -32005 (content type not supported) is not."""
    return RpcError(
        message,
        code=TRANSPORT_PROTOCOL_ERROR,
        data={"a2a_error": A2A_ERRORS[TRANSPORT_PROTOCOL_ERROR]},
        request_id=request_id,
    )


def profile_error(code: int, message: str, data: Any = None) -> JSON:
    """A JSON-RPC error object as the profile writes it: ``data.a2a_error`` for its own conditions only.

    The profile's codes collide with A2A's: -32003 is also "push notifications not supported",
    -32004 "unsupported operation", -32005 "content type not supported", all permanent. A code
    alone names no profile condition; ``data.a2a_error`` does, and it is written only for:

    - the mesh's busy and agent gone: -32004 ``responder_unavailable``, which profile
      requesters retry, except a busy whose request waited past its Message Expiry (``data``
      ``"expired": true``, :mod:`agents.admission`): that is the profile's "request expired
      before processing", -32003 ``request_expired``;
    - an error the profile's own layer made with its name (:func:`transport_protocol_error`).

    Every other error keeps its A2A meaning and its data (as ``data.details`` when it is not an
    object), with no ``a2a_error``: a retryable name found in an error's data is dropped, so no
    permanent error reaches a requester under a retryable name.
    """
    extra: JSON = dict(data) if isinstance(data, Mapping) else ({} if data is None else {"details": data})
    # Only the profile layer names a -32005 (transport_protocol_error, not retryable); a retryable
    # name is never taken from an error's data, only from the mesh's own conditions below.
    claimed = extra.pop("a2a_error", None)
    a2a_error = claimed if code == TRANSPORT_PROTOCOL_ERROR and claimed == A2A_ERRORS[code] else None
    if code == _BUSY and extra.get("expired") is True:
        code, a2a_error = REQUEST_EXPIRED, A2A_ERRORS[REQUEST_EXPIRED]
        message = f"the request expired before processing (its MQTT Message Expiry passed): {message}"
    elif code in _UNAVAILABLE_CODES:
        code, a2a_error = RESPONDER_UNAVAILABLE, A2A_ERRORS[RESPONDER_UNAVAILABLE]
    error: JSON = {"code": code, "message": message}
    if a2a_error is not None:
        extra["a2a_error"] = a2a_error
    if extra:
        error["data"] = extra
    return error


class DialectClaim(BaseModel):
    """What an agent serving both dialects says on its cards: its mesh name in its namespace and
    its address in the profile (``org/unit/agent``, a pool member ``org/unit/pool/{pool}``).

    A claim proves nothing alone (anyone may write one); the registry merges the two entries of
    an agent only when the card on its SAM topic and the card on its profile topic make the same
    claim, topics which only the agent's own broker users may publish under the broker rules
    (:mod:`mesh.discovery.registry`)."""

    model_config = ConfigDict(frozen=True)

    namespace: str
    name: str
    address: str

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return validate_namespace(value)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return validate_identifier(value, "agent name")

    @field_validator("address")
    @classmethod
    def _address(cls, value: str) -> str:
        levels = value.split("/")
        if len(levels) == 4 and levels[2] == "pool":
            levels = [levels[0], levels[1], levels[3]]
        if len(levels) != 3:
            raise ValueError(f"profile address {value!r}: name it org/unit/agent or org/unit/pool/<pool>")
        for level in levels:
            validate_profile_id(level)
        return value

    @property
    def pool(self) -> bool:
        """Whether the address is a pool's (the agent runs as replicas, each a member)."""
        return self.address.split("/")[2:3] == ["pool"]


def with_dialect_claim(card: AgentCard, claim: DialectClaim) -> AgentCard:
    """``card`` with the :data:`BOTH_DIALECTS_EXTENSION` naming both addresses (the profile's card,
    made from it, carries the same)."""
    extension = AgentExtension(
        uri=BOTH_DIALECTS_EXTENSION,
        description="this agent serves both the mesh's topics and the EMQX A2A over MQTT profile",
        params={"namespace": claim.namespace, "name": claim.name, "profileAddress": claim.address},
    )
    extensions = [e for e in card.capabilities.extensions or [] if e.uri != BOTH_DIALECTS_EXTENSION]
    capabilities = card.capabilities.model_copy(update={"extensions": [*extensions, extension]})
    return card.model_copy(update={"capabilities": capabilities})


def dialect_claim(extensions: Any) -> DialectClaim | None:
    """The claim in a card's ``capabilities.extensions`` (models or JSON), or ``None`` (none, or malformed)."""
    if not isinstance(extensions, list):
        return None
    for extension in extensions:
        uri = extension.get("uri") if isinstance(extension, Mapping) else getattr(extension, "uri", None)
        if uri != BOTH_DIALECTS_EXTENSION:
            continue
        params = extension.get("params") if isinstance(extension, Mapping) else getattr(extension, "params", None)
        if not isinstance(params, Mapping):
            return None
        try:
            return DialectClaim.model_validate(
                {
                    "namespace": params.get("namespace"),
                    "name": params.get("name"),
                    "address": params.get("profileAddress"),
                }
            )
        except (ValueError, TypeError):  # (a ValidationError is a ValueError)
            return None
    return None


def bearer_token(value: str | None) -> str | None:
    """The token of an ``a2a-authorization: Bearer <token>`` property (``None`` if absent or not Bearer)."""
    if value is None:
        return None
    scheme, _, token = value.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class ProfileRequest(BaseModel):
    """A profile request translated for the mesh: the 0.3 method, request id and params."""

    model_config = ConfigDict(frozen=True)

    method: Method
    request_id: str | int
    params: dict[str, Any]
    #: The task id the requester generated (message methods) or names (task methods).
    task_id: str | None = None

    def payload(self) -> bytes:
        """The 0.3 JSON-RPC request the mesh's dispatcher reads."""
        return json.dumps(
            {"jsonrpc": "2.0", "id": self.request_id, "method": str(self.method), "params": self.params},
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()


def request_from_profile(payload: bytes, *, context_id: str | None = None) -> ProfileRequest:
    """Read a profile request (A2A 1.0 JSON-RPC) as the mesh's 0.3 request.

    ``context_id`` is the ``a2a-context-id`` property, used when the message has none. Raises
    :class:`~mesh.a2a.RpcError` (with the request id when it was readable): -32700 for bad JSON,
    -32600 for no JSON-RPC request, -32601 for a method the mesh does not serve over the
    profile, -32602 for bad params, -32005 for a message without a valid ``taskId``.
    """
    try:
        doc = decode_json(payload)
    except ValueError as exc:
        raise RpcError(f"Invalid JSON payload: {exc}", code=-32700) from None
    if type(doc) is not dict:
        raise InvalidRequest("a request must be a JSON object")
    request_id = doc.get("id")
    if not isinstance(request_id, str | int) or isinstance(request_id, bool):
        raise InvalidRequest(f"id must be a string or an integer, got {short_repr(request_id)}")
    method = doc.get("method")
    if doc.get("jsonrpc") != "2.0" or type(method) is not str:
        raise InvalidRequest('a JSON-RPC 2.0 request needs "jsonrpc": "2.0" and a method name', request_id=request_id)
    if V1_METHODS.get(method) is None:
        served = ", ".join(name for name, target in V1_METHODS.items() if target is not None)
        raise MethodNotFound(
            f"method {short_repr(method)} is not served over the A2A over MQTT profile; use one of {served}",
            data={"method": method[:200]},
            request_id=request_id,
        )
    try:
        target, params = params_from_v1(method, doc.get("params"))
    except RpcError as exc:
        exc.request_id = request_id
        raise
    task_id: str | None = None
    if target in (Method.message_send, Method.message_stream):
        message = params["message"]
        task_id = message.get("taskId")
        if not task_id:
            raise transport_protocol_error(
                "Missing required Task.id (message.taskId): the requester generates it (a UUID) and sends it "
                "with every message of the task",
                request_id,
            )
        try:
            validate_identifier(task_id, "task id")
        except ValueError as exc:
            raise transport_protocol_error(f"malformed Task.id: {exc}", request_id) from None
        if context_id and "contextId" not in message:
            message["contextId"] = context_id
    elif "id" in params:
        task_id = params["id"]
    return ProfileRequest(method=target, request_id=request_id, params=params, task_id=task_id)


class ProfileAnswer:
    """Turns the mesh's 0.3 answers to one profile request into the profile's 1.0 answers.

    Feed :meth:`encode` every JSON-RPC response the agent publishes for the request, in order
    (stream events, then the final answer). A streaming method's items go through
    :class:`~mesh.profile.v1.StreamToV1`, which opens with the Task and closes after a terminal
    or interrupted state (later items, such as the closing Task, are dropped); a unary
    method's result becomes its 1.0 result, except that ``GetTask`` and ``CancelTask`` answer
    ``{"task": ...}`` (a ``StreamResponse``), which is what the profile's SDK reads and writes.
    Errors take the profile's shape (:func:`profile_error`).
    """

    __slots__ = ("method", "stream")

    def __init__(self, method: Method | None) -> None:
        self.method = method
        self.stream = StreamToV1() if method is not None and method.streaming else None

    def encode(self, response: bytes) -> list[bytes]:
        """The profile payloads for one 0.3 response (none once a stream has closed)."""
        try:
            doc = decode_json(response)
        except ValueError:
            return []
        request_id = doc.get("id")
        if "error" in doc:
            if self.stream is not None:
                self.stream.closed = True
            err = doc["error"] if isinstance(doc["error"], dict) else {}
            error = profile_error(int(err.get("code", -32603)), str(err.get("message", "")), err.get("data"))
            return [_dump({"jsonrpc": "2.0", "id": request_id, "error": error})]
        return self._results(request_id, doc.get("result"))

    def encode_result(self, request_id: str | int | None, result: Task | Message) -> list[bytes]:
        """As :meth:`encode` for a success response whose result the agent still holds as a model:
        translated at once, without writing the 0.3 JSON and reading it back (the answer of
        every ``SendMessage``). Raises ``ValueError`` for text no JSON can carry."""
        if self.method is None:
            raise ValueError("the request was not read: no method to answer")
        return self._results(request_id, result)

    def _results(self, request_id: Any, result: Any) -> list[bytes]:
        try:
            if self.stream is not None:
                items = self.stream.feed(result)
            elif self.method is not None and self.method.v1_name in _TASK_RESULTS:
                # As the SDK reads (and writes) them: a StreamResponse holding the Task.
                items = [{"task": result_v1(self.method.v1_name, result)}]
            elif self.method is not None:
                items = [result_v1(self.method.v1_name, result)]
            else:
                items = [result]
        except RpcError as exc:
            error = profile_error(exc.error.code, exc.error.message, exc.error.data)
            return [_dump({"jsonrpc": "2.0", "id": request_id, "error": error})]
        return [_dump({"jsonrpc": "2.0", "id": request_id, "result": item}) for item in items]


def _dump(doc: JSON) -> bytes:
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()


def profile_card(card: AgentCard | Mapping[str, Any], url: str) -> bytes:
    """The A2A 1.0 card a mesh agent publishes on its profile discovery topic.

    ``url`` is the broker the agent is reached through (``mqtt://host:port``); the interface
    names the profile's binding (:data:`PROFILE_BINDING`). Same card as the HTTP gateway serves,
    one function for both (:func:`mesh.profile.v1_card.served_card`).
    """
    served = served_card(card, url_v1=url, url_v0_3=None, binding_v1=PROFILE_BINDING, version_v1="1.0.0")
    return _dump(served)
