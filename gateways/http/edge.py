"""The edge protections of the HTTP app as Starlette middleware and an authentication backend.

The layers a request passes, outermost first::

    CORSMiddleware            when ``cors.allow_origins`` is set: refusals carry CORS headers too
    EdgeEntry                 ``/a2a/`` is ``/a2a`` (every route answers both ways, never a
                              redirect); CallerBackend: who is calling (``request.user``),
                              refusing nobody
    RateLimitMiddleware       a token bucket per caller: 429, and X-RateLimit-* on every answer
    Router
      private routes          PrivateRoute: 401 (a refused caller), 415 (a body that is not
                              JSON), 429 (the caller's requests in flight), 413 (the body's
                              size), in that order; the dashboard's routes: RequireCaller
      endpoint

Each request passes every layer, so the checks of one level are one pure-ASGI layer
(:class:`EdgeEntry`, :class:`PrivateRoute`) rather than one layer per check; each check is one
function below, used by that layer.
    an EdgeError raised anywhere under the router is answered by :func:`edge_refusal`

The backend never refuses by itself: cards and health are public (A2A discovery needs them),
so a wrong credential must not keep a caller from them. It hands the private routes the
refusal to answer (401) instead, and the rate limiter counts a refused caller against its
address: guessing credentials costs requests too.

Nothing waits: every limit is checked synchronously and a full one refuses at once.
"""

from __future__ import annotations

from typing import Any

from starlette.authentication import AuthCredentials, AuthenticationBackend, BaseUser, UnauthenticatedUser
from starlette.datastructures import Headers, MutableHeaders
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateways.http.auth import ANONYMOUS, Authenticator, Principal
from gateways.http.limits import BodyLimits, RateLimiter, Slot, Slots, check_body_size
from gateways.http.observability import count_refusal
from gateways.http.protection import JSON_MEDIA_TYPES, EdgeConfig, EdgeError, get_header, unsupported_media_type
from gateways.http.rest_errors import is_rest_path, rest_error
from gateways.http.rpc import Version, error_response
from gateways.http.sessions import CSRF_HEADER, SAFE_METHODS, SESSION_COOKIE, SessionStore, csrf_refused, same_token

__all__ = [
    "EXCEPTION_HANDLERS",
    "VERSION_HEADER",
    "Caller",
    "CallerBackend",
    "EdgeEntry",
    "PrivateRoute",
    "RateLimitMiddleware",
    "RefusedCaller",
    "RequireCaller",
    "app_middleware",
    "asked_version",
    "caller_of",
    "client_key",
    "edge_refusal",
    "private_route_middleware",
    "version_asked",
]

VERSION_HEADER = "A2A-Version"


# ---------------------------------------------------------------- authentication


class Caller(BaseUser):
    """An authenticated caller (``request.user``); ``ANONYMOUS`` when authentication is off."""

    def __init__(self, principal: Principal) -> None:
        self.principal = principal

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def display_name(self) -> str:
        return self.principal.name

    @property
    def identity(self) -> str:
        return self.principal.name


class RefusedCaller(UnauthenticatedUser):
    """A caller whose credentials were refused; ``refusal`` is the 401 a private route answers."""

    def __init__(self, refusal: EdgeError) -> None:
        self.refusal = refusal


class CallerBackend(AuthenticationBackend):
    """Starlette's authentication backend over :class:`~gateways.http.auth.Authenticator`, and
    over the browser sessions of :mod:`gateways.http.sessions` for a request that sends no
    credential header but a session cookie (a state-changing one then needs its CSRF token)."""

    def __init__(self, authenticator: Authenticator, sessions: SessionStore | None = None) -> None:
        self.authenticator = authenticator
        self.sessions = sessions
        # Authentication off: every caller is the same, no header needs reading.
        self._anonymous = (AuthCredentials(["authenticated"]), Caller(ANONYMOUS))
        self._off = authenticator.config.mode == "none"

    async def authenticate_scope(self, scope: Scope) -> tuple[AuthCredentials, BaseUser]:
        """:meth:`authenticate` of a bare ASGI scope, without building a connection when
        authentication is off (nothing to read)."""
        if self._off:
            return self._anonymous
        return await self.authenticate(HTTPConnection(scope))

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, BaseUser]:
        if self._off:
            return self._anonymous
        try:
            principal = self._session_principal(conn)
            if principal is None:
                principal = self.authenticator.authenticate(conn.headers)
        except EdgeError as refusal:
            return AuthCredentials(), RefusedCaller(_for_browser(conn, refusal))
        return AuthCredentials(["authenticated"]), Caller(principal)

    def _session_principal(self, conn: HTTPConnection) -> Principal | None:
        """The principal of the request's session cookie, when it sends no credential header
        (a header always wins); :func:`csrf_refused` for a state-changing one without its token."""
        if self.sessions is None or SESSION_COOKIE not in conn.cookies:
            return None
        headers = conn.headers
        if "authorization" in headers or "x-api-key" in headers:
            return None
        session = self.sessions.get(conn.cookies[SESSION_COOKIE])
        if session is None:
            return None
        if conn.scope.get("method", "GET") not in SAFE_METHODS and not same_token(
            headers.get(CSRF_HEADER), session.csrf
        ):
            raise csrf_refused()
        return session.principal


