"""The dashboard's web surface (Starlette): the page, its assets, its live feed and sending.

==============================  ==============================================================
``GET /ui``                     the page (``gateways/dashboard/static``: HTML, CSS, JS modules)
``GET /ui/static/{file}``       its assets, from the package (nothing from a CDN)
``GET /favicon.ico``            the icon browsers ask for on their own (public)
``GET /ui/api/events``          SSE: ``snapshot`` first, then ``card``, ``gone``, ``refused``, ``task``,
                                ``taskGone``, ``rates``, ``usage``, ``schedules``
                                (see :mod:`gateways.dashboard.model`)
``POST /ui/api/send``           ``{"agent": ..., "text": ...}``: ``message/stream`` to the
                                agent; SSE of its events (``item``), then ``end`` or ``error``;
                                on the HTTP gateway, sent as the signed-in caller through the
                                gateway's A2A path (their identity and user token), on
                                ``mesh dashboard`` as the dashboard's own client
==============================  ==============================================================

The HTTP gateway serves these routes behind its authentication (:func:`dashboard_routes` with
its ``RequireCaller`` middleware); ``mesh dashboard`` serves them alone
(:class:`DashboardServer`), for meshes without a gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from importlib import resources
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

from gateways.dashboard.service import Dashboard, FollowerTooSlow
from gateways.http.assets import MEDIA_TYPES, StaticAssets
from gateways.http.rpc import RpcCall, error_of, parse_call, result_of
from gateways.http.serving import serve_call
from gateways.http.sessions import SESSION_COOKIE
from mesh.a2a import RpcError
from mesh.e2a import E2AResponse
from mesh.errors import MeshError, PortUnavailableError
from topics import validate_identifier

__all__ = ["DashboardServer", "dashboard_routes"]

log = logging.getLogger(__name__)

PREFIX = "/ui"
MAX_TEXT = 10_000  # characters of a message sent from the page
SSE_KEEP_ALIVE_S = 15.0
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})
_ASSETS = resources.files("gateways.dashboard") / "static"


def dashboard_routes(
    middleware: Sequence[Middleware] = (), page_middleware: Sequence[Middleware] | None = None
) -> list[Route]:
    """The dashboard's routes; the app's ``state.dashboard`` is the :class:`Dashboard` they show
    (``page_middleware``: the page's own, else ``middleware``)."""
    assets = StaticAssets(_ASSETS, what="dashboard", suffixes=MEDIA_TYPES)  # read once, here
    page = assets.text("index.html")

    async def page_route(request: Request) -> Response:
        return _page(request, page)

    async def asset_route(request: Request) -> Response:
        return assets.response(request.path_params["name"])

    async def favicon_route(request: Request) -> Response:
        # Browsers ask for /favicon.ico on their own, without credentials: the icon is public.
        return Response(
            assets.files["favicon.ico"], media_type="image/x-icon", headers={"Cache-Control": "max-age=86400"}
        )

    return [
        Route("/favicon.ico", favicon_route, methods=["GET"]),
        Route(
            PREFIX, page_route, methods=["GET"], middleware=middleware if page_middleware is None else page_middleware
        ),
        Route(PREFIX + "/static/{name}", asset_route, methods=["GET"], middleware=middleware),
        Route(PREFIX + "/api/events", _events, methods=["GET"], middleware=middleware),
        Route(PREFIX + "/api/send", _send, methods=["POST"], middleware=middleware),
    ]


def _dashboard(request: Request) -> Dashboard:
    dashboard: Dashboard = request.app.state.dashboard
    return dashboard


def _page(request: Request, html: str) -> Response:
    base = request.scope.get("root_path", "") + PREFIX + "/"
    html = html.replace("{{BASE}}", base).replace("{{NAMESPACE}}", _html_escape(_dashboard(request).namespace))
    sessions = getattr(request.app.state, "sessions", None)  # the gateway's sign-in, not mesh dashboard's
    session = sessions.get(request.cookies.get(SESSION_COOKIE)) if sessions is not None else None
    html = html.replace("{{CSRF}}", _html_escape(session.csrf) if session is not None else "")
    gateway = getattr(request.app.state, "gateway", None)
    chat = gateway is not None and gateway.settings.chat  # the gateway's chat, beside its dashboard
    link = f'<a class="chat-link" href="{request.scope.get("root_path", "")}/chat">Chat</a>' if chat else ""
    html = html.replace("{{CHAT_LINK}}", link)
    return Response(html, media_type="text/html", headers={"Cache-Control": "no-store"})


async def _events(request: Request) -> Response:
    dashboard = _dashboard(request)
    return _sse(_follow(dashboard))


async def _follow(dashboard: Dashboard) -> AsyncGenerator[tuple[str, Any]]:
    try:
        async with contextlib.aclosing(dashboard.follow()) as changes:
            async for change in changes:
                yield change
    except FollowerTooSlow as exc:
        yield "restart", {"reason": str(exc)}
    except MeshError as exc:
        yield "problem", {"reason": f"cannot watch the mesh: {exc}"}


async def _send(request: Request) -> Response:
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/json":
        # Only JSON: a form or text/plain POST is what another site's page can send unasked.
        return JSONResponse({"error": "send Content-Type: application/json"}, status_code=415)
    try:
        body = json.loads(await request.body())
    except ValueError:
        body = None
    problem = _send_problem(body)
    if problem is not None:
        return JSONResponse({"error": problem}, status_code=400)
    if getattr(request.app.state, "gateway", None) is not None:
        return await _send_as_caller(request, body["agent"], body["text"])
    dashboard = _dashboard(request)
    return _sse(_stream(dashboard, body["agent"], body["text"]))


async def _send_as_caller(request: Request, agent: str, text: str) -> Response:
    """The message sent through the gateway as the caller (as an HTTP client's would be)."""
    message = {
        "kind": "message",
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "text", "text": text}],
    }
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": message}})
    return await serve_call(request, lambda: parse_call(body.encode(), None), _AS_CALLER, agent_name=agent)


