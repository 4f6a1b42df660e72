"""Parsing payloads off the wire: requests (agents), responses and results (clients).

:func:`parse_request` runs once per request on the hot path: one JSON decode, one dict lookup
of the method, one ``model_validate`` of the params. Every failure raises the
:class:`~mesh.a2a.exceptions.RpcError` subclass of the JSON-RPC code to answer with, carrying
the request id whenever it could be read, so the caller replies with ``exc.to_response()``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeVar, overload

from pydantic import TypeAdapter, ValidationError

from mesh.errors import short_repr

from .exceptions import (
    InvalidAgentResponse,
    InvalidJSON,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    RpcError,
)
from .jsonrpc import JSONRPCErrorResponse, JSONRPCResponse, JSONRPCSuccessResponse, RequestId
from .messages import Message
from .methods import METHOD_ALIASES, Method, RequestParams
from .tasks import Result, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent
from .validation import format_validation_error, validation_error_details

R = TypeVar("R", Task, Message, TaskStatusUpdateEvent, TaskArtifactUpdateEvent)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


# Strict JSON: NaN / Infinity are Python extensions other peers cannot read.
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)

# Canonical names and aliases alike, resolved with one lookup.
_DISPATCH: dict[str, Method] = {**{m.value: m for m in Method}, **METHOD_ALIASES}
_SUPPORTED = ", ".join([*Method, *(f"{a} (= {m})" for a, m in METHOD_ALIASES.items())])


def _json_type(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    return names.get(type(value), "number")


#: How deep objects and arrays may nest in a request's params (and a user config), by default.
DEFAULT_MAX_DEPTH = 32


def _has_lone_surrogate(text: str) -> bool:
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def find_unserializable(value: Any, path: str, max_depth: int, *, surrogates: bool = True) -> tuple[str, str] | None:
    """The first ``(path, reason)`` in decoded JSON that nests deeper than ``max_depth``.

    ``value`` itself is at depth 1 if it is an object or array. With ``surrogates`` a string
    (or key) holding a lone surrogate (``"\\ud800"``: JSON, but not UTF-8, so no answer
    could carry it back) is reported too. Iterative: hostile input cannot exhaust the stack.
    """
    stack: list[tuple[Any, str, int]] = [(value, path, 1)]
    while stack:
        item, where, depth = stack.pop()
        if type(item) is dict:
            if depth > max_depth:
                return where, f"nested deeper than {max_depth} levels (limits.max_nesting_depth)"
            for key, member in item.items():
                if surrogates and _has_lone_surrogate(key):
                    return f"{where}.{short_repr(key)}", "the key holds a lone surrogate; text must be valid UTF-8"
                stack.append((member, f"{where}.{key}", depth + 1))
        elif type(item) is list:
            if depth > max_depth:
                return where, f"nested deeper than {max_depth} levels (limits.max_nesting_depth)"
            stack.extend((member, f"{where}.{index}", depth + 1) for index, member in enumerate(item))
        elif surrogates and type(item) is str and _has_lone_surrogate(item):
            return where, "holds a lone surrogate (such as \\ud800); text must be valid UTF-8"
    return None


def decode_json(payload: bytes | bytearray | memoryview | str) -> Any:
    """Decode one strict UTF-8 JSON document; raises ``ValueError`` (incl. Unicode errors)."""
    text = payload if isinstance(payload, str) else str(payload, "utf-8")
    try:
        return _DECODER.decode(text)
    except RecursionError as exc:  # absurdly deep nesting
        raise ValueError("JSON nested too deeply") from exc


@dataclass(frozen=True, slots=True)
class ParsedRequest:
    """A valid request: canonical method, JSON-RPC id and the params as their typed model."""

    method: Method
    id: RequestId
    params: RequestParams
    #: The method name as received (a SAM alias such as ``agent/sendMessage``, or canonical).
    requested_method: str


def parse_request(
    payload: bytes | bytearray | memoryview | str, *, max_depth: int = DEFAULT_MAX_DEPTH
) -> ParsedRequest:
    """Parse and validate one JSON-RPC request payload.

    Params nested deeper than ``max_depth`` and text that is not valid UTF-8 (a lone
    surrogate written as a JSON escape) are refused before the params are validated: no
    work starts on a request whose answer could not be written.

    Raises :class:`InvalidJSON` (-32700), :class:`InvalidRequest` (-32600),
    :class:`MethodNotFound` (-32601) or :class:`InvalidParams` (-32602, with the path and reason
    of every bad field in its message and in ``data["errors"]``).
    """
    try:
        text = payload if isinstance(payload, str) else str(payload, "utf-8")
        doc = decode_json(text)
    except ValueError as exc:
        raise InvalidJSON(f"Invalid JSON payload: {exc}") from None
    if type(doc) is not dict:
        raise InvalidRequest(f"a request must be a JSON object, got {_json_type(doc)}")
    # Cheap guards on the raw text decide whether the decoded tree needs a walk: a lone
    # surrogate can only come from a \\u escape, and deep nesting needs many brackets.
    surrogates = "\\ud" in text or "\\uD" in text
    deep = text.count("{") + text.count("[") > max_depth

    request_id, name = _id_and_name(doc, surrogates)
    method = _DISPATCH.get(name)
    if method is None:
        raise MethodNotFound(
            f"method {short_repr(name)} is not supported; supported methods: {_SUPPORTED}",
            data={"method": name[:200], "supported": [*Method, *METHOD_ALIASES]},
            request_id=request_id,
        )
    params = doc.get("params")
    if type(params) is not dict:
        raise _not_named_params(doc, method, request_id)
    if surrogates or deep:
        found = find_unserializable(params, "params", max_depth, surrogates=surrogates)
        if found is not None:
            where, reason = found
            raise InvalidParams(
                f"invalid params for {method}: {where}: {reason}",
                data={"method": str(method), "errors": [{"path": where, "reason": reason, "type": "value"}]},
                request_id=request_id,
            )
    try:
        model = method.params.model_validate(params)
    except ValidationError as exc:
        raise InvalidParams(
            f"invalid params for {method}: {format_validation_error(exc, prefix='params')}",
            data={"method": str(method), "errors": validation_error_details(exc, prefix="params")},
            request_id=request_id,
        ) from None
    return ParsedRequest(method, request_id, model, name)


def _id_and_name(doc: dict[str, Any], surrogates: bool) -> tuple[str | int | None, str]:
    """The request's id and method name, each checked (JSON-RPC 2.0's envelope)."""
    request_id = doc.get("id")
    if request_id is not None and type(request_id) not in (str, int):
        raise InvalidRequest(
            f"id must be a string, an integer or null, got {_json_type(request_id)} {short_repr(request_id)}"
        )
    if surrogates and type(request_id) is str and _has_lone_surrogate(request_id):
        raise InvalidRequest("id holds a lone surrogate (such as \\ud800); text must be valid UTF-8")
    if doc.get("jsonrpc") != "2.0":
        got = short_repr(doc["jsonrpc"]) if "jsonrpc" in doc else "nothing"
        raise InvalidRequest(f'jsonrpc must be "2.0", got {got}', request_id=request_id)
    name = doc.get("method")
    if type(name) is not str:
        raise InvalidRequest(
            f"method must be a string, got {_json_type(name) if 'method' in doc else 'nothing'}",
            request_id=request_id,
        )
    if surrogates and _has_lone_surrogate(name):
        raise InvalidRequest(
            "method holds a lone surrogate (such as \\ud800); text must be valid UTF-8", request_id=request_id
        )
    return request_id, name


def _not_named_params(doc: dict[str, Any], method: Method, request_id: str | int | None) -> RpcError:
    """The error for params that are not an object of named params."""
    params = doc.get("params")
    if params is not None and type(params) is not list:
        # JSON-RPC 2.0: params, if present, MUST be a structured value.
        return InvalidRequest(f"params must be an object, got {_json_type(params)}", request_id=request_id)
    # Missing, null or by-position: every A2A method takes named params.
    reason = f"must be an object of named params, got {_json_type(params)}"
    if "params" not in doc:
        reason = "required: an object of named params"
    error = {"path": "params", "reason": reason, "type": "params"}
    return InvalidParams(
        f"invalid params for {method}: params: {reason}",
        data={"method": str(method), "errors": [error]},
        request_id=request_id,
    )


def parse_response(payload: bytes | bytearray | memoryview | str) -> JSONRPCResponse:
    """Parse a JSON-RPC response payload; a malformed one raises :class:`InvalidAgentResponse`.

    The ``result`` of a success response is left as decoded JSON: read it with
    :func:`parse_result` (tasks, messages, events) or the model the method returns.
    """
    try:
        doc = decode_json(payload)
    except ValueError as exc:
        raise InvalidAgentResponse(f"the response is not valid JSON: {exc}") from None
    if type(doc) is not dict:
        raise InvalidAgentResponse(f"a response must be a JSON object, got {_json_type(doc)}")
    rid = doc.get("id")
    request_id = rid if type(rid) in (str, int) else None
    has_result, has_error = "result" in doc, "error" in doc
    if has_result == has_error:
        raise InvalidAgentResponse("a response must have exactly one of result or error", request_id=request_id)
    model = JSONRPCErrorResponse if has_error else JSONRPCSuccessResponse
    try:
        return model.model_validate(doc)
    except ValidationError as exc:
        raise InvalidAgentResponse(
            f"invalid response: {format_validation_error(exc)}",
            data={"errors": validation_error_details(exc)},
            request_id=request_id,
        ) from None


_RESULT_ADAPTER: TypeAdapter[Any] = TypeAdapter(Result)


def result_of(payload: bytes | bytearray | memoryview | str) -> Any:
    """The ``result`` of a JSON-RPC response; an error response raises its :class:`RpcError`."""
    response = parse_response(payload)
    if isinstance(response, JSONRPCErrorResponse):
        raise RpcError.from_response(response)
    return response.result


@overload
def parse_result(result: Any) -> Result: ...
@overload
def parse_result(result: Any, expected: type[R]) -> R: ...
def parse_result(result: Any, expected: type[Any] | None = None) -> Any:
    """Read a ``result`` (or stream event) as Task, Message, status- or artifact-update by ``kind``.

    With ``expected`` (e.g. ``Task``) anything else is an error too. Raises
    :class:`InvalidAgentResponse` naming the bad field (``result.status.state: ...``).
    """
    try:
        value = _RESULT_ADAPTER.validate_python(result)
    except ValidationError as exc:
        raise InvalidAgentResponse(
            f"invalid result: {format_validation_error(exc, prefix='result')}",
            data={"errors": validation_error_details(exc, prefix="result")},
        ) from None
    if expected is not None and not isinstance(value, expected):
        wanted = expected.model_fields["kind"].default
        raise InvalidAgentResponse(
            f"result.kind: expected {wanted!r}, got {value.kind!r}",
            data={"errors": [{"path": "result.kind", "reason": f"expected {wanted!r}", "type": "kind"}]},
        )
    return value
