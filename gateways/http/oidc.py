"""OpenID Connect sign-in for browsers: the authorization-code flow with PKCE (S256), ``state``
and ``nonce``, against the provider named by ``auth.oidc.issuer``.

::

    client = OidcClient(config)
    url, state = await client.begin(redirect_uri, next_path="/chat")   # 303 the browser to url
    principal, next_path = await client.finish(state, code, redirect_uri)  # OidcFailure if refused

The provider's endpoints come from ``{issuer}/.well-known/openid-configuration`` (its
``issuer`` must be the configured one, OIDC Discovery section 4.3); the discovery document and
the JWKS are cached for an hour, and the JWKS is fetched again once when an ID token names a
key it does not hold (key rotation). The ID token is checked with joserfc: signature against
the JWKS (asymmetric algorithms only, never ``none``), ``iss``, ``aud`` (and ``azp`` when there
are several audiences), ``exp``, ``iat`` and the ``nonce`` of this sign-in.

Bounded: a started sign-in lives ``pending_ttl_s`` and is used once; at most ``max_pending``
are kept (the oldest goes first); every call to the provider has ``timeout_s`` and its answer
is read up to 1 MB. Nothing here logs a code, a token or the client secret.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import httpx
from joserfc import jwt
from joserfc.errors import BadSignatureError, ExpiredTokenError, JoseError
from joserfc.jwk import KeySet

from gateways.http.auth import Principal
from gateways.http.protection import OidcConfig

__all__ = ["OidcClient", "OidcFailure"]

log = logging.getLogger(__name__)

CACHE_S = 3600.0
MAX_ANSWER_BYTES = 1_000_000
MAX_NAME_CHARS = 256
#: Asymmetric signatures only: an HMAC key would be the client secret, ``none`` no signature.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")


class OidcFailure(Exception):
    """A sign-in that cannot finish: ``what`` failed, ``fix`` says what to do, ``status`` is the
    HTTP status of the page that says so."""

    def __init__(self, what: str, fix: str, status: int = 400) -> None:
        super().__init__(what)
        self.what = what
        self.fix = fix
        self.status = status


@dataclass(slots=True)
class _Pending:
    verifier: str
    nonce: str
    next_path: str
    expires: float


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _challenge(verifier: str) -> str:
    return _b64url(hashlib.sha256(verifier.encode()).digest())


class OidcClient:
    """The gateway's side of OIDC sign-in with one provider."""

    def __init__(self, config: OidcConfig) -> None:
        self.config = config
        self._pending: OrderedDict[str, _Pending] = OrderedDict()
        self._discovery: tuple[float, dict[str, Any]] | None = None
        self._jwks: tuple[float, KeySet] | None = None

    def __len__(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------ the flow

    async def begin(self, redirect_uri: str, next_path: str) -> tuple[str, str]:
        """The provider's authorization URL for a new sign-in, and its ``state`` (the browser
        keeps it in a cookie, so the callback is this browser's)."""
        discovery = await self._discover()
        self._purge()
        while len(self._pending) >= self.config.max_pending:
            self._pending.popitem(last=False)
        state, nonce, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(48)
        self._pending[state] = _Pending(verifier, nonce, next_path, time.monotonic() + self.config.pending_ttl_s)
        query = urlencode(
            {
                "response_type": "code",
                "client_id": self.config.client_id,
                "redirect_uri": redirect_uri,
                "scope": " ".join(self.config.scopes),
                "state": state,
                "nonce": nonce,
                "code_challenge": _challenge(verifier),
                "code_challenge_method": "S256",
            }
        )
        endpoint = str(discovery["authorization_endpoint"])
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}", state

    async def finish(self, state: str, code: str, redirect_uri: str) -> tuple[Principal, str]:
        """The principal the provider vouches for, and the page to go on to."""
        pending = self._pending.pop(state, None)  # once only, whatever happens next
        if pending is None or pending.expires <= time.monotonic():
            raise OidcFailure(
                "this sign-in is unknown or expired (its state does not match one this gateway started)",
                f"start again from the sign-in page and finish within {self.config.pending_ttl_s:g} s",
            )
        discovery = await self._discover()
        id_token = await self._exchange(discovery, code, redirect_uri, pending.verifier)
        claims = await self._verify(id_token, pending.nonce)
        return Principal(self._user(claims), "oidc"), pending.next_path

    # ------------------------------------------------------------ the provider

    async def _call(self, method: str, url: str, what: str, **kwargs: Any) -> tuple[int, bytes]:
        """An HTTP call to the provider: its status and body, read up to ``MAX_ANSWER_BYTES``."""
        try:
            async with (
                httpx.AsyncClient(timeout=self.config.timeout_s) as http,
                http.stream(method, url, headers={"Accept": "application/json"}, **kwargs) as answer,
            ):
                body = b""
                async for chunk in answer.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_ANSWER_BYTES:
                        return answer.status_code, b""
                return answer.status_code, body
        except httpx.HTTPError as error:
            raise self._unreachable(what, error) from None

    async def _get_json(self, url: str, what: str) -> dict[str, Any]:
        return self._json(*await self._call("GET", url, what), what)

    def _unreachable(self, what: str, error: Exception) -> OidcFailure:
        log.warning("OIDC: %s at %s failed: %s", what, self.config.issuer, type(error).__name__)
        return OidcFailure(
            f"the identity provider {self.config.issuer} could not be reached for its {what} ({type(error).__name__})",
            "check that the gateway can reach the provider and that auth.oidc.issuer is right, then try again",
            status=502,
        )

    def _json(self, status: int, body: bytes, what: str) -> dict[str, Any]:
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if status != 200 or not isinstance(data, dict):
            log.warning("OIDC: %s from %s: HTTP %s", what, self.config.issuer, status)
            raise OidcFailure(
                f"the identity provider {self.config.issuer} answered its {what} with HTTP {status} and no usable JSON",
                "check auth.oidc.issuer (the provider's issuer URL, e.g. https://id.example.com/realms/main)",
                status=502,
            )
        return data

    async def _discover(self) -> dict[str, Any]:
        now = time.monotonic()
        if self._discovery is not None and self._discovery[0] > now:
            return self._discovery[1]
        url = self.config.issuer.rstrip("/") + "/.well-known/openid-configuration"
        document = await self._get_json(url, "discovery document")
        endpoints = ("authorization_endpoint", "token_endpoint", "jwks_uri")
        missing = [k for k in endpoints if not isinstance(document.get(k), str)]
        # The secret and the code travel to these: TLS unless the issuer itself is a loopback http one.
        plain = self.config.issuer.startswith("http:")
        insecure = [k for k in endpoints if k not in missing and not _secure_url(document[k], plain)]
        if document.get("issuer") != self.config.issuer or missing or insecure:
            problem = (
                f"lacks {', '.join(missing)}"
                if missing
                else f"has non-https {', '.join(insecure)}"
                if insecure
                else f"names issuer {document.get('issuer')!r}"
            )
            raise OidcFailure(
                f"the discovery document of {self.config.issuer} {problem}",
                "set auth.oidc.issuer to exactly the issuer the provider announces",
                status=502,
            )
        self._discovery = (now + CACHE_S, document)
        return document

    async def _exchange(self, discovery: dict[str, Any], code: str, redirect_uri: str, verifier: str) -> str:
        form = {"grant_type": "authorization_code", "code": code, "redirect_uri": redirect_uri}
        form["code_verifier"] = verifier
        auth: tuple[str, str] | None = None
        secret = self.config.client_secret()
        methods = discovery.get("token_endpoint_auth_methods_supported") or ["client_secret_basic"]
        if secret is not None and "client_secret_basic" in methods:
            auth = (self.config.client_id, secret)
        else:
            form["client_id"] = self.config.client_id
            if secret is not None:
                form["client_secret"] = secret
        extra: dict[str, Any] = {"data": form} if auth is None else {"data": form, "auth": auth}
        status, body = await self._call("POST", str(discovery["token_endpoint"]), "token endpoint", **extra)
        if status != 200:
            reason = _oauth_error(status, body)
            log.warning("OIDC: the token endpoint refused the code: %s", reason)
            raise OidcFailure(
                f"the identity provider refused to exchange the sign-in code ({reason})",
                "start again from the sign-in page (a code is used once); if it persists, check "
                "auth.oidc.client_id, the client secret and the redirect URI registered at the provider",
                status=401,
            )
        token = self._json(status, body, "token answer").get("id_token")
        if not isinstance(token, str) or not token:
            raise OidcFailure(
                "the identity provider's token answer holds no ID token",
                "make sure auth.oidc.scopes includes 'openid' and the client is an OpenID Connect client",
                status=502,
            )
        return token

    async def _keys(self, *, refresh: bool = False) -> KeySet:
        now = time.monotonic()
        if self._jwks is not None and self._jwks[0] > now and not refresh:
            return self._jwks[1]
        discovery = await self._discover()
        document = await self._get_json(str(discovery["jwks_uri"]), "signing keys (JWKS)")
        try:
            keys = KeySet.import_key_set(document)  # type: ignore[arg-type]
        except (JoseError, ValueError, TypeError, KeyError):
            raise OidcFailure(
                f"the signing keys (JWKS) of {self.config.issuer} could not be read",
                "check the provider's jwks_uri",
                status=502,
            ) from None
        self._jwks = (now + CACHE_S, keys)
        return keys

    # ------------------------------------------------------------ the ID token

    async def _verify(self, id_token: str, nonce: str) -> dict[str, Any]:
        kid = _kid(id_token)
        keys = await self._keys()
        if kid is not None and not any(key.kid == kid for key in keys.keys):
            keys = await self._keys(refresh=True)  # the provider rotated its keys
        try:
            token = jwt.decode(id_token, keys, algorithms=list(ALGORITHMS))
        except BadSignatureError:
            raise _refused("its signature does not match the provider's published keys") from None
        except JoseError as error:
            raise _refused(f"it could not be verified ({type(error).__name__})") from None
        claims = dict(token.claims)
        registry = jwt.JWTClaimsRegistry(
            leeway=self.config.leeway_s,
            iss={"essential": True, "value": self.config.issuer},
            aud={"essential": True, "value": self.config.client_id},
            exp={"essential": True},
            sub={"essential": True},
            nonce={"essential": True, "value": nonce},
        )
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise _refused("it has expired (check that the gateway's clock is right)") from None
        except JoseError as error:
            claim = getattr(error, "claim", "?")
            raise _refused(f"its {claim!r} claim is wrong or missing ({type(error).__name__})") from None
        audience = claims.get("aud")
        if isinstance(audience, list) and len(audience) > 1 and claims.get("azp") != self.config.client_id:
            raise _refused("it names several audiences but not this gateway as its authorized party (azp)")
        return claims

    def _user(self, claims: dict[str, Any]) -> str:
        name = claims.get(self.config.username_claim)
        if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME_CHARS or not name.isprintable():
            raise OidcFailure(
                f"the ID token has no usable {self.config.username_claim!r} claim to name the user",
                "set auth.oidc.username_claim to a claim the provider sends (e.g. preferred_username, email, "
                "sub), and ask for its scope in auth.oidc.scopes",
                status=401,
            )
        return name.strip()

    def _purge(self) -> None:
        now = time.monotonic()
        for state in [s for s, p in self._pending.items() if p.expires <= now]:
            del self._pending[state]


def _secure_url(url: str, plain_allowed: bool) -> bool:
    return url.startswith("https://") or (plain_allowed and url.startswith("http://"))


def _refused(why: str) -> OidcFailure:
    log.warning("OIDC: ID token refused: %s", why)
    return OidcFailure(
        f"the ID token from the identity provider was refused: {why}",
        "start again from the sign-in page; if it persists, check auth.oidc.issuer and auth.oidc.client_id "
        "against the provider's client settings",
        status=401,
    )


def _kid(token: str) -> str | None:
    """The ``kid`` of a compact JWS's header, unverified (only to pick the key)."""
    head = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except ValueError:
        return None
    kid = header.get("kid") if isinstance(header, dict) else None
    return kid if isinstance(kid, str) else None


def _oauth_error(status: int, body: bytes) -> str:
    """The OAuth ``error`` code of a refusal (RFC 6749 section 5.2), never its other fields."""
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        error = None
    code = error if isinstance(error, str) and error.isprintable() and len(error) <= 64 else None
    return f"HTTP {status}, {code}" if code else f"HTTP {status}"
