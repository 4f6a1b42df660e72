"""JSON-RPC at the HTTP edge: a request of either A2A version in, E2A envelope out, and back.

::

    call = parse_call(body, headers.get("A2A-Version"))   # 0.3 as is, 1.0 translated to 0.3
    envelope = envelope_for(call, user_id=principal.name)
    frames = runtime.forward(envelope, agent)            # E2A frames from the mesh
    answer(call, final_frame)   or   async for chunk in sse(call, frames)

Nothing here knows about Starlette: :mod:`gateways.http.app` does the HTTP.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from pydantic import ValidationError

from gateways.http.a2a_v1 import (
    V1_METHODS,
    V1_STREAMING_METHODS,
    VERSION_NOT_SUPPORTED,
    StreamToV1,
    error_v1,
    negotiate_version,
    params_from_v1,
    result_v1,
)
from mesh.a2a import (
    METHOD_PARAMS,
    InvalidJSON,
    InvalidParams,
    InvalidRequest,
    JSONRPCErrorObject,
    Method,
    MethodNotFound,
    RpcError,
    parse_request,
)
from mesh.a2a.parse import decode_json
from mesh.a2a.validation import format_validation_error, validation_error_details
from mesh.e2a import (
    E2AEnvelope,
    E2AProvenance,
    E2AResponse,
    envelope_from_a2a_send_message,
)
from mesh.timestamps import utc_now_iso

Version = Literal["0.3", "1.0"]
_STREAMING_0_3 = {Method.message_stream, Method.tasks_resubscribe}
_SSE_NAMES = {
    "statusUpdate": "status-update",
    "artifactUpdate": "artifact-update",
    "task": "task",
    "message": "message",
}


@dataclass(slots=True)
class RpcCall:
    """One parsed request: its id, the method as sent and as the mesh knows it, 0.3 params."""

    version: Version
    request_id: str | int | None
    method: str  # as the client sent it (a 1.0 name or a 0.3 one)
    mesh_method: Method | None  # None: answered by the gateway itself (1.0 ListTasks...)
    params: dict[str, Any] = field(default_factory=dict)  # A2A 0.3 JSON, validated

    @property
    def streaming(self) -> bool:
        if self.version == "1.0":
            return self.method in V1_STREAMING_METHODS
        return self.mesh_method in _STREAMING_0_3

    @property
    def task_id(self) -> str | None:
        """The task the request is about, when it names one."""
        if self.mesh_method in (Method.message_send, Method.message_stream):
            found = (self.params.get("message") or {}).get("taskId")
        else:
            found = self.params.get("id") or self.params.get("taskId")
        return found if isinstance(found, str) else None

    @property
    def context_id(self) -> str | None:
        found = (self.params.get("message") or {}).get("contextId")
        return found if isinstance(found, str) else None


def parse_call(body: bytes, version_header: str | None) -> RpcCall:
    """Read one JSON-RPC request; raise the right RpcError (with the id when it could be read)."""
    try:
        doc = decode_json(body)
    except ValueError as exc:
        raise InvalidJSON(f"Invalid JSON payload: {exc}") from None
    method = doc.get("method") if isinstance(doc, dict) else None
    request_id = doc.get("id") if isinstance(doc, dict) and type(doc.get("id")) in (str, int) else None
    try:
        version = negotiate_version(method if isinstance(method, str) else "", version_header)
    except RpcError as exc:
        exc.request_id = request_id
        raise
    if version == "0.3":
        parsed = parse_request(body)
        if parsed.method is Method.tasks_list:
            # An agent's tasks/list shows every caller's tasks; the gateway lists a caller's own.
            raise MethodNotFound(
                "method 'tasks/list' is not served over HTTP: list your own tasks with A2A 1.0 ListTasks "
                "(send the header A2A-Version: 1.0)",
                data={"method": "tasks/list"},
                request_id=parsed.id,
            )
        return RpcCall("0.3", parsed.id, parsed.requested_method, parsed.method, parsed.params.to_wire_dict())
    if not isinstance(doc, dict) or doc.get("jsonrpc") != "2.0" or not isinstance(method, str):
        raise InvalidRequest(
            'a request is an object with "jsonrpc": "2.0" and a string "method"', request_id=request_id
        )
    return call_v1(method, doc.get("params"), request_id)


def call_v1(method: str, params: Any, request_id: str | int | None = None) -> RpcCall:
    """A 1.0 call (JSON-RPC, or a REST route's) with its params read into the mesh's 0.3."""
    try:
        if V1_METHODS.get(method, ...) is None:  # answered by the gateway (ListTasks...)
            return RpcCall("1.0", request_id, method, None, params or {})
        mesh_method, params_0_3 = params_from_v1(method, params)
        return RpcCall("1.0", request_id, method, mesh_method, _validated(mesh_method, params_0_3))
    except RpcError as exc:
        exc.request_id = request_id
        raise


def call_v1_of_version(method: str, params: Any, version: str | None, request_id: str | int | None = None) -> RpcCall:
    """A call of a binding that is A2A 1.0 only (REST, gRPC): no ``A2A-Version`` is 1.0; one the
    client names must be 1.x, as JSON-RPC checks it (99.0 or 0.3 is refused, -32009)."""
    if (version or "").strip():
        try:
            negotiate_version(method, version)
        except RpcError as exc:
            exc.request_id = request_id
            raise
    return call_v1(method, params, request_id)


def check_version_served(call: RpcCall, served: Collection[str]) -> None:
    """Refuse (-32009) a request in an A2A version the gateway is configured not to serve."""
    if call.version not in served:
        raise RpcError(
            f"this gateway serves A2A {' and '.join(sorted(served))}, not {call.version}"
            + (" (a request without an A2A-Version header is 0.3)" if call.version == "0.3" else ""),
            code=VERSION_NOT_SUPPORTED,
            data={"version": call.version, "supported": sorted(served)},
            request_id=call.request_id,
        )


def _validated(method: Method, params: dict[str, Any]) -> dict[str, Any]:
    """The 0.3 params as the mesh's models read them (what 0.3 requests get from parse_request)."""
    try:
        return METHOD_PARAMS[method].model_validate(params).to_wire_dict()
    except ValidationError as exc:
        raise InvalidParams(
            f"invalid params for {method}: {format_validation_error(exc, prefix='params')}",
            data={"method": str(method), "errors": validation_error_details(exc, prefix="params")},
        ) from None


def envelope_for(call: RpcCall, *, user_id: str | None, channel: str = "http") -> E2AEnvelope:
    """The E2A envelope of a request: every request the gateway takes in is one."""
    details = {"kind": "a2a_jsonrpc", "a2a_version": call.version, "jsonrpc_method": call.method}
    if call.mesh_method in (Method.message_send, Method.message_stream):
        message = call.params["message"]
        envelope = envelope_from_a2a_send_message(
            task_id=message.get("taskId"),
            context_id=message.get("contextId"),
            message_body=message,
            metadata=call.params.get("metadata"),
            configuration=call.params.get("configuration"),
            channel=channel,
            converter="gateways.http.rpc:envelope_for",
            extra_provenance_details=details,
        )
    else:
        envelope = E2AEnvelope(
            method=str(call.mesh_method),
            params=dict(call.params),
            channel=channel,
            provenance=E2AProvenance(
                source_protocol="a2a",
                converter="gateways.http.rpc:envelope_for",
                converted_at=utc_now_iso(),
                details=details,
            ),
        )
    envelope.request_id = uuid.uuid4().hex
    envelope.jsonrpc_id = call.request_id
    envelope.user_id = user_id
    envelope.is_stream = call.streaming
    envelope.ensure_timestamp()
    return envelope


# ---------------------------------------------------------------- answers


def result_of(frame: E2AResponse) -> Any:
    """The A2A 0.3 result of a final frame; an error frame raises its RpcError."""
    body = frame.body
    if frame.response_kind == "e2a.error":
        raise error_of(frame)
    if frame.response_kind == "e2a.complete":
        return body.get("result")
    return body


def error_of(frame: E2AResponse) -> RpcError:
    body = frame.body
    details = body.get("details")
    code = body.get("code")
    if not isinstance(code, int):
        code = -32603
    error = JSONRPCErrorObject(code=code, message=str(body.get("message", "")), data=details or None)
    return RpcError.from_error(error)


def answer(call: RpcCall, frame: E2AResponse) -> dict[str, Any]:
    """The JSON-RPC response to a unary request, in the caller's A2A version."""
    try:
        result = result_of(frame)
        if call.version == "1.0":
            result = result_v1(call.method, result)  # a malformed answer raises InvalidAgentResponse
    except RpcError as exc:
        return error_response(call.version, call.request_id, exc)
    return {"jsonrpc": "2.0", "id": call.request_id, "result": result}


#: a2a-sdk's messages for A2A's own error codes: clients and conformance kits match on them.
STANDARD_MESSAGES: dict[int, str] = {
    -32001: "Task not found",
    -32002: "Task cannot be canceled",
    -32003: "Push Notification is not supported",
    -32004: "This operation is not supported",
    -32005: "Incompatible content types",
    -32006: "Invalid agent response",
    -32007: "Authenticated Extended Card is not configured",
    -32008: "Extension support required",
    -32009: "Version not supported",
}


def standard_error(code: int, message: str, data: Any) -> tuple[str, Any]:
    """The message and data an HTTP client gets for an error: an A2A code's standard message,
    the mesh's own (which agent, which task) moved to ``data.detail``. JAF errors (``errorType``:
    their codes collide with A2A's) and JSON-RPC's codes keep their descriptive messages."""
    standard = STANDARD_MESSAGES.get(code)
    if standard is None or message == standard or (isinstance(data, dict) and "errorType" in data):
        return message, data
    if isinstance(data, dict):
        return standard, {"detail": message, **data}
    return standard, {"detail": message} if data is None else {"detail": message, "data": data}


def error_response(version: Version, request_id: str | int | None, error: RpcError) -> dict[str, Any]:
    obj = error.error
    message, data = standard_error(obj.code, obj.message, obj.data)
    if version == "1.0":
        error_object = error_v1(obj.code, message, data, reason=jaf_reason(error))
    else:
        error_object = {"code": obj.code, "message": message}
        if data is not None:
            error_object["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error_object}


#: Edge refusals that are A2A's own error of their code, not a JAF error colliding with it: they
#: keep A2A's reason (an unsupported media type is ContentTypeNotSupported).
A2A_EDGE_ERRORS: Final[Mapping[str, int]] = MappingProxyType({"UnsupportedMediaType": -32005})


def jaf_reason(error: RpcError) -> str | None:
    """The ErrorInfo reason of a JAF error (``data.errorType`` set, a server-error code): its codes
    -32000..-32007 are A2A's for other errors (-32003 RateLimited is PushNotificationNotSupported),
    so A2A's reason for the code would misname it. ``"RateLimited"`` -> ``"RATE_LIMITED"``."""
    data = error.data
    error_type = data.get("errorType") if isinstance(data, dict) else None
    if not isinstance(error_type, str) or not error_type or not -32099 <= error.code <= -32000:
        return None
    if A2A_EDGE_ERRORS.get(error_type) == error.code:
        return None
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", error_type).upper()


async def sse(
    call: RpcCall,
    frames: AsyncIterator[E2AResponse],
    *,
    rest_error: Callable[[RpcError], dict[str, Any]] | None = None,
) -> AsyncIterator[bytes]:
    """The SSE events of a streaming request: ``event: <kind>`` then the JSON-RPC response (with
    ``rest_error``, the HTTP+JSON binding: the bare ``StreamResponse``, errors as that body).

    Nothing goes out after the stream's last event (0.3: the ``final: true`` update; 1.0: see
    :class:`StreamToV1`), but the frames are read to the final one, which the mesh sends at
    once: the response log then holds every request's final frame.
    """
    v1 = StreamToV1(until_terminal=call.method == "SubscribeToTask") if call.version == "1.0" else None
    started = ended = False

    def event(name: str, result: Any) -> bytes:
        if rest_error is not None:
            return _sse_event(name, result)
        return _sse_event(name, {"jsonrpc": "2.0", "id": call.request_id, "result": result})

    def error(exc: RpcError) -> bytes:
        return sse_error(call, exc, rest_error=rest_error)

    try:
        async for frame in frames:
            if ended:
                continue
            if frame.response_kind == "e2a.error":
                yield error(error_of(frame))
                return
            item = frame.body["payload"] if frame.response_kind == "a2a.stream_event" else result_of(frame)
            if v1 is None:
                kind, first, started = _kind_0_3(item), not started, True
                if first and kind in ("status-update", "artifact-update"):
                    # As a2a-sdk's servers do, a task stream opens with the Task (its id, its
                    # state); the agent's first status-update is that snapshot's status.
                    yield event("task", _snapshot_0_3(item))
                if not (first and kind == "status-update"):
                    yield event(kind, item)
                ended = kind == "message" or (kind == "status-update" and item.get("final") is True)
                continue
            try:
                responses = v1.feed(item)
            except RpcError as exc:  # a malformed answer (InvalidAgentResponse) ends the stream
                yield error(exc)
                return
            for response in responses:
                yield event(_SSE_NAMES.get(next(iter(response)), "message"), response)
            ended = v1.closed
    finally:
        # A client that left, or an error: release the mesh call now.
        await frames.aclose()  # type: ignore[attr-defined]


def sse_error(
    call: RpcCall, error: RpcError, *, rest_error: Callable[[RpcError], dict[str, Any]] | None = None
) -> bytes:
    """The ``error`` event of a stream: the JSON-RPC error response (``rest_error``: its body)."""
    body = rest_error(error) if rest_error is not None else error_response(call.version, call.request_id, error)
    return _sse_event("error", body)


def _snapshot_0_3(event: dict[str, Any]) -> dict[str, Any]:
    """The Task a stream opens with, made from its first status or artifact update."""
    status = event.get("status") if event.get("kind") == "status-update" else {"state": "working"}
    return {"id": event.get("taskId"), "contextId": event.get("contextId"), "status": status, "kind": "task"}


def _kind_0_3(item: Any) -> str:
    return str(item.get("kind", "message")) if isinstance(item, dict) else "message"


def _sse_event(name: str, data: dict[str, Any]) -> bytes:
    return b"event: %s\ndata: %s\n\n" % (name.encode(), json.dumps(data, separators=(",", ":")).encode())
