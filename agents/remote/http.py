"""The proxy's HTTP side: one ``httpx.AsyncClient`` per remote, handed to the a2a-sdk client.

It carries the remote's auth (an ``httpx.Auth``: API key header, bearer token from the
environment, or OAuth 2 client credentials fetched, cached and refreshed on expiry or on a 401),
its extra headers, timeout and TLS options, and refuses a redirect to a private address unless
``allow_private_redirects`` is set. Secrets never reach a log line: httpx does not log headers,
and :func:`~mesh.discovery.remote_cards.describe` names only the URL, the status and the fix.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import ssl
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Generator

import httpx

from agents.push import non_public_reason
from agents.remote.config import RemoteAuth, RemoteConfig
from mesh.discovery.remote_cards import RemoteError, describe

__all__ = ["OAuth2ClientCredentials", "RateLimit", "RemoteError", "describe", "http_client"]


#: Refresh a token this long before the expiry it announced.
TOKEN_MARGIN_S = 5.0


class ApiKey(httpx.Auth):
    """A fixed header (an API key, or ``Authorization: Bearer`` with a token); gRPC sends it as metadata."""

    def __init__(self, header: str, value: str) -> None:
        self.header, self.value = header, value

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers[self.header] = self.value
        yield request


class OAuth2ClientCredentials(httpx.Auth):
    """OAuth 2 client credentials: a token fetched from ``token_url``, reused until it expires,
    fetched again before then or when the remote answers 401 (a token revoked or expired early)."""

    def __init__(self, token_url: str, client_id: str, secret: str, scopes: list[str]) -> None:
        self.token_url, self._client_id, self._secret, self._scopes = token_url, client_id, secret, scopes
        self._token: str | None = None
        self._expires = 0.0
        self._lock = asyncio.Lock()
        self.fetched = 0  # tokens fetched so far (tests and metrics)

    def _token_request(self) -> httpx.Request:
        form = {"grant_type": "client_credentials"}
        if self._scopes:
            form["scope"] = " ".join(self._scopes)
        pair = base64.b64encode(f"{self._client_id}:{self._secret}".encode()).decode("ascii")
        return httpx.Request("POST", self.token_url, data=form, headers={"Authorization": f"Basic {pair}"})

    def _take(self, response: httpx.Response) -> str:
        if response.status_code != 200:
            raise RemoteError(
                f"token endpoint {self.token_url} answered HTTP {response.status_code}; "
                "check auth.client_id and the secret in auth.client_secret_env",
                status=response.status_code,
            )
        body = response.json()
        token = body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str):
            raise RemoteError(f"token endpoint {self.token_url} answered without an access_token; check token_url")
        self._token = token
        self._expires = time.monotonic() + float(body.get("expires_in") or 3600) - TOKEN_MARGIN_S
        self.fetched += 1
        return token

    async def bearer(self, http: httpx.AsyncClient, *, refused: str | None = None) -> str:
        """The token to send outside httpx (gRPC metadata), fetched with ``http`` when there is
        none yet, it expires, or it is ``refused`` (the one the remote just refused)."""
        async with self._lock:
            token = self._token
            if token is None or time.monotonic() >= self._expires or token == refused:
                token = self._take(await http.send(self._token_request(), auth=None))  # not through this flow
            return token

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        async with self._lock:
            if self._token is None or time.monotonic() >= self._expires:
                response = yield self._token_request()
                await response.aread()
                self._take(response)
        request.headers["Authorization"] = f"Bearer {self._token}"
        response = yield request
        if response.status_code == 401:  # expired early or revoked: one fresh token, one retry
            async with self._lock:
                token = yield self._token_request()
                await token.aread()
                self._take(token)
            request.headers["Authorization"] = f"Bearer {self._token}"
            yield request


def _auth(auth: RemoteAuth) -> httpx.Auth | None:
    if auth.type == "api_key":
        return ApiKey(auth.header, auth.secret(auth.key_env))
    if auth.type == "bearer":
        return ApiKey("Authorization", f"Bearer {auth.secret(auth.token_env)}")
    if auth.type == "oauth2":
        # RemoteAuth checked that token_url and client_id are there.
        return OAuth2ClientCredentials(
            auth.token_url or "", auth.client_id or "", auth.secret(auth.client_secret_env), auth.scopes
        )
    return None


def _tls(config: RemoteConfig) -> ssl.SSLContext | bool:
    tls = config.tls
    if not tls.verify:
        return False
    context = ssl.create_default_context(cafile=str(tls.ca_file) if tls.ca_file else None)
    if tls.cert_file is not None:
        context.load_cert_chain(str(tls.cert_file), str(tls.key_file) if tls.key_file else None)
    return context


def _redirect_guard(allow_private: bool) -> list[Callable[[httpx.Response], Awaitable[None]]]:
    async def check(response: httpx.Response) -> None:
        if allow_private or not response.has_redirect_location:
            return
        target = response.request.url.join(response.headers["location"])
        reason = await asyncio.to_thread(_private, target.host, target.port or 443)
        if reason:
            raise RemoteError(
                f"remote {response.request.url} redirects to {target.host}, a {reason} address; "
                "set allow_private_redirects: true for this remote to follow it",
                status=response.status_code,
            )

    return [check]


def _private(host: str, port: int) -> str | None:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return None  # httpx will fail to connect and say so
    for info in infos:
        with_reason = non_public_reason(str(info[4][0]))
        if with_reason is not None:
            return with_reason
    return None


def http_client(config: RemoteConfig) -> tuple[httpx.AsyncClient, httpx.Auth | None]:
    """The client every call to this remote goes through (and its auth, which tests inspect)."""
    auth = _auth(config.auth)
    client = httpx.AsyncClient(
        auth=auth,
        headers=config.headers,
        timeout=httpx.Timeout(config.timeout_s),
        verify=_tls(config),
        follow_redirects=True,
        event_hooks={"response": _redirect_guard(config.allow_private_redirects)},
    )
    return client, auth


class RateLimit:
    """At most ``rate_per_s`` calls per second (a token bucket of one second's burst)."""

    def __init__(self, rate_per_s: float | None) -> None:
        self.rate = rate_per_s
        self._tokens = rate_per_s or 0.0
        self._at = time.monotonic()
        self._lock = asyncio.Lock()

    async def take(self) -> None:
        if self.rate is None:
            return
        async with self._lock:
            now = time.monotonic()
            self._tokens = min(self.rate, self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens < 1:
                await asyncio.sleep((1 - self._tokens) / self.rate)
                self._tokens, self._at = 1.0, time.monotonic()
            self._tokens -= 1
