"""The edge configuration of the HTTP A2A gateway: the pydantic models of
:class:`EdgeConfig` (which ``HttpGatewaySettings`` extends) and its parts: authentication
(bearer, API key, basic, OIDC), rate limits, concurrency, timeouts and CORS.

The errors these protections raise are in :mod:`gateways.http.protection`, which re-exports
these names (their import path since the first release).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from mesh.limits import MessageLimits
from topics import validate_identifier

__all__ = [
    "AuthConfig",
    "ConcurrencyConfig",
    "CorsConfig",
    "Credential",
    "EdgeConfig",
    "OidcConfig",
    "RateLimitConfig",
    "TimeoutConfig",
]


class _Config(BaseModel):
    # hide_input_in_errors: an error's text must not quote a token or password.
    model_config = ConfigDict(extra="forbid", frozen=True, hide_input_in_errors=True)


class Credential(_Config):
    """One bearer token or API key; ``name`` labels the caller (else a fingerprint does).

    In YAML an entry is either the secret alone (``- ${A2A_TOKEN}``) or a mapping
    (``- {name: ci, secret: ${CI_TOKEN}}``).
    """

    secret: SecretStr
    name: str | None = Field(None, description="principal name, e.g. 'ci' (default: a fingerprint)")

    @model_validator(mode="before")
    @classmethod
    def _from_secret(cls, value: Any) -> Any:
        secret = value.get("secret", "") if isinstance(value, Mapping) else value
        if secret is None or secret == "":
            raise ValueError("the secret is empty; is its environment variable set?")
        return {"secret": value} if isinstance(value, str) else value

    @field_validator("secret")
    @classmethod
    def _check_secret(cls, secret: SecretStr) -> SecretStr:
        value = secret.get_secret_value()
        if not value.strip():
            raise ValueError("the secret is empty; is its environment variable set?")
        if value != value.strip():
            raise ValueError("the secret has leading or trailing whitespace, which no HTTP header value keeps")
        return secret

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str | None) -> str | None:
        return None if name is None else validate_identifier(name, "caller name")


_MODE_FIELDS = {"bearer": "tokens", "api_key": "keys", "basic": "users"}
_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")


class OidcConfig(_Config):
    """Browser sign-in with an OpenID Connect provider (authorization code, PKCE S256).

    Programs keep the gateway's ``mode`` (a key, a token, a password): OIDC signs people in
    from the sign-in page only. The client secret is read from the environment variable named
    by ``client_secret_env``, never from the file; without one the gateway is a public client.
    """

    issuer: str = Field(description="the provider's issuer URL, exactly as its ID tokens' iss claim")
    client_id: str = Field(min_length=1, description="the gateway's client id at the provider")
    client_secret_env: str | None = Field(None, description="environment variable holding the client secret")
    scopes: list[str] = Field(default_factory=lambda: ["openid", "profile", "email"], description="scopes asked")
    username_claim: str = Field("preferred_username", min_length=1, description="ID token claim naming the user")
    display_name: str | None = Field(None, description="the button's 'Sign in with ...' (default: the issuer's host)")
    timeout_s: float = Field(10.0, gt=0, le=120, description="each call to the provider must answer within this")
    pending_ttl_s: float = Field(600.0, gt=0, le=3600, description="a started sign-in must come back within this")
    max_pending: int = Field(1000, gt=0, description="started sign-ins kept at most; the oldest is dropped")
    leeway_s: int = Field(60, ge=0, le=600, description="clock skew allowed on the ID token's exp/iat")

    @field_validator("issuer")
    @classmethod
    def _check_issuer(cls, issuer: str) -> str:
        scheme, sep, rest = issuer.partition("://")
        host = rest.split("/", 1)[0].rsplit(":", 1)[0] if not rest.startswith("[") else rest.split("]", 1)[0] + "]"
        if not sep or not rest or "?" in issuer or "#" in issuer:
            raise ValueError(
                f"issuer {issuer!r} must be an https URL with no query, e.g. https://id.example.com/realms/x"
            )
        if scheme != "https" and not (scheme == "http" and host in _LOOPBACK_HOSTS):
            raise ValueError(f"issuer {issuer!r} must use https (plain http only on localhost, for development)")
        return issuer

    @field_validator("scopes")
    @classmethod
    def _check_scopes(cls, scopes: list[str]) -> list[str]:
        if "openid" not in scopes:
            raise ValueError("scopes must include 'openid' (without it the provider sends no ID token)")
        if any(not scope or " " in scope for scope in scopes):
            raise ValueError("each scope is one non-empty word")
        return scopes

    @field_validator("client_secret_env")
    @classmethod
    def _check_secret_env(cls, name: str | None) -> str | None:
        if name is not None and not os.environ.get(name, "").strip():
            raise ValueError(f"environment variable {name} is not set; export it with the client secret")
        return name

    def client_secret(self) -> str | None:
        """The client secret, read from the environment when needed (never kept in the config)."""
        if self.client_secret_env is None:
            return None
        return os.environ.get(self.client_secret_env, "").strip() or None

    @property
    def label(self) -> str:
        """What the sign-in button names: ``display_name``, else the issuer's host."""
        return self.display_name or self.issuer.partition("://")[2].split("/", 1)[0]


