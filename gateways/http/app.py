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
A2A discovery expects. These protections are middleware (:mod:`gateways.http.edge`); the
endpoints read the mesh through the runtime's facade (``agents()``, ``agent(name)``...).
JSON-RPC errors are answered with HTTP 200 (A2A's convention), edge refusals with their HTTP
status (401, 413, 429...).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from gateways.http.a2a_v1 import list_tasks_query, list_tasks_result_v1
from gateways.http.auth import Authenticator, Principal
from gateways.http.card_responses import CardResponses
from gateways.http.cards import http_card
from gateways.http.edge import (
    EXCEPTION_HANDLERS,
    Caller,
    app_middleware,
    asked_version,
    caller_of,
    private_route_middleware,
    version_asked,
)
from gateways.http.limits import ConcurrencyLimits, Slot, request_timeout
from gateways.http.protection import EdgeError, agent_not_found, body_too_slow
from gateways.http.rpc import (
    RpcCall,
    answer,
    check_version_served,
    envelope_for,
    error_response,
    parse_call,
    sse,
)
from mesh.a2a import AuthenticatedExtendedCardNotConfigured, RpcError, TaskNotFound
from mesh.limits import check_message_limits
from mesh.registry import Entry

if TYPE_CHECKING:
    from gateways.http.server import HttpGateway


def build_app(gateway: HttpGateway) -> Starlette:
    """The Starlette application of one HTTP gateway (its protections: :mod:`gateways.http.edge`)."""
    settings = gateway.settings
    concurrency = ConcurrencyLimits(settings.concurrency)
    private = private_route_middleware(concurrency.requests, settings.limits)
    routes = [
        Route("/.well-known/agent-card.json", _default_card, methods=["GET"]),
        Route("/.well-known/agent-card", _default_card, methods=["GET"]),
        Route("/.well-known/agent.json", _default_card, methods=["GET"]),
        Route("/a2a/health", _health, methods=["GET"]),
        Route("/a2a/agents", _list_agents, methods=["GET"], middleware=private),
        Route("/a2a/agents/{name}", _describe_agent, methods=["GET"], middleware=private),
        Route("/a2a/agents/{name}/card", _agent_card, methods=["GET"]),
        Route("/a2a/agents/{name}", _jsonrpc, methods=["POST"], middleware=private),
        Route("/a2a", _jsonrpc, methods=["POST"], middleware=private),
    ]
    app = Starlette(
        routes=routes,
        middleware=app_middleware(settings, Authenticator(settings.auth)),
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.router.redirect_slashes = False  # OptionalTrailingSlash serves both forms instead
    app.state.gateway = gateway
    app.state.concurrency = concurrency
    app.state.streams = OpenStreams()
    app.state.cards = CardResponses(settings.card_max_age_s)
    return app


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


#: An SSE comment: clients ignore it; proxies see traffic on a quiet stream and keep it open.
KEEP_ALIVE = b": keep-alive\n\n"


class EventStream(StreamingResponse):
    """An SSE response that gives its context ``slot`` back however it ends: at its last event
    (before the end of the body goes out, so a client that saw the end may send again at once),
    a client that left, even before the body was started, or a stopping gateway.

    A stream quiet for ``keep_alive_s`` gets a comment line. (sse-starlette's
    ``EventSourceResponse`` does the same, but patches uvicorn's ``Server.handle_exit`` when
    imported and ends streams its own way; the slot and stop handling here need this one.)
    """

    def __init__(
        self, chunks: AsyncIterator[bytes], streams: OpenStreams, slot: Slot | None, *, keep_alive_s: float
    ) -> None:
        super().__init__(
            self._releasing(chunks),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self.streams = streams
        self.slot = slot
        self.keep_alive_s = keep_alive_s

    def release(self) -> None:
        if self.slot is not None:
            self.slot.release()

    async def _releasing(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            self.release()
            await chunks.aclose()  # type: ignore[attr-defined]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        progress = {"started": False, "ended": False}
        sent_at = time.monotonic()
        lock = anyio.Lock()  # a comment never goes out in the middle of an event

        async def sending(message: Message) -> None:
            nonlocal sent_at
            async with lock:
                progress["started"] = progress["started"] or message["type"] == "http.response.start"
                progress["ended"] = message["type"] == "http.response.body" and not message.get("more_body", False)
                await send(message)
                sent_at = time.monotonic()

        async def keeping_alive() -> None:
            nonlocal sent_at
            while True:
                await anyio.sleep(max(sent_at + self.keep_alive_s - time.monotonic(), 0.01))
                async with lock:
                    quiet = time.monotonic() - sent_at >= self.keep_alive_s
                    if quiet and progress["started"] and not progress["ended"]:
                        await send({"type": "http.response.body", "body": KEEP_ALIVE, "more_body": True})
                        sent_at = time.monotonic()

        try:
            with anyio.CancelScope() as cancel:
                self.streams.add(cancel)
                pinging = asyncio.get_running_loop().create_task(keeping_alive())
                try:
                    await super().__call__(scope, receive, sending)
                finally:
                    pinging.cancel()  # not awaited: it never holds anything beyond the lock
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
    return _card_response(request, gateway, name, f"{gateway.public_url}/a2a")


async def _agent_card(request: Request) -> Response:
    gateway = _gateway(request)
    name = request.path_params["name"]
    return _card_response(request, gateway, name, f"{gateway.public_url}/a2a/agents/{name}")


def _card_response(request: Request, gateway: HttpGateway, name: str, url: str) -> Response:
    entry = _entry_of(gateway, name)
    settings = gateway.settings
    card = http_card(entry.card, url, settings.auth, settings.a2a_versions)
    responses: CardResponses = request.app.state.cards
    return responses.respond(request, card, first_seen=entry.first_seen)


async def _health(request: Request) -> Response:
    """Up or down for anyone (load balancers); the broker, namespace and agents only for an
    authenticated caller, or anyone with ``health_details``: they help an attacker aim."""
    gateway = _gateway(request)
    runtime = gateway.runtime
    connected = runtime.is_connected
    health: dict[str, Any] = {"status": "ok" if connected else "degraded"}
    user = request.user
    if gateway.settings.health_details or (isinstance(user, Caller) and user.principal.scheme != "none"):
        health |= {
            "gateway": gateway.settings.id,
            "namespace": runtime.namespace,
            "broker": {"url": runtime.broker_url, "connected": connected},
            "agents": len(runtime.agents()),
        }
    return JSONResponse(health, status_code=200 if connected else 503)


async def _list_agents(request: Request) -> Response:
    gateway = _gateway(request)
    return JSONResponse({"agents": [_summary(gateway, e) for e in gateway.runtime.agents()]})


async def _describe_agent(request: Request) -> Response:
    gateway = _gateway(request)
    entry = _entry_of(gateway, request.path_params["name"])
    summary = _summary(gateway, entry)
    summary["skills"] = [s.to_wire_dict() for s in entry.card.skills]
    summary["capabilities"] = entry.card.capabilities.to_wire_dict()
    return JSONResponse(summary)


def _summary(gateway: HttpGateway, entry: Entry) -> dict[str, Any]:
    card = entry.card
    url = f"{gateway.public_url}/a2a/agents/{entry.name}"
    return {
        "name": entry.name,
        "description": card.description,
        "version": card.version,
        "url": url,
        "cardUrl": f"{url}/card",
        "skills": [s.id for s in card.skills],
        "streaming": bool(card.capabilities.streaming),
        "lastSeen": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(entry.last_seen)),
    }


def _entry_of(gateway: HttpGateway, name: str) -> Entry:
    """Agent ``name``, or the JAF agent-not-found refusal (404) listing the agents there are."""
    entry = gateway.runtime.agent(name)
    if entry is None:
        raise agent_not_found(name, gateway.runtime.agent_names())
    return entry


# ---------------------------------------------------------------- JSON-RPC


async def _jsonrpc(request: Request) -> Response:
    gateway = _gateway(request)
    concurrency: ConcurrencyLimits = request.app.state.concurrency
    principal = caller_of(request)
    body = await read_body(request, gateway.settings.read_timeout_s)
    version_header = version_asked(request)
    call: RpcCall | None = None
    try:
        call = parse_call(body, version_header)
        check_version_served(call, gateway.settings.a2a_versions)
        agent = _target(gateway, request, call, principal)
        if call.mesh_method is None:
            return JSONResponse(_answer_locally(gateway, call, principal))
        message = call.params.get("message")
        if message is not None:
            check_message_limits(message, gateway.settings.limits)
        timeout = request_timeout(request.headers, gateway.settings.timeouts, streaming=call.streaming)
        context_slot = concurrency.contexts.acquire(call.context_id) if call.context_id else None
    except RpcError as exc:
        if exc.request_id is None and call is not None:
            exc.request_id = call.request_id  # the request was read: answer it by its id
        if isinstance(exc, EdgeError):
            raise
        version = call.version if call is not None else asked_version(request)
        return JSONResponse(error_response(version, exc.request_id, exc))
    envelope = envelope_for(call, user_id=principal.name)
    frames = gateway.runtime.forward(envelope, agent, deadline_s=timeout, owner=principal.name)
    if call.streaming:
        keep_alive_s = gateway.settings.sse_keep_alive_s
        return EventStream(sse(call, frames), request.app.state.streams, context_slot, keep_alive_s=keep_alive_s)
    try:
        async for frame in frames:
            if frame.is_final:
                return JSONResponse(answer(call, frame))
    finally:
        if context_slot is not None:
            context_slot.release()
        await frames.aclose()  # type: ignore[attr-defined]
    raise AssertionError("the runtime ended a request without a final frame")  # pragma: no cover


async def read_body(request: Request, timeout_s: float) -> bytes:
    """The whole body, due within ``timeout_s`` (408 after: a slow body holds a request slot);
    BodyLimit refuses one over the size limit as it comes."""
    try:
        with anyio.fail_after(timeout_s):
            return await request.body()
    except TimeoutError:
        raise body_too_slow(timeout_s) from None


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
        available = gateway.runtime.agent_names()
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
