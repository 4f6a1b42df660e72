"""The sign-in page and sign-out (Starlette routes), over :mod:`gateways.http.sessions`.

==========================  ================================================================
``GET /signin``             the form for the gateway's authentication: an API key or a
                            bearer token to paste, or a user name and password
``POST /signin``            form fields ``csrf``, ``next`` and ``key`` (api_key, bearer) or
                            ``user`` and ``password`` (basic): a session cookie and a 303 to
                            ``next``; a wrong credential is the form again, 401
``GET /signin/oidc``        with ``auth.oidc``: starts an OpenID Connect sign-in, a 303 to the
                            provider (:mod:`gateways.http.oidc`); ``next`` as above
``GET /signin/oidc/callback``  where the provider sends the browser back (``code``, ``state``):
                            the same session as the form's, then on to ``next``; a failure is
                            the sign-in page saying what failed and what to do
``POST /signout``           ends the session (its CSRF token in ``X-CSRF-Token`` or the
                            form's ``csrf``), 303 to the sign-in page
==========================  ================================================================

With authentication off there is nobody to sign in: ``/signin`` goes straight to ``next`` and
every browser shares the anonymous user. Credentials are checked by the gateway's own
:class:`~gateways.http.auth.Authenticator`, so exactly what a header would be accepted is.
Guessing costs requests: the gateway's rate limit counts every POST.
"""

from __future__ import annotations

import base64
import secrets
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from gateways.http.auth import ANONYMOUS, API_KEY_HEADER, Authenticator, Principal
from gateways.http.protection import EdgeError
from gateways.http.sessions import CSRF_HEADER, SESSION_COOKIE, SIGNIN_COOKIE, Session, SessionStore, same_token

if TYPE_CHECKING:
    from starlette.datastructures import MutableHeaders

    # Imported where used: httpx and joserfc's JWT load only on a gateway with auth.oidc.
    from gateways.http.oidc import OidcClient, OidcFailure

__all__ = ["SIGNIN_PATH", "html_escape", "page_session", "set_session_cookie", "signin_routes", "signin_url"]

SIGNIN_PATH = "/signin"
OIDC_PATH = "/signin/oidc"
OIDC_CALLBACK = "/signin/oidc/callback"
#: The started OIDC sign-in's ``state``: SameSite=Lax, since the provider's redirect back is a
#: navigation from another site (a Strict cookie would not come with it).
OIDC_COOKIE = "mesh_oidc"
DEFAULT_NEXT = "/chat"
MAX_FORM_BYTES = 16_384
_PAGE = (resources.files("gateways.chat") / "static" / "signin.html").read_text(encoding="utf-8")

_PAGE_HEADERS = {
    "Cache-Control": "no-store",
    "Content-Security-Policy": "default-src 'none'; style-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
}

_FIELDS = {
    "api_key": '<label for="key">API key</label>'
    '<input id="key" name="key" type="password" autocomplete="current-password" required autofocus>',
    "bearer": '<label for="key">Access token</label>'
    '<input id="key" name="key" type="password" autocomplete="current-password" required autofocus>',
    "basic": '<label for="user">User name</label>'
    '<input id="user" name="user" autocomplete="username" required autofocus>'
    '<label for="password">Password</label>'
    '<input id="password" name="password" type="password" autocomplete="current-password" required>',
}


#: What the sign-in page says about where the credential comes from, unless ``auth.signin_hint`` says it.
_HINTS = {
    "api_key": "The gateway's operator gives out its keys (its config's auth.keys).",
    "bearer": "An access token the gateway accepts (its config's auth.tokens), from its operator.",
    "basic": "The user names and passwords are in the gateway's config (auth.users).",
}


def html_escape(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
    )


def _safe_next(value: str | None) -> str:
    """A path on this gateway only: an open redirect to another site is not offered."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return DEFAULT_NEXT
    return value


def signin_url(request: Request) -> str:
    """The sign-in page, coming back to this request's page after."""
    root = request.scope.get("root_path", "")
    return f"{root}{SIGNIN_PATH}?next={quote(request.url.path)}"


def _secure(request: Request) -> bool:
    public_url: str = getattr(request.app.state.gateway, "public_url", "")
    return request.url.scheme == "https" or public_url.startswith("https:")


def set_session_cookie(headers: MutableHeaders, request: Request, session_id: str, max_age: float) -> None:
    secure = "; Secure" if _secure(request) else ""
    headers.append(
        "Set-Cookie",
        f"{SESSION_COOKIE}={session_id}; Path=/; Max-Age={int(max_age)}; HttpOnly; SameSite=Strict{secure}",
    )


def _clear_cookie(headers: MutableHeaders, name: str) -> None:
    headers.append("Set-Cookie", f"{name}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict")