class AuthConfig(_Config):
    """Who may call the gateway: ``none``, ``bearer`` tokens, ``api_key`` keys or ``basic`` users."""

    mode: Literal["none", "bearer", "api_key", "basic"] = "none"
    tokens: list[Credential] = Field(default_factory=list, description="mode bearer: Authorization: Bearer <token>")
    keys: list[Credential] = Field(default_factory=list, description="mode api_key: X-API-Key: <key>")
    users: dict[str, SecretStr] = Field(default_factory=dict, description="mode basic: user name -> password")
    realm: str = Field("a2a", pattern=r'^[^"\\]+$', description="realm of the WWW-Authenticate challenge")
    oidc: OidcConfig | None = Field(None, description="browser sign-in with an OpenID Connect provider too")
    signin_hint: str | None = Field(
        None,
        max_length=500,
        description="what the sign-in page says under the form: where a person finds the key, token or password",
    )

    @field_validator("users")
    @classmethod
    def _check_users(cls, users: dict[str, SecretStr]) -> dict[str, SecretStr]:
        for user, password in users.items():
            if not user or ":" in user:
                raise ValueError(f"user name {user!r} must be non-empty and hold no ':' (RFC 7617)")
            if not password.get_secret_value():
                raise ValueError(f"user {user!r} has an empty password; set it (e.g. ${{A2A_PASSWORD}})")
        return users

    @model_validator(mode="after")
    def _check_mode(self) -> AuthConfig:
        if self.oidc is not None and self.mode == "none":
            raise ValueError(
                "oidc needs a mode for programs too (bearer, api_key or basic): with mode 'none' nobody signs in"
            )
        wanted = _MODE_FIELDS.get(self.mode)
        for mode, field in _MODE_FIELDS.items():
            if field != wanted and getattr(self, field):
                raise ValueError(f"{field} is used only with mode {mode!r}, but mode is {self.mode!r}")
        if wanted is None:
            return self
        if not getattr(self, wanted):
            raise ValueError(f"mode {self.mode!r} needs at least one entry in {wanted}")
        if wanted != "users":
            credentials: list[Credential] = getattr(self, wanted)
            secrets = [c.secret.get_secret_value() for c in credentials]
            if len(set(secrets)) != len(secrets):
                raise ValueError(f"{wanted} holds the same secret twice; each caller needs its own")
            names = [c.name for c in credentials if c.name]
            if len(set(names)) != len(names):
                raise ValueError(f"{wanted} holds the same name twice; names identify callers")
        return self


