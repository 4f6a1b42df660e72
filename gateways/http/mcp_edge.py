"""Serving ``mesh mcp --http PORT``: the MCP SDK's streamable HTTP app on uvicorn, behind the gateway's auth.

The web framework stays in this package (tests/test_layering.py): ``gateways.mcp`` hands over
the SDK's ASGI app and an :class:`~gateways.http.protection.AuthConfig` (an HTTP gateway's
``auth:`` block, when configured), and this module serves it. Every HTTP request is checked by
the same :class:`~gateways.http.auth.Authenticator` as the A2A gateway's: a refused one gets a
401 with the scheme's ``WWW-Authenticate`` challenge and a JSON-RPC error body, before the MCP
app sees it; an accepted one carries the caller's name in the ASGI scope (``principal_key``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn

from gateways.http.auth import Authenticator
from gateways.http.protection import AuthConfig, EdgeError

__all__ = ["AuthenticatedApp", "serve_mcp_http"]

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


class AuthenticatedApp:
    """An ASGI app that lets through only the requests ``auth`` accepts."""

    def __init__(self, app: App, auth: AuthConfig, principal_key: str) -> None:
        self.app = app
        self.authenticator = Authenticator(auth)
        self.principal_key = principal_key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)  # lifespan
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or []}
        try:
            principal = self.authenticator.authenticate(headers)
        except EdgeError as exc:
            body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": exc.code, "message": str(exc)}}).encode()
            response_headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            if self.authenticator.challenge:
                response_headers.append((b"www-authenticate", self.authenticator.challenge.encode()))
            await send({"type": "http.response.start", "status": 401, "headers": response_headers})
            await send({"type": "http.response.body", "body": body})
            return
        scope[self.principal_key] = principal.name
        await self.app(scope, receive, send)


async def serve_mcp_http(
    app: App,
    *,
    host: str,
    port: int,
    auth: AuthConfig | None,
    principal_key: str,
    on_ready: Callable[[int], None] | None = None,
) -> None:
    """Serve ``app`` on ``host:port`` until cancelled (or a signal stops uvicorn); ``on_ready(port)`` once bound."""
    served: App = AuthenticatedApp(app, auth, principal_key) if auth is not None and auth.mode != "none" else app
    # log_config=None: uvicorn keeps to the process's logging (stderr), and no access log on stdout.
    config = uvicorn.Config(served, host=host, port=port, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve())
    try:
        while not server.started:
            if task.done():
                await task  # bind failure: raises (or uvicorn exited)
                raise OSError(f"cannot serve MCP on {host}:{port}: the HTTP server stopped at start")
            await asyncio.sleep(0.02)  # uvicorn has no started event
        bound = port
        for listener in server.servers:
            for sock in listener.sockets:
                bound = int(sock.getsockname()[1])
        if on_ready is not None:
            on_ready(bound)
        await task
    finally:
        if not task.done():
            server.should_exit = True
            await asyncio.wait({task}, timeout=5)