def _for_browser(conn: HTTPConnection, refusal: EdgeError) -> EdgeError:
    """A browser's request that sent no credential header is pointed at the sign-in page rather
    than challenged with Basic, which would pop up the browser's own password dialog (browsers
    send ``Sec-Fetch-Mode`` on every request; HTTP clients don't, and keep their challenge)."""
    headers = conn.headers
    if (
        "sec-fetch-mode" not in headers
        or "authorization" in headers
        or "www-authenticate" not in {k.lower() for k in refusal.headers}
    ):
        return refusal
    realm = conn.app.state.authenticator.config.realm if hasattr(conn.app.state, "authenticator") else "a2a"
    return EdgeError(
        str(refusal.error.message),
        code=refusal.code,
        error_type=refusal.error_type_name,
        http_status=refusal.http_status,
        details={k: v for k, v in (refusal.data or {}).items() if k != "errorType"},
        headers={"WWW-Authenticate": f'Session realm="{realm}", signin="/signin"'},
    )


def caller_of(request: HTTPConnection) -> Principal:
    """The principal of a request that passed :class:`RequireCaller`."""
    user = request.user
    if not isinstance(user, Caller):  # pragma: no cover - a private route without RequireCaller
        raise TypeError(f"{request.url.path} is not a private route: its user is {user!r}")
    return user.principal


def client_key(scope: Scope) -> str:
    """Whom limits count a request against: the principal's name, else the client's address."""
    user = scope.get("user")
    if isinstance(user, Caller) and user.principal.scheme != "none":
        return user.principal.name
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


# ---------------------------------------------------------------- refusals


def asked_version(request: HTTPConnection) -> Version:
    """The A2A version errors are written in when the request could not be read: the
    ``A2A-Version`` header or (A2A 1.0 allows it) query parameter; 1.x is 1.0, else 0.3."""
    header = version_asked(request)
    return "1.0" if (header or "").strip().startswith("1") else "0.3"


def version_asked(request: HTTPConnection) -> str | None:
    """The raw ``A2A-Version`` a client sent (header, else query parameter), if any."""
    return get_header(request.headers, VERSION_HEADER) or request.query_params.get(VERSION_HEADER)


async def edge_refusal(request: Request, exc: Exception) -> Response:
    """The answer to an :class:`EdgeError`: its JSON-RPC error, HTTP status and headers
    (Starlette's exception handler for it; async, so it runs in the loop, not a thread)."""
    if not isinstance(exc, EdgeError):  # pragma: no cover - registered for EdgeError only
        raise exc
    count_refusal(request, exc.error_type_name)
    if is_rest_path(request.url.path):  # the HTTP+JSON binding's own error shape
        return JSONResponse(rest_error(exc), status_code=exc.http_status, headers=dict(exc.headers))
    body = error_response(asked_version(request), exc.request_id, exc)
    return JSONResponse(body, status_code=exc.http_status, headers=dict(exc.headers))


# ---------------------------------------------------------------- app-level middleware


def _without_trailing_slash(scope: Scope) -> Scope:
    """``/a2a/`` routed as ``/a2a``: every route answers with and without a trailing slash.
    Starlette would answer a 307 redirect, which clients that build the RPC URL as ``{url}/``
    do not follow for a POST (A2A conformance kits among them)."""
    path = scope.get("path", "")
    if scope["type"] != "http" or len(path) <= 1 or not path.endswith("/"):
        return scope
    scope = dict(scope)
    scope["path"] = path.rstrip("/") or "/"
    raw_path = scope.get("raw_path")
    if raw_path:
        scope["raw_path"] = raw_path.rstrip(b"/") or b"/"
    return scope


class EdgeEntry:
    """The path without its trailing slash (:func:`_without_trailing_slash`) and Starlette's
    ``AuthenticationMiddleware`` over :class:`CallerBackend` in one layer: ``scope["auth"]`` and
    ``scope["user"]`` set; the backend never refuses, so neither does this."""

    def __init__(self, app: ASGIApp, backend: CallerBackend) -> None:
        self.app = app
        self.backend = backend

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            scope = _without_trailing_slash(scope)
            scope["auth"], scope["user"] = await self.backend.authenticate_scope(scope)
        await self.app(scope, receive, send)