class RateLimitConfig(_Config):
    """Requests per client: a token bucket of ``burst`` tokens refilled at ``requests``/``window_s``."""

    requests: int = Field(100, gt=0, description="requests allowed per window (X-RateLimit-Limit)")
    window_s: float = Field(60.0, gt=0, description="window in seconds (X-RateLimit-Window)")
    burst: int | None = Field(None, gt=0, description="requests allowed at once; default: requests")
    max_clients: int = Field(10_000, gt=0, description="clients tracked at most; the least recent are forgotten")


class ConcurrencyConfig(_Config):
    """Requests and tasks in flight at once (JAF defaults)."""

    max_requests_per_client: int = Field(10, gt=0, description="requests one client has in flight")
    max_tasks_per_context: int = Field(5, gt=0, description="unfinished tasks one contextId has on the mesh")


class TimeoutConfig(_Config):
    """How long the gateway waits for the mesh; a client may ask for another time with X-A2A-Timeout."""

    default_s: float = Field(30.0, gt=0, description="blocking request without X-A2A-Timeout")
    maximum_s: float = Field(300.0, gt=0, description="longest X-A2A-Timeout honoured for a blocking request")
    streaming_s: float = Field(600.0, gt=0, description="stream without X-A2A-Timeout, and its longest")

    @model_validator(mode="after")
    def _check_order(self) -> TimeoutConfig:
        if self.default_s > self.maximum_s:
            raise ValueError(f"default_s ({self.default_s:g}) is above maximum_s ({self.maximum_s:g})")
        return self


_DEFAULT_CORS_HEADERS = ["Authorization", "Content-Type", "X-API-Key", "X-A2A-Timeout", "A2A-Version"]
_EXPOSED_HEADERS = [
    "X-RateLimit-Limit",
    "X-RateLimit-Remaining",
    "X-RateLimit-Reset",
    "X-RateLimit-Window",
    "Retry-After",
    "WWW-Authenticate",
]


class CorsConfig(_Config):
    """Browser access; the field names are Starlette ``CORSMiddleware``'s arguments.

    No origin is allowed by default: list them (``https://app.example.com``) or use ``"*"``.
    """

    allow_origins: list[str] = Field(default_factory=list)
    allow_methods: list[str] = Field(default_factory=lambda: ["GET", "POST", "OPTIONS"])
    allow_headers: list[str] = Field(default_factory=lambda: list(_DEFAULT_CORS_HEADERS))
    expose_headers: list[str] = Field(default_factory=lambda: list(_EXPOSED_HEADERS))
    allow_credentials: bool = False
    max_age: int = Field(600, ge=0, description="seconds a browser may cache a preflight answer")

    @field_validator("allow_origins")
    @classmethod
    def _check_origins(cls, origins: list[str]) -> list[str]:
        for origin in origins:
            scheme, sep, rest = origin.partition("://")
            if origin != "*" and (not sep or scheme not in ("http", "https") or not rest or "/" in rest):
                raise ValueError(
                    f"origin {origin!r} must be '*' or scheme://host[:port] with no path or trailing '/', "
                    "e.g. 'https://app.example.com'"
                )
        return origins

    @model_validator(mode="after")
    def _check_credentials(self) -> CorsConfig:
        if self.allow_credentials and "*" in self.allow_origins:
            raise ValueError("allow_credentials cannot be used with origin '*' (browsers refuse it); list the origins")
        return self


class EdgeConfig(_Config):
    """Every edge protection of the HTTP gateway, with the JAF A2A spec's defaults.

    ``rate_limit: null`` turns rate limiting off; authentication is off unless ``auth.mode`` is set.
    """

    auth: AuthConfig = Field(default_factory=AuthConfig)
    rate_limit: RateLimitConfig | None = Field(default_factory=RateLimitConfig)
    concurrency: ConcurrencyConfig = Field(default_factory=ConcurrencyConfig)
    # The agents' own message size limits, so the edge refuses exactly what an agent would.
    limits: MessageLimits = Field(default_factory=MessageLimits)
    timeouts: TimeoutConfig = Field(default_factory=TimeoutConfig)
    cors: CorsConfig = Field(default_factory=CorsConfig)
