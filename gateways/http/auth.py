"""Who is calling: the JAF A2A authentication schemes (Bearer, X-API-Key, Basic) over plain headers.

An API key (mode ``api_key``) is taken from ``X-API-Key``, else from ``Authorization: Bearer``.

::

    authenticator = Authenticator(edge.auth)
    principal = authenticator.authenticate(request.headers)  # EdgeError 401 when refused
    log.info("request from %s", principal.name)

``authenticate`` takes any ``Mapping[str, str]`` of headers and finds names case-insensitively,
so the HTTP layer passes its request headers as they are. Secrets are compared as SHA-256
digests with :func:`hmac.compare_digest` against every configured secret, so neither the
position of the first wrong byte nor the secret's length nor which entry matched shows in
the timing. A principal's name is a configured label or a fingerprint, never the secret.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from .protection import AuthConfig, Credential, EdgeError, auth_required, get_header

API_KEY_HEADER = "X-API-Key"

Scheme = Literal["none", "bearer", "api_key", "basic", "oidc"]


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: ``name`` is safe to log and to use as a rate-limit key."""

    name: str
    scheme: Scheme


ANONYMOUS = Principal("anonymous", "none")


def fingerprint(secret: str, prefix: str) -> str:
    """A short stable name for a secret, ``<prefix>-<12 hex digits of its SHA-256>``."""
    return f"{prefix}-{hashlib.sha256(secret.encode()).hexdigest()[:12]}"


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode()).digest()


class Authenticator:
    """Checks a request's credentials against an :class:`AuthConfig`."""

    def __init__(self, config: AuthConfig) -> None:
        self.config = config
        realm = config.realm
        #: The WWW-Authenticate value sent with a 401 ("" when authentication is off).
        self.challenge = {
            "none": "",
            "bearer": f'Bearer realm="{realm}"',
            "api_key": f'ApiKey realm="{realm}", header="{API_KEY_HEADER}"',
            "basic": f'Basic realm="{realm}", charset="UTF-8"',
        }[config.mode]
        credentials = config.tokens if config.mode == "bearer" else config.keys
        prefix = "token" if config.mode == "bearer" else "key"
        self._secrets: list[tuple[bytes, str]] = [(_digest(_secret(c)), _name(c, prefix)) for c in credentials]
        self._users = {user: _digest(password.get_secret_value()) for user, password in config.users.items()}
        # Compared against when the user is unknown, so that takes as long as a wrong password.
        self._no_user = _digest("")

    def authenticate(self, headers: Mapping[str, str]) -> Principal:
        """The caller the headers identify; :class:`EdgeError` (-32004, HTTP 401) if none."""
        mode = self.config.mode
        if mode == "none":
            return ANONYMOUS
        if mode == "basic":
            return self._basic(get_header(headers, "Authorization"))
        if mode == "bearer":
            token = self._bearer_token(get_header(headers, "Authorization"))
            name = self._match(token)
            if name is None:
                raise self._refuse("the bearer token is not valid; check the token you were given", "invalid_token")
            return Principal(name, "bearer")
        key = get_header(headers, API_KEY_HEADER)
        if key is None or not key.strip():
            key = self._key_as_bearer(get_header(headers, "Authorization"))
        if key is None or not key.strip():
            hint = " (or as 'Authorization: Bearer <key>')"
            raise self._refuse(f"send your API key in the {API_KEY_HEADER} header{hint}")
        name = self._match(key.strip())
        if name is None:
            raise self._refuse("the API key is not valid; check the key you were given")
        return Principal(name, "api_key")

    @staticmethod
    def _key_as_bearer(value: str | None) -> str | None:
        """An API key sent as ``Authorization: Bearer <key>`` (clients that only know bearer tokens)."""
        if value is None:
            return None
        scheme, _, key = value.strip().partition(" ")
        return key.strip() if scheme.lower() == "bearer" else None

    def _bearer_token(self, value: str | None) -> str:
        if value is None:
            raise self._refuse("send 'Authorization: Bearer <token>'")
        scheme, _, token = value.strip().partition(" ")
        if scheme.lower() != "bearer":
            raise self._refuse(f"the Authorization header uses scheme {scheme!r}; send 'Authorization: Bearer <token>'")
        if not token.strip():
            raise self._refuse("the Authorization header has no token after 'Bearer'", "invalid_request")
        return token.strip()

    def _match(self, secret: str) -> str | None:
        digest = _digest(secret)
        found: str | None = None
        for expected, name in self._secrets:  # no early exit: every entry costs the same
            if hmac.compare_digest(digest, expected):
                found = name
        return found

    def _basic(self, value: str | None) -> Principal:
        if value is None:
            raise self._refuse("send 'Authorization: Basic <base64 of user:password>'")
        scheme, _, encoded = value.strip().partition(" ")
        if scheme.lower() != "basic":
            raise self._refuse(f"the Authorization header uses scheme {scheme!r}; send 'Authorization: Basic ...'")
        try:
            user, colon, password = base64.b64decode(encoded.strip(), validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            user, colon, password = "", "", ""
        if not colon or not user:
            raise self._refuse("the Basic credentials are malformed; send base64 of UTF-8 'user:password'")
        expected = self._users.get(user)
        matches = hmac.compare_digest(_digest(password), expected if expected is not None else self._no_user)
        if expected is None or not matches:
            raise self._refuse("wrong user name or password")
        return Principal(user, "basic")

    def _refuse(self, reason: str, bearer_error: str | None = None) -> EdgeError:
        challenge = self.challenge
        if bearer_error:  # RFC 6750 section 3: say why the token was refused
            challenge = f'{challenge}, error="{bearer_error}"'
        return auth_required(reason, challenge=challenge)


def _secret(credential: Credential) -> str:
    return credential.secret.get_secret_value()


def _name(credential: Credential, prefix: str) -> str:
    return credential.name or fingerprint(_secret(credential), prefix)