class _DashboardBinding:
    """The gateway's answer in the dashboard's stream format (``item``, ``end``, ``error``)."""

    errors_in_stream = False

    def result(self, call: RpcCall, result: Any) -> Response:  # pragma: no cover - message/stream only
        return JSONResponse(result)

    def error(self, version: str, call: RpcCall | None, error: RpcError) -> Response:
        status = 404 if error.code == -32000 else 400
        return JSONResponse({"error": str(error.error.message)}, status_code=status)

    def unary(self, call: RpcCall, frame: E2AResponse) -> Response:  # pragma: no cover - streams only
        return JSONResponse(result_of(frame))

    def stream(self, call: RpcCall, frames: AsyncIterator[E2AResponse]) -> AsyncIterator[bytes]:
        async def chunks() -> AsyncIterator[bytes]:
            try:
                async for frame in frames:
                    if frame.response_kind == "e2a.error":
                        yield _event("error", {"reason": str(error_of(frame).error.message)})
                        return
                    item = frame.body["payload"] if frame.response_kind == "a2a.stream_event" else result_of(frame)
                    yield _event("item", item)
                    if frame.is_final:
                        break
                yield _event("end", {})
            finally:
                await frames.aclose()  # type: ignore[attr-defined]

        return chunks()


_AS_CALLER = _DashboardBinding()


def _event(kind: str, data: Any) -> bytes:
    return f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _send_problem(body: object) -> str | None:
    if not isinstance(body, dict):
        return 'send a JSON object {"agent": "<name>", "text": "<message>"}'
    agent, text = body.get("agent"), body.get("text")
    if not isinstance(agent, str):
        return '"agent" must be the name of an agent on the mesh'
    try:
        validate_identifier(agent, "agent name")
    except ValueError as exc:
        return str(exc)
    if not isinstance(text, str) or not text.strip():
        return '"text" must be a non-empty string'
    if len(text) > MAX_TEXT:
        return f'"text" has {len(text)} characters; the dashboard sends at most {MAX_TEXT}'
    return None


async def _stream(dashboard: Dashboard, agent: str, text: str) -> AsyncGenerator[tuple[str, Any]]:
    try:
        async for item in dashboard.send(agent, text):
            yield "item", item
    except MeshError as exc:
        yield "error", {"reason": str(exc)}
        return
    yield "end", {}


def _sse(changes: AsyncGenerator[tuple[str, Any]]) -> StreamingResponse:
    """Server-sent events of ``changes``, with a comment line when quiet (proxies close idle streams)."""

    async def body() -> AsyncIterator[bytes]:
        out: asyncio.Queue[tuple[str, Any] | None] = asyncio.Queue(maxsize=64)

        async def pump() -> None:
            try:
                async with contextlib.aclosing(changes) as items:
                    async for item in items:
                        await out.put(item)
            finally:
                await out.put(None)

        task = asyncio.get_running_loop().create_task(pump())
        try:
            while True:
                try:
                    item = await asyncio.wait_for(out.get(), SSE_KEEP_ALIVE_S)
                except TimeoutError:
                    yield b": keep-alive\n\n"
                    continue
                if item is None:
                    return
                kind, data = item
                yield f"event: {kind}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
    return StreamingResponse(body(), media_type="text/event-stream", headers=headers)


def _html_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


# ---------------------------------------------------------------- mesh dashboard


async def _root(request: Request) -> Response:
    return RedirectResponse(PREFIX, status_code=307)


class DashboardServer:
    """The dashboard on its own small server (``mesh dashboard``), without authentication:
    it listens on the loopback interface unless told otherwise, and there answers only requests
    addressed to it by a loopback name."""

    def __init__(self, dashboard: Dashboard, *, host: str = "127.0.0.1", port: int = 8090) -> None:
        self.dashboard = dashboard
        self.host = host
        self.port = port
        middleware = []
        if host in LOOPBACK_HOSTS:
            # Only pages addressed to this machine: another site's name pointed at 127.0.0.1
            # (DNS rebinding) must not read the mesh or send from it.
            middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=sorted(LOOPBACK_HOSTS)))
        routes = [Route("/", _root, methods=["GET"]), *dashboard_routes()]
        self.app = Starlette(routes=routes, middleware=middleware)
        self.app.state.dashboard = dashboard
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._socket: socket.socket | None = None
        self._serving: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host  # noqa: S104 - a URL, binds nothing
        return f"http://{host}:{self.port}{PREFIX}"

    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            where = f"{self.host}:{self.port}"
            raise PortUnavailableError(f"the dashboard cannot listen on {where}: {exc}; choose another --port") from exc
        sock.listen(64)
        sock.setblocking(False)
        self._socket = sock
        self.port = int(sock.getsockname()[1])
        self._serving = asyncio.get_running_loop().create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._serving.done():
                self._serving.result()
            await asyncio.sleep(0.01)

    async def stop(self) -> None:
        self._server.should_exit = True
        await self.dashboard.close()  # ends the open event streams
        if self._serving is not None:
            await self._serving
        if self._socket is not None:
            self._socket.close()
