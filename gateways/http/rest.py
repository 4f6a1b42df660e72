"""The HTTP+JSON (REST) binding of A2A 1.0 at the gateway, translated to the mesh like JSON-RPC.

Under a base URL per agent (``/a2a/agents/{name}/rest``; ``/a2a/rest`` for the default agent),
the paths of A2A 1.0 (spec 11.3; no ``/v1`` prefix), each the 1.0 method of the same name::

    POST   /message:send                                SendMessage
    POST   /message:stream                              SendStreamingMessage (SSE)
    GET    /tasks                                       ListTasks (query: the params)
    GET    /tasks/{id}                                  GetTask (query: historyLength)
    POST   /tasks/{id}:cancel                           CancelTask
    POST   /tasks/{id}:subscribe (or GET)               SubscribeToTask (SSE)
    POST   /tasks/{id}/pushNotificationConfigs          CreateTaskPushNotificationConfig
    GET    /tasks/{id}/pushNotificationConfigs          ListTaskPushNotificationConfigs
    GET    /tasks/{id}/pushNotificationConfigs/{cid}    GetTaskPushNotificationConfig
    DELETE /tasks/{id}/pushNotificationConfigs/{cid}    DeleteTaskPushNotificationConfig
    GET    /extendedAgentCard                           GetExtendedAgentCard (not configured)

Bodies are the method's ProtoJSON params, answers its bare result, SSE events bare
``StreamResponse`` objects. Errors are ``google.rpc.Status`` bodies (``{"error": {code, status,
message, details}}``, an ``ErrorInfo`` with the A2A reason among the details) with the HTTP
status of a2a-sdk's mapping, except that what the mesh failed to do is never a 500: an agent's
malformed answer is 502, an agent gone or busy 503, a timeout 504.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Callable
from typing import Any, Final

from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateways.http.a2a_v1 import result_v1
from gateways.http.edge import VERSION_HEADER, version_asked
from gateways.http.rest_errors import rest_error, status_of
from gateways.http.rpc import RpcCall, Version, call_v1_of_version, result_of, sse
from gateways.http.serving import Binding, read_body, serve_call
from mesh.a2a import InvalidJSON, InvalidRequest, RpcError
from mesh.e2a import E2AResponse

__all__ = ["REST", "rest_error", "rest_routes"]


class _Rest:
    """The HTTP+JSON binding: bare results, ``google.rpc.Status`` errors with HTTP statuses."""

    errors_in_stream = False

    def result(self, call: RpcCall, result: Any) -> Response:
        return JSONResponse(result)

    def error(self, version: Version, call: RpcCall | None, error: RpcError) -> Response:
        return JSONResponse(rest_error(error), status_code=status_of(error)[0])

    def unary(self, call: RpcCall, frame: E2AResponse) -> Response:
        try:
            return JSONResponse(result_v1(call.method, result_of(frame)))
        except RpcError as exc:  # the agent's error, or an answer that does not translate
            return self.error("1.0", call, exc)

    def stream(self, call: RpcCall, frames: AsyncIterator[E2AResponse]) -> AsyncIterator[bytes]:
        return sse(call, frames, rest_error=rest_error)


REST: Binding = _Rest()


# ---------------------------------------------------------------- reading requests


async def _body(request: Request) -> dict[str, Any]:
    """The JSON object a POST carries (``{}`` when empty)."""
    raw = await read_body(request, request.app.state.gateway.settings.read_timeout_s)
    if not raw.strip():
        return {}
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise InvalidJSON(f"Invalid JSON payload: {exc}") from None
    if not isinstance(doc, dict):
        raise InvalidRequest("the request body must be a JSON object")
    return doc


#: The boolean members a query string may carry, as ProtoJSON reads them ("true" / "false").
_QUERY_BOOLEANS: Final = frozenset({"includeArtifacts"})


def _query(request: Request) -> dict[str, Any]:
    """The query string as params: booleans read as such (the rest checks the text), the
    ``A2A-Version`` a client may send here instead of a header left out."""
    params: dict[str, Any] = {}
    for key, value in request.query_params.items():
        if key == VERSION_HEADER:
            continue
        if key in _QUERY_BOOLEANS and value.lower() in ("true", "false"):
            params[key] = value.lower() == "true"
        else:
            params[key] = value
    return params


async def _serve(request: Request, method: str, params: Callable[[Request], Any]) -> Response:
    try:
        value = params(request)
        if inspect.isawaitable(value):  # a reader of the body
            value = await value
    except RpcError as exc:
        return REST.error("1.0", None, exc)
    return await serve_call(request, lambda: call_v1_of_version(method, value, version_asked(request)), REST)


def _endpoint(method: str, params: Callable[[Request], Any]) -> Callable[[Request], Any]:
    async def endpoint(request: Request) -> Response:
        return await _serve(request, method, params)

    endpoint.__name__ = method
    return endpoint


def _task(request: Request) -> str:
    return str(request.path_params["task_id"])


async def _with_body(request: Request, **members: str) -> dict[str, Any]:
    return {**(await _body(request)), **members}


_ROUTES: Final[list[tuple[str, str, tuple[str, ...], bool, Callable[[Request], Any]]]] = [
    # (path, 1.0 method, HTTP methods, has a JSON body, params reader)
    ("/message:send", "SendMessage", ("POST",), True, _body),
    ("/message:stream", "SendStreamingMessage", ("POST",), True, _body),
    ("/tasks", "ListTasks", ("GET",), False, _query),
    # The ":verb" routes before /tasks/{task_id}, whose id would swallow "t-1:subscribe".
    ("/tasks/{task_id}:cancel", "CancelTask", ("POST",), True, lambda r: _with_body(r, id=_task(r))),
    ("/tasks/{task_id}:subscribe", "SubscribeToTask", ("POST", "GET"), False, lambda r: {"id": _task(r)}),
    ("/tasks/{task_id}", "GetTask", ("GET",), False, lambda r: {**_query(r), "id": _task(r)}),
    (
        "/tasks/{task_id}/pushNotificationConfigs",
        "CreateTaskPushNotificationConfig",
        ("POST",),
        True,
        lambda r: _with_body(r, taskId=_task(r)),
    ),
    (
        "/tasks/{task_id}/pushNotificationConfigs",
        "ListTaskPushNotificationConfigs",
        ("GET",),
        False,
        lambda r: {**_query(r), "taskId": _task(r)},
    ),
    (
        "/tasks/{task_id}/pushNotificationConfigs/{config_id}",
        "GetTaskPushNotificationConfig",
        ("GET",),
        False,
        lambda r: {"taskId": _task(r), "id": r.path_params["config_id"]},
    ),
    (
        "/tasks/{task_id}/pushNotificationConfigs/{config_id}",
        "DeleteTaskPushNotificationConfig",
        ("DELETE",),
        False,
        lambda r: {"taskId": _task(r), "id": r.path_params["config_id"]},
    ),
    ("/extendedAgentCard", "GetExtendedAgentCard", ("GET",), False, lambda r: {}),
]


def rest_routes(base: str, *, with_body: list[Middleware], without_body: list[Middleware]) -> list[Route]:
    """The REST routes under ``base`` (``/a2a/agents/{name}/rest``); ``with_body`` is the private
    middleware of routes reading a JSON body, ``without_body`` of the others (a POST without a
    body, as ``:subscribe``, has no content type to check)."""
    return [
        Route(
            base + path,
            _endpoint(method, params),
            methods=list(http_methods),
            middleware=with_body if body else without_body,
        )
        for path, method, http_methods, body, params in _ROUTES
    ]
