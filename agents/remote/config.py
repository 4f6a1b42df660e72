"""The ``remote:`` key of an ``agents:`` entry: an HTTP A2A agent served on the mesh by a proxy.

::

    - name: weather                          # optional: the remote card's name otherwise
      remote:
        card_url: https://host/.well-known/agent-card.json   # or url: https://host/a2a (+ binding)
        binding: JSONRPC                     # optional preference: JSONRPC, HTTP+JSON or GRPC
        auth: {type: bearer, token_env: WEATHER_TOKEN}        # none | api_key | bearer | oauth2
        headers: {X-Team: mesh}              # optional, sent on every request
        timeout_s: 30
        tls: {ca_file: ca.pem}               # optional: verify, ca_file, cert_file, key_file
        health_interval_s: 30                # how often the card is fetched again
        max_concurrent: 8                    # calls in flight to the remote at once
        rate_per_s: 20                       # optional: requests per second to the remote
        allow_private_redirects: false       # redirects to private addresses are refused
        skills: [...]                        # optional: replaces the remote card's skills

Secrets are named by environment variable, never written in the file: ``api_key`` takes
``{header: X-API-Key, key_env: VAR}``, ``bearer`` ``{token_env: VAR}``, ``oauth2`` (client
credentials) ``{token_url, client_id, client_secret_env, scopes: [...]}``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from mesh.a2a import AgentSkill
from mesh.config.errors import KeyPart, config_error, validation_error_text
from mesh.discovery.remote_cards import CARD_PATH
from mesh.errors import ConfigError

__all__ = ["REMOTE_EXAMPLE", "RemoteAuth", "RemoteConfig", "RemoteTls", "parse_remote"]

REMOTE_EXAMPLE = "remote: {card_url: https://host/.well-known/agent-card.json}"
BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RemoteAuth(_Strict):
    """How the proxy proves itself to the remote; secrets only by environment variable name."""

    type: Literal["none", "api_key", "bearer", "oauth2"] = "none"
    header: str = "X-API-Key"
    key_env: str | None = None
    token_env: str | None = None
    token_url: str | None = None
    client_id: str | None = None
    client_secret_env: str | None = None
    scopes: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _complete(self) -> RemoteAuth:
        needed = {
            "api_key": ("key_env",),
            "bearer": ("token_env",),
            "oauth2": ("token_url", "client_id", "client_secret_env"),
        }.get(self.type, ())
        missing = [key for key in needed if not getattr(self, key)]
        if missing:
            raise ValueError(f"auth type {self.type!r} needs {', '.join(missing)}")
        return self

    def secret(self, variable: str | None) -> str:
        """The value of the environment variable ``variable`` (read when used, never stored in a card)."""
        value = os.environ.get(variable or "")
        if not value:
            raise ConfigError(
                f"remote auth: environment variable {variable!r} is not set; export it before starting the mesh"
            )
        return value


class RemoteTls(_Strict):
    verify: bool = True
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None


class RemoteConfig(_Strict):
    """One remote A2A agent: where it is, how to reach it, and its bounds."""

    card_url: str | None = None
    url: str | None = None
    binding: Literal["JSONRPC", "HTTP+JSON", "GRPC"] | None = None
    auth: RemoteAuth = Field(default_factory=RemoteAuth)
    headers: dict[str, str] = Field(default_factory=dict)
    timeout_s: float = Field(default=30.0, gt=0)
    tls: RemoteTls = Field(default_factory=RemoteTls)
    health_interval_s: float = Field(default=30.0, gt=0)
    max_concurrent: int = Field(default=8, ge=1)
    rate_per_s: float | None = Field(default=None, gt=0)
    allow_private_redirects: bool = False
    skills: list[AgentSkill] | None = None

    @field_validator("card_url", "url")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and urlsplit(value).scheme not in ("http", "https"):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value

    @model_validator(mode="after")
    def _located(self) -> RemoteConfig:
        if (self.card_url is None) == (self.url is None):
            raise ValueError("give exactly one of card_url (the remote's agent card) or url (its endpoint)")
        return self

    @property
    def where(self) -> str:
        """The URL errors name: the card's, else the endpoint's."""
        return self.card_url or self.url or ""

    def card_address(self) -> str:
        """Where the remote's card is: ``card_url``, else the well-known path under ``url``."""
        return self.card_url or (self.url or "").rstrip("/") + CARD_PATH


def parse_remote(value: Any, source: Path, path: Sequence[KeyPart]) -> RemoteConfig:
    """The :class:`RemoteConfig` of a ``remote:`` mapping; TLS paths are relative to the file."""
    where = tuple(path)
    if not isinstance(value, Mapping):
        raise config_error(source, where, f"expected a mapping, got {value!r}", f"write it as {REMOTE_EXAMPLE}")
    try:
        config = RemoteConfig.model_validate(dict(value))
    except ValidationError as exc:
        raise ConfigError(validation_error_text(exc, source=source, prefix=where, model=RemoteConfig)) from None
    base = Path(source).resolve().parent
    tls = config.tls.model_copy(
        update={
            key: base / file
            for key in ("ca_file", "cert_file", "key_file")
            if (file := getattr(config.tls, key)) is not None and not file.is_absolute()
        }
    )
    for key in ("ca_file", "cert_file", "key_file"):
        file = getattr(tls, key)
        if file is not None and not file.is_file():
            raise config_error(
                source,
                (*where, "tls", key),
                f"no file {file}",
                "check the path: a relative one starts at the file's folder",
            )
    return config.model_copy(update={"tls": tls})