def page_session(request: Request) -> tuple[Session | None, str | None]:
    """The session of a page's request. With authentication off, a browser without one gets a
    new anonymous session (its id is returned too, for the cookie): the pages' CSRF token."""
    sessions: SessionStore = request.app.state.sessions
    session = sessions.get(request.cookies.get(SESSION_COOKIE))
    if session is None and _mode(request) == "none":
        session_id, session = sessions.create(ANONYMOUS)
        return session, session_id
    return session, None


def _mode(request: Request) -> str:
    authenticator: Authenticator = request.app.state.authenticator
    return authenticator.config.mode


def _oidc_button(request: Request, next_path: str) -> str:
    oidc: OidcClient | None = getattr(request.app.state, "oidc", None)
    if oidc is None:
        return ""
    root = request.scope.get("root_path", "")
    href = f"{root}{OIDC_PATH}?next={quote(next_path)}"
    return (
        f'<a class="signin-oidc" id="signin-oidc" href="{html_escape(href)}">'
        f"Sign in with {html_escape(oidc.config.label)}</a>"
        '<p class="signin-or">or</p>'
    )


def _form_page(request: Request, next_path: str, error: str = "", status: int = 200) -> Response:
    token = secrets.token_urlsafe(24)
    mode = _mode(request)
    authenticator: Authenticator = request.app.state.authenticator
    hint = authenticator.config.signin_hint or _HINTS[mode]
    fields = _FIELDS[mode] + f'<p class="signin-hint" id="signin-hint">{html_escape(hint)}</p>'
    root = request.scope.get("root_path", "")
    html = (
        _PAGE.replace("{{ACTION}}", html_escape(root + SIGNIN_PATH))
        .replace("{{FIELDS}}", fields)
        .replace("{{OIDC}}", _oidc_button(request, next_path))
        .replace("{{CSRF}}", token)
        .replace("{{NEXT}}", html_escape(next_path))
        .replace("{{ERROR}}", f'<p class="error" role="alert">{html_escape(error)}</p>' if error else "")
        .replace("{{STATIC}}", html_escape(root + "/chat/static/"))
    )
    response = Response(html, status_code=status, media_type="text/html", headers=_PAGE_HEADERS)
    secure = "; Secure" if _secure(request) else ""
    response.headers.append(
        "Set-Cookie", f"{SIGNIN_COOKIE}={token}; Path={root or '/'}; Max-Age=3600; HttpOnly; SameSite=Strict{secure}"
    )
    return response


async def _signin_page(request: Request) -> Response:
    next_path = _safe_next(request.query_params.get("next"))
    if _mode(request) == "none":
        return RedirectResponse(next_path, status_code=303)
    return _form_page(request, next_path)


async def _form(request: Request) -> dict[str, str]:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {}
    try:
        parsed = parse_qs(body.decode(), max_num_fields=10)
    except (UnicodeDecodeError, ValueError):
        return {}
    return {name: values[0] for name, values in parsed.items()}


def _credential_headers(mode: str, form: dict[str, str]) -> dict[str, str]:
    """The headers an HTTP client would send with what was typed into the form."""
    if mode == "api_key":
        return {API_KEY_HEADER: form.get("key", "").strip()}
    if mode == "bearer":
        return {"Authorization": f"Bearer {form.get('key', '').strip()}"}
    pair = f"{form.get('user', '')}:{form.get('password', '')}".encode()
    return {"Authorization": "Basic " + base64.b64encode(pair).decode()}


async def _signin(request: Request) -> Response:
    media_type = request.headers.get("content-type", "").partition(";")[0].strip().lower()
    if media_type != "application/x-www-form-urlencoded":
        return Response("send the sign-in form (application/x-www-form-urlencoded)", status_code=415)
    form = await _form(request)
    next_path = _safe_next(form.get("next"))
    if _mode(request) == "none":
        return RedirectResponse(next_path, status_code=303)
    if not same_token(form.get("csrf"), request.cookies.get(SIGNIN_COOKIE, "")) or not form.get("csrf"):
        return _form_page(request, next_path, "The sign-in form expired; please sign in again.", status=403)
    authenticator: Authenticator = request.app.state.authenticator
    try:
        principal: Principal = authenticator.authenticate(_credential_headers(authenticator.config.mode, form))
    except EdgeError:
        wrong = "Wrong user name or password." if authenticator.config.mode == "basic" else "That key is not valid."
        return _form_page(request, next_path, wrong, status=401)
    sessions: SessionStore = request.app.state.sessions
    session_id, _ = sessions.create(principal)
    response = RedirectResponse(next_path, status_code=303, headers={"Cache-Control": "no-store"})
    set_session_cookie(response.headers, request, session_id, sessions.ttl_s)
    _clear_cookie(response.headers, SIGNIN_COOKIE)
    return response


