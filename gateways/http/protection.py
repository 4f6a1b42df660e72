"""Edge protections of the HTTP A2A gateway: their errors and their configuration.

The JAF A2A spec asks an HTTP server for authentication, rate limiting, concurrency and size
limits and request timeouts. This module holds what they share: the JSON-RPC errors they
raise, and (re-exported from :mod:`gateways.http.edgeconfig`) the pydantic models of the edge
configuration (:class:`EdgeConfig`, which ``HttpGatewaySettings`` extends). The behaviour is
framework-free and lives next door: :mod:`gateways.http.auth` (``Authenticator``) and :mod:`gateways.http.limits`
(``RateLimiter``, ``ConcurrencyLimits``, ``check_body_size``, ``request_timeout``);
:mod:`gateways.http.edge` puts them in the Starlette app as middleware.

Errors. JAF's codes -32003..-32004 are the same numbers A2A uses for other errors
(-32003 is also "push notifications not supported"), so every error raised here carries
``data.errorType`` to tell them apart, plus the HTTP status and headers to answer with::

    RpcError (mesh.a2a.exceptions)
    └── EdgeError                 refused at the edge, before the mesh sees the request
        code    errorType               HTTP  raised by
        -32000  AgentNotFound            404  agent_not_found()
        -32003  RateLimited              429  rate_limited()        (+ Retry-After)
        -32004  AuthenticationRequired   401  auth_required()       (+ WWW-Authenticate)
        -32051  ResourceExhausted   429/503  resource_exhausted()  (429: the caller's own quota
                                                                     is full; 503: the gateway's)
        -32600  PayloadTooLarge          413  payload_too_large()
        -32600  InvalidHeader            400  invalid_header()
        -32005  UnsupportedMediaType     415  unsupported_media_type()  (A2A's ContentTypeNotSupported)
        -32600  RequestTimeout           408  body_too_slow()

Errors the mesh answers (an agent's InvalidParams, TaskNotFound...) are ordinary JSON-RPC
errors and keep HTTP 200; only refusals at the edge use the HTTP statuses above. A timeout
(-32030, errorType Timeout) is answered by the gateway runtime once it has canceled the task
on the mesh, also with HTTP 200: A2A clients turn other statuses into transport errors and
would lose the JSON-RPC error.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

from gateways.errors import AGENT_NOT_FOUND, agent_not_found_text
from gateways.http.edgeconfig import (
    AuthConfig,
    ConcurrencyConfig,
    CorsConfig,
    Credential,
    EdgeConfig,
    OidcConfig,
    RateLimitConfig,
    TimeoutConfig,
)
from mesh.a2a.errors import ErrorCode, JSONRPCErrorObject
from mesh.a2a.exceptions import RpcError
from mesh.a2a.jsonrpc import RequestId

__all__ = [
    "JSON_MEDIA_TYPES",
    "AuthConfig",
    "ConcurrencyConfig",
    "CorsConfig",
    "Credential",
    "EdgeConfig",
    "EdgeError",
    "OidcConfig",
    "RateLimitConfig",
    "TimeoutConfig",
    "agent_not_found",
    "auth_required",
    "body_too_slow",
    "get_header",
    "invalid_header",
    "payload_too_large",
    "rate_limited",
    "resource_exhausted",
    "unsupported_media_type",
]


class EdgeError(RpcError):
    """A request refused at the HTTP edge: a JAF error with its HTTP status and headers.

    ``data["errorType"]`` names the error (JAF codes collide with A2A ones); ``http_status``
    and ``headers`` are what the HTTP response should carry besides the JSON-RPC error body.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int,
        error_type: str,
        http_status: int,
        details: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        request_id: RequestId = None,
    ) -> None:
        super().__init__(message, code=code, data={"errorType": error_type, **(details or {})}, request_id=request_id)
        self.http_status = http_status
        self.headers: Mapping[str, str] = MappingProxyType(dict(headers or {}))

    @property
    def error_type_name(self) -> str:
        """JAF's ``errorType``: ``"RateLimited"``, ``"AuthenticationRequired"``..."""
        return str(self.data["errorType"])

    def __reduce__(self) -> tuple[Any, ...]:
        # RpcError pickles by code, which would turn -32003 into PushNotificationNotSupported.
        return (_restore, (self.error.to_wire_dict(), self.request_id, self.http_status, dict(self.headers)))


def _restore(error: dict[str, Any], request_id: RequestId, status: int, headers: dict[str, str]) -> EdgeError:
    model = JSONRPCErrorObject.model_validate(error)
    exc = EdgeError.of_object(model, request_id)
    exc.http_status, exc.headers = status, MappingProxyType(headers)
    return exc


