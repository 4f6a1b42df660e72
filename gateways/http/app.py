"""The HTTP surface of the gateway (Starlette): the JAF A2A routes.

==========================================  ==============================================
``GET /.well-known/agent-card.json``        the default agent's card (also ``agent-card``,
                                            and A2A 0.2's ``agent.json``)
``GET /a2a/health``                         is the gateway connected; how many agents
``GET /a2a/agents``                         the agents on the mesh
``GET /a2a/agents/{name}``                  one agent, summarized
``GET /a2a/agents/{name}/card``             its card, pointing at the gateway
``POST /a2a/agents/{name}``                 A2A JSON-RPC to that agent (0.3, or 1.0 with
                                            ``A2A-Version: 1.0``); SSE for streams
``POST /a2a``                               the same for the configured default agent
==========================================  ==============================================

Every request is rate limited (``X-RateLimit-*`` headers on every answer); the JSON-RPC and
agent-listing routes need the configured authentication; cards and health are public, as
A2A discovery expects. JSON-RPC errors are answered with HTTP 200 (A2A's convention), edge
refusals with their HTTP status (401, 413, 429...).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from gateways.http.a2a_v1 import list_tasks_query, list_tasks_result_v1
from gateways.http.auth import Authenticator, Principal
from gateways.http.cards import http_card
from gateways.http.limits import ConcurrencyLimits, RateLimiter, Slot, check_body_size, request_timeout
from gateways.http.protection import EdgeError, agent_not_found, get_header
from gateways.http.rpc import RpcCall, Version, answer, envelope_for, error_response, parse_call, sse
from gateways.runtime import GatewayError
from mesh.a2a import AuthenticatedExtendedCardNotConfigured, RpcError, TaskNotFound
from mesh.limits import check_message_limits

if TYPE_CHECKING:
    from gateways.http.server import HttpGateway

VERSION_HEADER = "A2A-Version"
Handler = Callable[[Request], Awaitable[Response]]


class Edge:
    """The protections every request passes, built from the gateway's settings."""

    def __init__(self, gateway: HttpGateway) -> None:
        settings = gateway.settings
        self.authenticator = Authenticator(settings.auth)
        self.rate_limiter = RateLimiter(settings.rate_limit) if settings.rate_limit is not None else None
        self.concurrency = ConcurrencyLimits(settings.concurrency)

    def client_key(self, request: Request, principal: Principal | None) -> str:
        if principal is not None and principal.scheme != "none":
            return principal.name
        return request.client.host if request.client is not None else "unknown"


def build_app(gateway: HttpGateway) -> Starlette:
    """The Starlette application of one HTTP gateway."""
    edge = Edge(gateway)
    public = _public(gateway, edge)
    private = _private(gateway, edge)
    routes = [
        Route("/.well-known/agent-card.json", public(_default_card), methods=["GET"]),
        Route("/.well-known/agent-card", public(_default_card), methods=["GET"]),
        Route("/.well-known/agent.json", public(_default_card), methods=["GET"]),
        Route("/a2a/health", public(_health), methods=["GET"]),
        Route("/a2a/agents", private(_list_agents), methods=["GET"]),
        Route("/a2a/agents/{name}", private(_describe_agent), methods=["GET"]),
        Route("/a2a/agents/{name}/card", public(_agent_card), methods=["GET"]),
        Route("/a2a/agents/{name}", private(_jsonrpc), methods=["POST"]),
        Route("/a2a", private(_jsonrpc), methods=["POST"]),
    ]
    cors = gateway.settings.cors
    middleware = []
    if cors.allow_origins:
        options = cors.model_dump()
        # A2A 1.0 clients must send A2A-Version: a browser sends only the headers a preflight allowed.
        if not {VERSION_HEADER.lower(), "*"} & {h.lower() for h in options["allow_headers"]}:
            options["allow_headers"].append(VERSION_HEADER)
        middleware.append(Middleware(CORSMiddleware, **options))
    app = Starlette(routes=routes, middleware=middleware)
    app.state.gateway = gateway
    app.state.edge = edge
    app.state.streams = OpenStreams()
    return app


