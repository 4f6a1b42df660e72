"""The ``trust:`` settings of a mesh config file and of one component, and what they load.

In a file, ``trust:`` at the top level applies to every component; an agent or gateway entry
may carry its own ``trust:`` whose keys override the file's. Relative paths are relative to
the file. ::

    trust:
      keys: keys/               # a `mesh keys` directory: <component>.jwk, jwks.json
      token_issuers: [http]     # agents: gateways whose user tokens they accept
      token_issuers_file: keys/token-issuers.txt   # ... and those listed there, one per line

A component signs its card with ``signing_key`` (default ``<keys>/<name>.jwk`` when it
exists); registries accept only cards signed by a key of ``jwks`` (default
``<keys>/jwks.json``) once one is configured.

Both files are live: a running component follows them (:mod:`mesh.trust.store`,
:mod:`mesh.trust.issuers`), so a key or an issuer added while it runs is trusted within a
second, and one removed is no longer. The JWKS must be there at start (a wrong path is an
error); the issuers' file may come later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from mesh.config.errors import KeyPart, validation_error_text
from mesh.errors import ConfigError

if TYPE_CHECKING:  # the JOSE library loads when trust is configured and used, not with this module
    from mesh.a2a import AgentCard
    from mesh.trust.callers import CallerKind, CallerMinter, CallerVerifier
    from mesh.trust.cards import CardVerifier
    from mesh.trust.keys import PrivateKey
    from mesh.trust.store import TrustedKeys
    from mesh.trust.tokens import TokenMinter, TokenVerifier

__all__ = ["Trust", "TrustSettings", "load_trust"]


class TrustSettings(BaseModel):
    """Keys and trusted issuers of one component (the YAML keys of ``trust:``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    keys: Path | None = Field(None, description="a `mesh keys` directory (<name>.jwk private keys, jwks.json)")
    jwks: Path | None = Field(None, description="trusted public keys (JWKS); default <keys>/jwks.json")
    signing_key: Path | None = Field(None, description="this component's private key; default <keys>/<name>.jwk")
    token_issuers: tuple[str, ...] = Field((), description="agents: gateways whose user tokens are trusted")
    token_issuers_file: Path | None = Field(
        None, description="agents: a file of more such gateways, one per line (# comments), followed while running"
    )
    token_ttl_s: float = Field(300.0, gt=0, le=86_400, description="gateways: lifetime of the user tokens minted")
    token_scopes: tuple[str, ...] = Field((), description="gateways: scopes put in the user tokens")


@dataclass(frozen=True, slots=True)
class Trust:
    """What a component's trust settings loaded: its signing key and the keys it trusts (live
    from their file: ``public_keys`` follows it)."""

    name: str
    signing_key: PrivateKey | None = None
    public_keys: TrustedKeys | None = None
    token_issuers: tuple[str, ...] = ()
    token_issuers_file: Path | None = None
    token_ttl_s: float = 300.0
    token_scopes: tuple[str, ...] = ()

    def sign(self, card: AgentCard) -> AgentCard:
        """``card`` signed with this component's key (unchanged without one)."""
        if self.signing_key is None:
            return card
        from mesh.trust.cards import sign_card

        return sign_card(card, self.signing_key)

    def card_verifier(self) -> CardVerifier | None:
        """What registries check cards with; ``None``: unsigned cards are accepted."""
        if self.public_keys is None:
            return None
        from mesh.trust.cards import CardVerifier

        return CardVerifier(self.public_keys)

    def token_verifier(self, namespace: str) -> TokenVerifier | None:
        """What an agent checks user tokens with; ``None`` without trusted issuers (nor a file of them)."""
        if self.public_keys is None or (not self.token_issuers and self.token_issuers_file is None):
            return None
        from mesh.trust.tokens import TokenVerifier

        return TokenVerifier(
            self.public_keys, issuers=self.token_issuers, issuers_file=self.token_issuers_file, audience=namespace
        )

    def token_minter(self, namespace: str) -> TokenMinter | None:
        """What a gateway mints user tokens with; ``None`` without a signing key."""
        if self.signing_key is None:
            return None
        from mesh.trust.tokens import TokenMinter

        return TokenMinter(
            self.signing_key, issuer=self.name, audience=namespace, ttl_s=self.token_ttl_s, scopes=self.token_scopes
        )

    def caller_minter(self, kind: CallerKind, namespace: str) -> CallerMinter | None:
        """What the component signs its requests' caller tokens with; ``None`` without a signing key."""
        if self.signing_key is None:
            return None
        from mesh.trust.callers import CallerMinter

        return CallerMinter(self.signing_key, kind=kind, namespace=namespace)

    def caller_verifier(self, namespace: str, agent: str) -> CallerVerifier | None:
        """What agent ``agent`` proves its callers with; ``None`` without trusted keys."""
        if self.public_keys is None:
            return None
        from mesh.trust.callers import CallerVerifier

        return CallerVerifier(self.public_keys, namespace=namespace, agent=agent)


def load_trust(
    name: str,
    *layers: Mapping[str, Any] | None,
    base: Path,
    source: str | Path = "trust",
    where: tuple[KeyPart, ...] = ("trust",),
) -> Trust | None:
    """The trust of component ``name`` from ``layers`` (the file's ``trust:``, then the entry's).

    ``None`` when no layer configures anything. Paths are relative to ``base``.
    """
    merged: dict[str, Any] = {}
    for layer in layers:
        if layer is None:
            continue
        if not isinstance(layer, Mapping):
            raise ConfigError(
                f"{source}: {'.'.join(map(str, where))}: expected a mapping; write trust: {{keys: keys/}}"
            )
        merged.update(layer)
    if not merged:
        return None
    try:
        settings = TrustSettings.model_validate(merged)
    except ValidationError as exc:
        raise ConfigError(validation_error_text(exc, source=Path(source), prefix=where, model=TrustSettings)) from exc
    return resolve(settings, name, base)


def resolve(settings: TrustSettings, name: str, base: Path) -> Trust:
    """Load the keys ``settings`` name for component ``name``."""
    from mesh.trust.keys import JWKS_FILE, load_private_key, private_key_path
    from mesh.trust.store import TrustedKeys

    keys_dir = base / settings.keys if settings.keys is not None else None
    jwks = base / settings.jwks if settings.jwks is not None else None
    if jwks is None and keys_dir is not None:
        jwks = keys_dir / JWKS_FILE
    signing = base / settings.signing_key if settings.signing_key is not None else None
    if signing is None and keys_dir is not None and private_key_path(keys_dir, name).exists():
        signing = private_key_path(keys_dir, name)
    signing_key = load_private_key(signing, kid=name) if signing is not None else None
    if signing_key is not None and signing_key.kid != name:
        raise ConfigError(
            f"{signing}: the key's kid is {signing_key.kid!r}, not {name!r}; each component signs with its own key "
            f"(make one with `mesh keys {name}`)"
        )
    return Trust(
        name=name,
        signing_key=signing_key,
        public_keys=TrustedKeys(jwks) if jwks is not None else None,  # followed while the component runs
        token_issuers=settings.token_issuers,
        token_issuers_file=base / settings.token_issuers_file if settings.token_issuers_file is not None else None,
        token_ttl_s=settings.token_ttl_s,
        token_scopes=settings.token_scopes,
    )