def agent_not_found(name: str, available: list[str]) -> EdgeError:
    """-32000 / 404: no agent ``name`` on the mesh; ``availableAgents`` lists those that are."""
    message, data = agent_not_found_text(name, available)
    return EdgeError(
        message,
        code=AGENT_NOT_FOUND,
        error_type="AgentNotFound",
        http_status=404,
        details={key: value for key, value in data.items() if key != "errorType"},
    )


def rate_limited(limit: int, window: float, retry_after: int, *, headers: Mapping[str, str] | None = None) -> EdgeError:
    """-32003 / 429: the client sent more than ``limit`` requests per ``window`` seconds."""
    return EdgeError(
        f"rate limit exceeded: at most {limit} requests per {window:g} s; retry after {retry_after} s",
        code=-32003,
        error_type="RateLimited",
        http_status=429,
        details={"limit": limit, "window": window, "retryAfter": retry_after},
        headers={"Retry-After": str(retry_after), **(headers or {})},
    )


def auth_required(reason: str, *, challenge: str) -> EdgeError:
    """-32004 / 401: no or wrong credentials; ``challenge`` is the WWW-Authenticate value."""
    return EdgeError(
        f"authentication required: {reason}",
        code=-32004,
        error_type="AuthenticationRequired",
        http_status=401,
        headers={"WWW-Authenticate": challenge},
    )


def resource_exhausted(message: str, *, resource: str, limit: int, status: Literal[429, 503] = 429) -> EdgeError:
    """-32051: a concurrency limit is full; 429 for the caller's own quota, 503 for the gateway's.
    (Not JAF's -32007: A2A 1.0 gives that number to "extended agent card not configured".)"""
    return EdgeError(
        message,
        code=int(ErrorCode.RESOURCE_EXHAUSTED),
        error_type="ResourceExhausted",
        http_status=status,
        details={"resource": resource, "limit": limit},
    )


def payload_too_large(size: int, limit: int) -> EdgeError:
    """-32600 / 413: the request body is larger than ``limits.max_message_bytes``."""
    return EdgeError(
        f"the request body is {size} bytes; the gateway accepts at most {limit} "
        "(limits.max_message_bytes); send large content as a file by URI",
        code=-32600,
        error_type="PayloadTooLarge",
        http_status=413,
        details={"size": size, "limit": limit},
    )


def invalid_header(name: str, value: str, expected: str) -> EdgeError:
    """-32600 / 400: a request header has a value the gateway cannot use."""
    shown = value if len(value) <= 40 else value[:37] + "..."
    return EdgeError(
        f"header {name}: {shown!r} is not {expected}",
        code=-32600,
        error_type="InvalidHeader",
        http_status=400,
        details={"header": name, "expected": expected},
    )


#: The request bodies the JSON-RPC routes read; anything else (a form, text/plain) is what a
#: browser may send cross-site without a preflight, so it is refused before it is read (CSRF).
JSON_MEDIA_TYPES = ("application/json", "application/a2a+json")


def unsupported_media_type(content_type: str | None) -> EdgeError:
    """-32005 / 415: the body is not JSON; ``accepted`` lists the media types that are.

    A2A's ContentTypeNotSupported (-32005, reason ``CONTENT_TYPE_NOT_SUPPORTED``), as the A2A
    1.0 conformance kit asks of a JSON-RPC request sent as ``text/plain`` (JSONRPC-SSE-002);
    -32600 would say the body was JSON but no JSON-RPC request, and it was never read."""
    shown = "no Content-Type" if not content_type else f"Content-Type {content_type[:60]!r}"
    return EdgeError(
        f"{shown} is not accepted; send the JSON-RPC request as {' or '.join(JSON_MEDIA_TYPES)}",
        code=int(ErrorCode.CONTENT_TYPE_NOT_SUPPORTED),
        error_type="UnsupportedMediaType",
        http_status=415,
        details={"accepted": list(JSON_MEDIA_TYPES)},
        headers={"Accept": ", ".join(JSON_MEDIA_TYPES)},
    )


def body_too_slow(timeout_s: float) -> EdgeError:
    """-32600 / 408: the request body did not arrive within ``read_timeout_s``."""
    return EdgeError(
        f"the request body did not arrive within {timeout_s:g} s (read_timeout_s)",
        code=-32600,
        error_type="RequestTimeout",
        http_status=408,
        details={"timeout": timeout_s},
        headers={"Connection": "close"},
    )


def get_header(headers: Mapping[str, str], name: str) -> str | None:
    """The value of header ``name`` in ``headers``, whatever the case of its key."""
    value = headers.get(name)
    if value is not None:
        return value
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None