async def _signout(request: Request) -> Response:
    sessions: SessionStore = request.app.state.sessions
    session_id = request.cookies.get(SESSION_COOKIE)
    session = sessions.get(session_id)
    if session is not None:
        given = request.headers.get(CSRF_HEADER)
        if given is None and request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            given = (await _form(request)).get("csrf")
        if not same_token(given, session.csrf):
            return Response("sign out from the gateway's own page (its CSRF token is missing)", status_code=403)
        sessions.drop(session_id)
    root = request.scope.get("root_path", "")
    response = RedirectResponse(f"{root}{SIGNIN_PATH}", status_code=303, headers={"Cache-Control": "no-store"})
    _clear_cookie(response.headers, SESSION_COOKIE)
    return response


def _callback_url(request: Request) -> str:
    public_url: str = request.app.state.gateway.public_url
    return public_url.rstrip("/") + OIDC_CALLBACK


def _oidc_failed(request: Request, failure: OidcFailure, next_path: str = DEFAULT_NEXT) -> Response:
    response = _form_page(
        request,
        next_path,
        f"Sign-in with the identity provider failed: {failure.what}. {failure.fix[:1].upper()}{failure.fix[1:]}.",
        failure.status,
    )
    _clear_cookie(response.headers, OIDC_COOKIE)
    return response


async def _oidc_start(request: Request) -> Response:
    from gateways.http.oidc import OidcFailure

    oidc: OidcClient = request.app.state.oidc
    next_path = _safe_next(request.query_params.get("next"))
    try:
        url, state = await oidc.begin(_callback_url(request), next_path)
    except OidcFailure as failure:
        return _oidc_failed(request, failure, next_path)
    response = RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})
    secure = "; Secure" if _secure(request) else ""
    max_age = int(oidc.config.pending_ttl_s)
    root = request.scope.get("root_path", "")
    response.headers.append(
        "Set-Cookie",
        f"{OIDC_COOKIE}={state}; Path={root}{OIDC_PATH}; Max-Age={max_age}; HttpOnly; SameSite=Lax{secure}",
    )
    return response


async def _oidc_callback(request: Request) -> Response:
    from gateways.http.oidc import OidcFailure

    oidc: OidcClient = request.app.state.oidc
    params = request.query_params
    if "error" in params:  # the provider refused (the user said no, or the client is misconfigured)
        error = params["error"][:64] if params["error"].isprintable() else "?"
        failure = OidcFailure(
            f"the identity provider refused the sign-in ({error})",
            "try again; if it persists, check the client's settings at the provider (redirect URI "
            f"{_callback_url(request)}, allowed scopes)",
            status=401,
        )
        return _oidc_failed(request, failure)
    state, code = params.get("state", ""), params.get("code", "")
    if not state or not code or not same_token(state, request.cookies.get(OIDC_COOKIE, "")):
        failure = OidcFailure(
            "the sign-in's state does not match the one this browser started (an old, foreign or forged link)",
            "start again from the sign-in page, in this browser",
        )
        return _oidc_failed(request, failure)
    try:
        principal, next_path = await oidc.finish(state, code, _callback_url(request))
    except OidcFailure as failure:
        return _oidc_failed(request, failure)
    sessions: SessionStore = request.app.state.sessions
    session_id, _ = sessions.create(principal)
    # A page, not a 303: the browser arrived here from the provider's site, and a redirect would
    # carry on that cross-site navigation, which leaves the new SameSite=Strict cookie behind.
    target = html_escape(next_path)
    html = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="refresh" content="0;url={target}"><title>Signed in</title></head>'
        f'<body><p>Signed in as {html_escape(principal.name)}. <a id="continue" href="{target}">Continue</a></p>'
        "</body></html>"
    )
    response = Response(html, media_type="text/html", headers=_PAGE_HEADERS)
    set_session_cookie(response.headers, request, session_id, sessions.ttl_s)
    _clear_cookie(response.headers, OIDC_COOKIE)
    return response


def signin_routes(oidc: bool = False) -> list[Route]:
    """The sign-in routes; the app's state holds ``authenticator`` and ``sessions`` (and
    ``oidc``, an :class:`~gateways.http.oidc.OidcClient`, when ``oidc``)."""
    routes = [
        Route(SIGNIN_PATH, _signin_page, methods=["GET"]),
        Route(SIGNIN_PATH, _signin, methods=["POST"]),
        Route("/signout", _signout, methods=["POST"]),
    ]
    if oidc:
        routes += [
            Route(OIDC_PATH, _oidc_start, methods=["GET"]),
            Route(OIDC_CALLBACK, _oidc_callback, methods=["GET"]),
        ]
    return routes