class RateLimitMiddleware:
    """Every request takes a token of its caller's bucket: refused with 429 when empty; every
    answer carries the caller's ``X-RateLimit-*`` headers (SSE streams too: pure ASGI)."""

    def __init__(self, app: ASGIApp, limiter: RateLimiter) -> None:
        self.app = app
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        decision = self.limiter.check(client_key(scope))
        if not decision.allowed:
            try:
                decision.raise_if_refused()
            except EdgeError as exc:
                response = await edge_refusal(Request(scope, receive), exc)
                await response(scope, receive, send)
                return
        headers = decision.headers()

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message).update(headers)
            await send(message)

        await self.app(scope, receive, send_with_headers)


def app_middleware(
    config: EdgeConfig, authenticator: Authenticator, sessions: SessionStore | None = None
) -> list[Middleware]:
    """CORS (when configured), path normalization with authentication, and rate limiting,
    outermost first (CORS ignores the path, so normalizing it inside CORS changes nothing)."""
    middleware = []
    if config.cors.allow_origins:
        options = config.cors.model_dump()
        # A2A 1.0 clients must send A2A-Version: a browser sends only the headers a preflight allowed.
        if not {VERSION_HEADER.lower(), "*"} & {h.lower() for h in options["allow_headers"]}:
            options["allow_headers"].append(VERSION_HEADER)
        middleware.append(Middleware(CORSMiddleware, **options))
    middleware.append(Middleware(EdgeEntry, backend=CallerBackend(authenticator, sessions)))
    if config.rate_limit is not None:
        middleware.append(Middleware(RateLimitMiddleware, limiter=RateLimiter(config.rate_limit)))
    return middleware


# ---------------------------------------------------------------- private-route middleware


def _require_caller(scope: Scope) -> None:
    """A caller whose credentials were refused gets the 401 (-32004)."""
    user = scope.get("user")
    if isinstance(user, RefusedCaller):
        raise user.refusal
    if not isinstance(user, Caller):  # pragma: no cover - the app always authenticates
        raise TypeError("a private route needs EdgeEntry (CallerBackend authentication) around the router")


def _require_json_body(scope: Scope, headers: Headers) -> None:
    """A POST whose body is not declared JSON (``application/json`` or ``application/a2a+json``,
    any parameters) is refused (415) before it is read."""
    if scope["method"] == "POST":
        declared = headers.get("content-type")
        if (declared or "").partition(";")[0].strip().lower() not in JSON_MEDIA_TYPES:
            raise unsupported_media_type(declared)


def _size_limited(receive: Receive, headers: Headers, limits: BodyLimits) -> Receive:
    """``receive`` refusing (413) a body over ``max_message_bytes`` as soon as its declared
    length or the bytes read so far say so: nothing larger is ever buffered."""
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit():
        check_body_size(int(declared), limits)
    size = 0

    async def receive_limited() -> Message:
        nonlocal size
        message = await receive()
        if message["type"] == "http.request":
            size += len(message.get("body", b""))
            check_body_size(size, limits)
        return message

    return receive_limited


def _releasing(send: Send, slot: Slot) -> Send:
    """``send`` giving ``slot`` back just before the last body message goes out: a client that
    saw the end may send again at once (the ``with`` around the exchange releases it otherwise)."""

    async def send_releasing(message: Message) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body", False):
            slot.release()
        await send(message)

    return send_releasing


class RequireCaller:
    """Route middleware: a refused caller gets the 401 (routes without the other checks)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        _require_caller(scope)
        await self.app(scope, receive, send)


class PrivateRoute:
    """Route middleware: the caller (401), a JSON body (415, when ``json_body``), a request slot
    of the caller (429, -32051; held for the whole exchange, an SSE stream included) and the
    body's size (413), in one layer, checked in that order."""

    def __init__(self, app: ASGIApp, slots: Slots, limits: BodyLimits, json_body: bool = True) -> None:
        self.app = app
        self.slots = slots
        self.limits = limits
        self.json_body = json_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        _require_caller(scope)
        headers = Headers(scope=scope)
        if self.json_body:
            _require_json_body(scope, headers)
        with self.slots.acquire(client_key(scope)) as slot:
            await self.app(scope, _size_limited(receive, headers, self.limits), _releasing(send, slot))


def private_route_middleware(slots: Slots, limits: BodyLimits, *, json_body: bool = True) -> list[Middleware]:
    """The middleware of a route that needs authentication (``json_body``: its POST reads a
    JSON body, whose content type is checked)."""
    return [Middleware(PrivateRoute, slots=slots, limits=limits, json_body=json_body)]


EXCEPTION_HANDLERS: dict[Any, Any] = {EdgeError: edge_refusal}
