"""The gateway's observability at the HTTP edge: the request span, ``/metrics``, refusals counted.

- :class:`TracingMiddleware` (outermost, only when tracing is on as the app is built): a server
  span per request, a child of the request's own ``traceparent`` header when it has one; the
  calls the request makes to the mesh are its children (:mod:`mesh.telemetry.tracing`).
- :func:`metrics_endpoint`: ``GET /metrics``, the process's Prometheus text
  (:mod:`mesh.telemetry.exposition`).
- :func:`count_refusal`: a request refused at the gateway, by reason, in ``mesh_bad_inputs_total``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mesh.telemetry import tracing
from mesh.telemetry.exposition import CONTENT_TYPE, render

if TYPE_CHECKING:
    from gateways.http.server import HttpGateway

__all__ = ["TracingMiddleware", "count_refusal", "metrics_endpoint"]


class TracingMiddleware:
    """A server span around every HTTP request (see the module doc)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not tracing.enabled:
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        headers = dict(scope["headers"])
        parent = headers.get(b"traceparent")
        span = tracing.start_span(
            f"{method} {path}",
            "server",
            traceparent=parent.decode("latin-1") if parent else None,
            attributes={"http.request.method": method, "url.path": path},
        )
        status = 0

        async def send_noting_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        error: BaseException | None = None
        try:
            with tracing.activated(span):
                await self.app(scope, receive, send_noting_status)
        except BaseException as exc:
            error = exc
            raise
        finally:
            span.update_name(f"{method} {_route_of(path, scope.get('path_params'))}")
            tracing.end_span(span, error, **{"http.response.status_code": status})


def _route_of(path: str, params: object) -> str:
    """``/a2a/agents/echo`` as ``/a2a/agents/{name}``: a span name that does not grow with the agents."""
    if isinstance(params, dict):
        for name, value in params.items():
            path = path.replace(f"/{value}", f"/{{{name}}}", 1)
    return path


async def metrics_endpoint(request: Request) -> Response:
    return Response(render(), media_type=CONTENT_TYPE)


def count_refusal(request: Request, reason: str) -> None:
    """Count a request the gateway refused, by ``reason`` (the error's type)."""
    gateway: HttpGateway | None = getattr(request.app.state, "gateway", None)
    if gateway is not None:
        gateway.runtime.metrics.refused(reason)
