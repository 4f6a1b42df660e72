"""A fake OpenID Connect provider on loopback (Starlette under uvicorn), scripted by the test.

It serves discovery, its JWKS, an authorize endpoint that consents at once (a 302 back to the
``redirect_uri`` with a code) and a token endpoint that checks the client secret, the code (once
only) and its PKCE verifier, then issues an ID token signed with its EC key via joserfc. The
``next_*`` attributes spoil the next ID token, to test the gateway's checks.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import uvicorn
from joserfc import jwt
from joserfc.jwk import ECKey, KeySet
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

CLIENT_ID = "mesh-gateway"
CLIENT_SECRET = "oidc-client-secret-0123"


@dataclass
class _Code:
    nonce: str
    challenge: str
    redirect_uri: str


class FakeProvider:
    """``async with FakeProvider() as provider:`` then configure the gateway with ``provider.issuer``."""

    def __init__(self) -> None:
        self.key = ECKey.generate_key("P-256", parameters={"kid": "k1"}, private=True)
        self.jwks_fetches = 0
        self.user: dict[str, Any] = {"preferred_username": "carol", "email": "carol@example.com"}
        self.next_audience: str | None = None
        self.next_nonce: str | None = None
        self.next_exp_delta = 300
        self.next_signing_key: ECKey | None = None
        self.token_requests: list[dict[str, str]] = []
        self._codes: dict[str, _Code] = {}
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self.issuer = f"http://127.0.0.1:{self.port}/realms/test"
        app = Starlette(
            routes=[
                Route("/realms/test/.well-known/openid-configuration", self._discovery),
                Route("/realms/test/certs", self._jwks),
                Route("/realms/test/auth", self._authorize),
                Route("/realms/test/token", self._token, methods=["POST"]),
            ]
        )
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> FakeProvider:
        # Listening before uvicorn serves: a connection made meanwhile waits in the backlog.
        self._sock.listen()
        self._task = asyncio.create_task(self._server.serve(sockets=[self._sock]))
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.should_exit = True
        assert self._task is not None
        await self._task
        self._sock.close()

    async def _discovery(self, request: Request) -> Response:
        base = self.issuer
        return JSONResponse(
            {
                "issuer": base,
                "authorization_endpoint": f"{base}/auth",
                "token_endpoint": f"{base}/token",
                "jwks_uri": f"{base}/certs",
                "response_types_supported": ["code"],
                "id_token_signing_alg_values_supported": ["ES256"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["client_secret_basic"],
            }
        )

    def rotate(self) -> None:
        """A new signing key under a new key id; the old one is no longer published."""
        self.key = ECKey.generate_key("P-256", parameters={"kid": f"k{self.jwks_fetches + 2}"}, private=True)

    async def _jwks(self, request: Request) -> Response:
        self.jwks_fetches += 1
        return JSONResponse(KeySet([self.key]).as_dict(private=False))

    async def _authorize(self, request: Request) -> Response:
        q = request.query_params
        if (
            q.get("response_type") != "code"
            or q.get("client_id") != CLIENT_ID
            or q.get("code_challenge_method") != "S256"
            or "openid" not in q.get("scope", "").split()
        ):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = secrets.token_urlsafe(16)
        self._codes[code] = _Code(q["nonce"], q["code_challenge"], q["redirect_uri"])
        return RedirectResponse(f"{q['redirect_uri']}?{urlencode({'code': code, 'state': q['state']})}", 302)

    async def _token(self, request: Request) -> Response:
        form = {k: str(v) for k, v in (await request.form()).items()}
        self.token_requests.append(form)
        expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
        if request.headers.get("authorization") != expected:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        code = self._codes.pop(form.get("code", ""), None)  # a code is used once
        verifier = form.get("code_verifier", "").encode()
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
        if code is None or code.challenge != challenge or code.redirect_uri != form.get("redirect_uri"):
            return JSONResponse({"error": "invalid_grant"}, status_code=400)
        now = int(time.time())
        claims = {
            "iss": self.issuer,
            "sub": "user-" + str(self.user.get("preferred_username")),
            "aud": self.next_audience or CLIENT_ID,
            "iat": now,
            "exp": now + self.next_exp_delta,
            "nonce": self.next_nonce or code.nonce,
            **self.user,
        }
        key = self.next_signing_key or self.key
        id_token = jwt.encode({"alg": "ES256", "kid": key.kid}, claims, key)
        return JSONResponse(
            {"access_token": "at-" + secrets.token_urlsafe(8), "token_type": "Bearer", "id_token": id_token}
        )
