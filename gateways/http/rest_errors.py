"""The errors of the HTTP+JSON binding: ``google.rpc.Status`` bodies and their HTTP statuses.

Shared by the binding (:mod:`gateways.http.rest`) and the edge refusals
(:func:`gateways.http.edge.edge_refusal`), which answer a REST route in its own error shape.
"""

from __future__ import annotations

from typing import Any, Final

from gateways.http.a2a_v1 import error_v1
from gateways.http.protection import EdgeError
from gateways.http.rpc import jaf_reason, standard_error
from mesh.a2a import RpcError

__all__ = ["is_rest_path", "rest_error", "status_of"]

#: JSON-RPC code -> (HTTP status, google.rpc code name), as a2a-sdk's A2A_ERROR_MAPPING, plus
#: the mesh's own; what the mesh failed at maps to 502/503/504, never 500.
_STATUS: Final[dict[int, tuple[int, str]]] = {
    -32700: (400, "INVALID_ARGUMENT"),
    -32600: (400, "INVALID_ARGUMENT"),
    -32601: (404, "NOT_FOUND"),
    -32602: (400, "INVALID_ARGUMENT"),
    -32603: (502, "INTERNAL"),
    -32001: (404, "NOT_FOUND"),
    -32002: (400, "FAILED_PRECONDITION"),
    -32003: (400, "FAILED_PRECONDITION"),
    -32004: (400, "FAILED_PRECONDITION"),
    -32005: (400, "INVALID_ARGUMENT"),
    -32006: (502, "INTERNAL"),
    -32007: (400, "FAILED_PRECONDITION"),
    -32008: (400, "FAILED_PRECONDITION"),
    -32009: (400, "FAILED_PRECONDITION"),
    -32010: (503, "UNAVAILABLE"),  # AgentGone
    -32030: (504, "DEADLINE_EXCEEDED"),  # Timeout
    -32050: (503, "UNAVAILABLE"),  # AgentBusy
    -32051: (429, "RESOURCE_EXHAUSTED"),  # ResourceExhausted
}
_BY_ERROR_TYPE: Final[dict[str, tuple[int, str]]] = {
    "Timeout": (504, "DEADLINE_EXCEEDED"),
    "AgentNotFound": (404, "NOT_FOUND"),
}


#: The google.rpc code of the HTTP status of an edge refusal.
_EDGE_STATUS: Final[dict[int, str]] = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    404: "NOT_FOUND",
    408: "DEADLINE_EXCEEDED",
    413: "INVALID_ARGUMENT",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    503: "UNAVAILABLE",
}


def rest_error(error: RpcError) -> dict[str, Any]:
    """The ``google.rpc.Status`` body of an error (also the data of an SSE ``error`` event)."""
    obj = error.error
    message, data = standard_error(obj.code, obj.message, obj.data)
    details = error_v1(obj.code, message, data, reason=jaf_reason(error)).get("data", [])
    http_status, status = status_of(error)
    return {"error": {"code": http_status, "status": status, "message": message, "details": details}}


def status_of(error: RpcError) -> tuple[int, str]:
    """The HTTP status and google.rpc code name of an error (an edge refusal keeps its status)."""
    if isinstance(error, EdgeError):
        return error.http_status, _EDGE_STATUS.get(error.http_status, "UNKNOWN")
    data = error.data
    error_type = data.get("errorType") if isinstance(data, dict) else None
    if isinstance(error_type, str) and error_type in _BY_ERROR_TYPE:
        return _BY_ERROR_TYPE[error_type]
    return _STATUS.get(error.code, (502, "INTERNAL") if -32099 <= error.code <= -32000 else (400, "UNKNOWN"))


def is_rest_path(path: str) -> bool:
    """Whether ``path`` is a route of the HTTP+JSON binding (``/a2a/rest/...``, ``.../{name}/rest/...``)."""
    return path.startswith("/a2a/rest/") or (path.startswith("/a2a/agents/") and "/rest/" in path)
