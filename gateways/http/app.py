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
``POST /a2a/emqx/{org}/{unit}/{agent}``     A2A JSON-RPC to an EMQX profile agent
                                            (``org/unit/agent`` in ``mesh agents``)
``/ui``                                    the live dashboard (:mod:`gateways.http.dashboard`),
                                            behind the authentication
``/chat``                                   the chat for people (:mod:`gateways.http.chat`)
``/signin``, ``/signout``                   browser sign-in: a session cookie
                                            (:mod:`gateways.http.signin`); with
                                            ``auth.oidc`` ``/signin/oidc`` too
                                            (:mod:`gateways.http.oidc`)
``/a2a/agents/{name}/rest/...``             A2A 1.0 HTTP+JSON to that agent
                                            (:mod:`gateways.http.rest`); ``/a2a/rest/...``
                                            for the default agent
``GET /a2a/artifacts/{ctx}/{name}``         an artifact's bytes (:mod:`gateways.http.artifacts`),
                                            for its owner or by a signed link
``GET /metrics``                            Prometheus metrics of the process
                                            (:mod:`gateways.http.observability`)
==========================================  ==============================================

Every route answers with and without a trailing slash. Both bindings go through
:func:`gateways.http.serving.serve_call`.

Every request is rate limited (``X-RateLimit-*`` headers on every answer); the JSON-RPC and
agent-listing routes need the configured authentication; cards and health are public, as
A2A discovery expects. These protections are middleware (:mod:`gateways.http.edge`); the
endpoints read the mesh through the runtime's facade (``agents()``, ``agent(name)``...).
JSON-RPC errors are answered with HTTP 200 (A2A's convention), edge refusals with their HTTP
status (401, 413, 429...).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateways.http.artifacts import artifact_routes
from gateways.http.auth import Authenticator
from gateways.http.card_responses import CardResponses
from gateways.http.cards import card_version, http_card
from gateways.http.chat import RequirePageCaller, chat_routes
from gateways.http.dashboard import dashboard_routes
from gateways.http.edge import (
    EXCEPTION_HANDLERS,
    Caller,
    RequireCaller,
    app_middleware,
    private_route_middleware,
    version_asked,
)
from gateways.http.limits import ConcurrencyLimits
from gateways.http.observability import TracingMiddleware, metrics_endpoint
from gateways.http.protection import agent_not_found
from gateways.http.rest import rest_routes
from gateways.http.rpc import parse_call
from gateways.http.serving import JSON_RPC, read_body, serve_call
from gateways.http.sessions import SessionStore
from gateways.http.signin import signin_routes
from gateways.http.streams import OpenStreams
from mesh.discovery.registry import Entry
from mesh.telemetry import tracing

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
        Route("/a2a/emqx/{org}/{unit}/{agent}", _jsonrpc_profile, methods=["POST"], middleware=private),
        Route("/a2a", _jsonrpc, methods=["POST"], middleware=private),
    ]
    if "1.0" in settings.a2a_versions:  # the HTTP+JSON binding is A2A 1.0's
        no_body = private_route_middleware(concurrency.requests, settings.limits, json_body=False)
        for base in ("/a2a/agents/{name}/rest", "/a2a/rest"):
            routes += rest_routes(base, with_body=private, without_body=no_body)
    if settings.dashboard:
        routes += dashboard_routes([Middleware(RequireCaller)], page_middleware=[Middleware(RequirePageCaller)])
    if settings.chat:
        routes += chat_routes(private)
    if settings.dashboard or settings.chat:
        routes += signin_routes(oidc=settings.auth.oidc is not None)
    routes += artifact_routes()
    routes.append(Route("/metrics", metrics_endpoint, methods=["GET"], middleware=private))  # last: never on a hot path
    authenticator = Authenticator(settings.auth)
    sessions = SessionStore(settings.session_ttl_s)
    middleware = app_middleware(settings, authenticator, sessions)
    if tracing.enabled:  # when off, not even a layer to pass through
        middleware.insert(0, Middleware(TracingMiddleware))
    app = Starlette(
        routes=routes,
        middleware=middleware,
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.router.redirect_slashes = False  # EdgeEntry serves both forms instead
    app.state.gateway = gateway
    app.state.concurrency = concurrency
    app.state.streams = OpenStreams()
    trust = gateway.runtime.trust
    signing_key = trust.signing_key if trust is not None else None
    app.state.cards = CardResponses(settings.card_max_age_s, signing_key=signing_key)  # signed under trust
    app.state.dashboard = gateway.dashboard
    app.state.authenticator = authenticator
    app.state.sessions = sessions
    app.state.oidc = None
    if settings.auth.oidc is not None:  # httpx loads only then
        from gateways.http.oidc import OidcClient

        app.state.oidc = OidcClient(settings.auth.oidc)
    return app


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
    """The card of the A2A version the client asks for (:func:`~gateways.http.cards.card_version`)."""
    entry = _entry_of(gateway, name)
    settings = gateway.settings
    version = card_version(version_asked(request), request.url.path, settings.a2a_versions)
    card = http_card(entry.card, url, settings.auth, settings.a2a_versions, version=version, grpc_url=gateway.grpc_url)
    responses: CardResponses = request.app.state.cards
    return responses.respond(request, card, first_seen=entry.first_seen, variant=version)


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


async def _jsonrpc_profile(request: Request) -> Response:
    """JSON-RPC to an EMQX profile agent: its name is ``org/unit/agent`` (mesh.profile.requester)."""
    params = request.path_params
    params["name"] = f"{params['org']}/{params['unit']}/{params['agent']}"
    return await _jsonrpc(request)


async def _jsonrpc(request: Request) -> Response:
    body = await read_body(request, _gateway(request).settings.read_timeout_s)
    return await serve_call(request, lambda: parse_call(body, version_asked(request)), JSON_RPC)