# ---------------------------------------------------------------- protections


def _public(gateway: HttpGateway, edge: Edge) -> Callable[[Handler], Handler]:
    """Rate limited; no authentication (cards and health are for anyone)."""

    def wrap(handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            headers: dict[str, str] = {}
            try:
                headers = _rate_limit(edge, edge.client_key(request, None))
                response = await handler(request)
            except EdgeError as exc:
                return _edge_refusal(request, exc, headers)
            response.headers.update(headers)
            return response

        return endpoint

    return wrap


def _private(gateway: HttpGateway, edge: Edge) -> Callable[[Handler], Handler]:
    """Authenticated, rate limited by principal, and at most N requests at once per client."""

    def wrap(handler: Handler) -> Handler:
        async def endpoint(request: Request) -> Response:
            headers: dict[str, str] = {}
            try:
                try:
                    principal = edge.authenticator.authenticate(request.headers)
                except EdgeError:
                    # Counted against the caller's address: guessing credentials costs requests too.
                    headers = _rate_limit(edge, edge.client_key(request, None))
                    raise
                key = edge.client_key(request, principal)
                headers = _rate_limit(edge, key)
                slot = edge.concurrency.requests.acquire(key)
            except EdgeError as exc:
                return _edge_refusal(request, exc, headers)
            request.state.principal = principal
            try:
                response = await handler(request)
            except EdgeError as exc:
                response = _edge_refusal(request, exc)
            except BaseException:
                slot.release()
                raise
            response.headers.update(headers)  # on refusals too: the client sees its budget
            _release_when_sent(response, slot)
            return response

        return endpoint

    return wrap


def _rate_limit(edge: Edge, key: str) -> dict[str, str]:
    if edge.rate_limiter is None:
        return {}
    decision = edge.rate_limiter.check(key)
    decision.raise_if_refused()  # a 429 carrying the X-RateLimit-* headers too
    return decision.headers()


def _release_when_sent(response: Response, slot: Slot) -> None:
    """Free the client's request slot once the response (a whole SSE stream too) is sent."""
    if isinstance(response, EventStream):
        response.slots.append(slot)
    else:
        slot.release()


def _edge_refusal(request: Request, exc: EdgeError, headers: dict[str, str] | None = None) -> Response:
    version = _version(_version_asked(request))
    body = error_response(version, exc.request_id, exc)
    return JSONResponse(body, status_code=exc.http_status, headers={**(headers or {}), **exc.headers})


def _version_asked(request: Request) -> str | None:
    """The A2A-Version a client asked for: the header, or (A2A 1.0 allows it) the query parameter."""
    return get_header(request.headers, VERSION_HEADER) or request.query_params.get(VERSION_HEADER)


def _version(header: str | None) -> Version:
    """The A2A version errors are written in when the request could not be read (1.0 or 0.3)."""
    return "1.0" if (header or "").strip().startswith("1") else "0.3"


# ---------------------------------------------------------------- SSE responses


class OpenStreams:
    """The SSE responses being sent, so that a stopping gateway can end them: uvicorn waits for
    every open response before it stops, and a stream may wait on the mesh for minutes."""

    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()
        self.closing = False

    def add(self, scope: anyio.CancelScope) -> None:
        self._scopes.add(scope)
        if self.closing:
            scope.cancel()

    def discard(self, scope: anyio.CancelScope) -> None:
        self._scopes.discard(scope)

    def close(self) -> None:
        """End every open stream (and any that starts from now on) at its next await."""
        self.closing = True
        for scope in list(self._scopes):
            scope.cancel()


class EventStream(StreamingResponse):
    """An SSE response that gives its concurrency ``slots`` back however it ends: at its last
    event (before the end of the body goes out, so a client that saw the end may send again at
    once), a client that left, even before the body was started, or a stopping gateway."""

    def __init__(self, chunks: AsyncIterator[bytes], streams: OpenStreams, slots: list[Slot]) -> None:
        super().__init__(
            self._releasing(chunks),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self.streams = streams
        self.slots = slots

    def release(self) -> None:
        for slot in self.slots:
            slot.release()

    async def _releasing(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            self.release()
            await chunks.aclose()  # type: ignore[attr-defined]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        progress = {"started": False, "ended": False}

        async def sending(message: Message) -> None:
            progress["started"] = progress["started"] or message["type"] == "http.response.start"
            progress["ended"] = message["type"] == "http.response.body" and not message.get("more_body", False)
            await send(message)

        try:
            with anyio.CancelScope() as cancel:
                self.streams.add(cancel)
                await super().__call__(scope, receive, sending)
        finally:
            self.streams.discard(cancel)
            self.release()
            await self.body_iterator.aclose()  # type: ignore[attr-defined]  # a body left mid-way
        if cancel.cancelled_caught and not progress["ended"]:
            # The gateway is stopping: end the stream cleanly (the task goes on on the mesh).
            if not progress["started"]:
                await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            await send({"type": "http.response.body", "body": b"", "more_body": False})


# ---------------------------------------------------------------- cards, health, listing


def _gateway(request: Request) -> HttpGateway:
    gateway: HttpGateway = request.app.state.gateway
    return gateway


async def _default_card(request: Request) -> Response:
    gateway = _gateway(request)
    name = gateway.settings.default_agent
    if name is None:
        return JSONResponse(
            {
                "error": "this gateway has no default agent; list the agents at /a2a/agents and read a card "
                "at /a2a/agents/{name}/card"
            },
            status_code=404,
        )
    return JSONResponse(http_card(_card_of(gateway, name), f"{gateway.public_url}/a2a", gateway.settings.auth))


async def _agent_card(request: Request) -> Response:
    gateway = _gateway(request)
    name = request.path_params["name"]
    url = f"{gateway.public_url}/a2a/agents/{name}"
    return JSONResponse(http_card(_card_of(gateway, name), url, gateway.settings.auth))


async def _health(request: Request) -> Response:
    gateway = _gateway(request)
    connected = gateway.runtime.transport.is_connected
    return JSONResponse(
        {
            "status": "ok" if connected else "degraded",
            "gateway": gateway.settings.id,
            "namespace": gateway.runtime.namespace,
            "broker": {"url": gateway.runtime.transport.url, "connected": connected},
            "agents": len(gateway.runtime.registry.agents()),
        },
        status_code=200 if connected else 503,
    )


async def _list_agents(request: Request) -> Response:
    gateway = _gateway(request)
    return JSONResponse(
        {"agents": [_summary(gateway, e.name, e.card, e.last_seen) for e in gateway.runtime.registry.agents()]}
    )


async def _describe_agent(request: Request) -> Response:
    gateway = _gateway(request)
    name = request.path_params["name"]
    entry = gateway.runtime.registry.get(name)
    if entry is None:
        _card_of(gateway, name)  # raises agent-not-found with the list
    assert entry is not None
    summary = _summary(gateway, name, entry.card, entry.last_seen)
    summary["skills"] = [s.to_wire_dict() for s in entry.card.skills]
    summary["capabilities"] = entry.card.capabilities.to_wire_dict()
    return JSONResponse(summary)


def _summary(gateway: HttpGateway, name: str, card: Any, last_seen: float) -> dict[str, Any]:
    url = f"{gateway.public_url}/a2a/agents/{name}"
    return {
        "name": name,
        "description": card.description,
        "version": card.version,
        "url": url,
        "cardUrl": f"{url}/card",
        "skills": [s.id for s in card.skills],
        "streaming": bool(card.capabilities.streaming),
        "lastSeen": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(last_seen)),
    }


def _card_of(gateway: HttpGateway, name: str) -> Any:
    try:
        return gateway.runtime.agent_card(name)
    except GatewayError as exc:
        raise agent_not_found(name, exc.data.get("availableAgents", [])) from None


# ---------------------------------------------------------------- JSON-RPC


async def _jsonrpc(request: Request) -> Response:
    gateway = _gateway(request)
    edge: Edge = request.app.state.edge
    principal: Principal = request.state.principal
    body = await _read_body(request, gateway)
    version_header = _version_asked(request)
    call: RpcCall | None = None
    try:
        call = parse_call(body, version_header)
        agent = _target(gateway, request, call, principal)
        if call.mesh_method is None:
            return JSONResponse(_answer_locally(gateway, call, principal))
        message = call.params.get("message")
        if message is not None:
            check_message_limits(message, gateway.settings.limits)
        timeout = request_timeout(request.headers, gateway.settings.timeouts, streaming=call.streaming)
        context_slot = edge.concurrency.contexts.acquire(call.context_id) if call.context_id else None
    except RpcError as exc:
        if exc.request_id is None and call is not None:
            exc.request_id = call.request_id  # the request was read: answer it by its id
        if isinstance(exc, EdgeError):
            raise
        version = call.version if call is not None else _version(version_header)
        return JSONResponse(error_response(version, exc.request_id, exc))
    envelope = envelope_for(call, user_id=principal.name)
    frames = gateway.runtime.forward(envelope, agent, deadline_s=timeout, owner=principal.name)
    if call.streaming:
        return EventStream(sse(call, frames), request.app.state.streams, [s for s in [context_slot] if s is not None])
    try:
        async for frame in frames:
            if frame.is_final:
                return JSONResponse(answer(call, frame))
    finally:
        if context_slot is not None:
            context_slot.release()
        await frames.aclose()  # type: ignore[attr-defined]
    raise AssertionError("the runtime ended a request without a final frame")  # pragma: no cover


async def _read_body(request: Request, gateway: HttpGateway) -> bytes:
    """The request body, refused (413) as soon as it is larger than the limit."""
    limit = gateway.settings.limits
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit():
        check_body_size(int(declared), limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        check_body_size(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _target(gateway: HttpGateway, request: Request, call: RpcCall, principal: Principal) -> str:
    """The agent a request goes to: the path's, else the task's, else the default agent."""
    route = gateway.runtime.task_route(call.task_id) if call.task_id else None
    if route is not None and route.owner not in (None, principal.name):
        raise TaskNotFound(f"no task {call.task_id!r}", data={"taskId": call.task_id}, request_id=call.request_id)
    name = request.path_params.get("name")
    if name is not None:
        return str(name)
    if route is not None:
        return route.agent
    if gateway.settings.default_agent is None:
        available = gateway.runtime.registry.agent_names()
        raise EdgeError(
            f"this gateway has no default agent: POST to /a2a/agents/{{name}} instead "
            f"(agents: {', '.join(available) or 'none'})",
            code=-32000,
            error_type="AgentNotFound",
            http_status=404,
            details={"availableAgents": available},
        )
    return gateway.settings.default_agent


def _answer_locally(gateway: HttpGateway, call: RpcCall, principal: Principal) -> dict[str, Any]:
    """1.0 methods the mesh has no counterpart for."""
    if call.method == "ListTasks":
        query = list_tasks_query(call.params)
        tasks = [r.task for r in gateway.runtime.task_routes() if r.owner == principal.name and r.task is not None]
        return {"jsonrpc": "2.0", "id": call.request_id, "result": list_tasks_result_v1(query, tasks)}
    error = AuthenticatedExtendedCardNotConfigured("this gateway serves no extended agent cards")
    return error_response("1.0", call.request_id, error)
