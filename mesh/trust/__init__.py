"""Trust on the mesh: component keys, signed cards and signed user tokens (README, "Trust").

- :mod:`mesh.trust.keys`: a key pair per component (``mesh keys``), the JWKS others trust;
- :mod:`mesh.trust.store`: the trusted keys, live: the JWKS read again when it changes;
- :mod:`mesh.trust.issuers`: the trusted token issuers, live, and the writers of their file;
- :mod:`mesh.trust.files`: watching a trust file, and writing one atomically under a lock;
- :mod:`mesh.trust.cards`: A2A 1.0 card signatures (JWS over the RFC 8785 canonical card);
- :mod:`mesh.trust.tokens`: user tokens gateways mint and agents verify;
- :mod:`mesh.trust.callers`: caller tokens, each request's proof of the component that sent it;
- :mod:`mesh.trust.config`: the ``trust:`` settings and what they load.

Trust is live and comes only from files: a key or issuer added to its file while the mesh
runs is trusted by every running registry and verifier within a second (a lookup that misses
looks at the file at once; holders look every half second), one removed or replaced is
dropped the same way, and a kid that is not in the file is never trusted.

Each name loads its module on first use: a component without trust (``Identity``, ``Trust``)
never loads the JOSE library and the cryptography it brings (~70 ms of a process's start).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mesh.lazy import lazy_exports

if TYPE_CHECKING:
    from mesh.trust.cards import CardVerifier, canonical_card, sign_card
    from mesh.trust.config import Trust, TrustSettings, load_trust
    from mesh.trust.identity import Identity
    from mesh.trust.issuers import TrustedIssuers, add_token_issuers, read_token_issuers, remove_token_issuers
    from mesh.trust.keys import generate_keys, load_private_key, load_public_keys, remove_keys
    from mesh.trust.store import TrustedKeys
    from mesh.trust.tokens import TokenMinter, TokenVerifier

__all__ = [
    "CardVerifier",
    "Identity",
    "TokenMinter",
    "TokenVerifier",
    "Trust",
    "TrustSettings",
    "TrustedIssuers",
    "TrustedKeys",
    "add_token_issuers",
    "canonical_card",
    "generate_keys",
    "load_private_key",
    "load_public_keys",
    "load_trust",
    "read_token_issuers",
    "remove_keys",
    "remove_token_issuers",
    "sign_card",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CardVerifier": "mesh.trust.cards",
        "canonical_card": "mesh.trust.cards",
        "sign_card": "mesh.trust.cards",
        "Trust": "mesh.trust.config",
        "TrustSettings": "mesh.trust.config",
        "load_trust": "mesh.trust.config",
        "Identity": "mesh.trust.identity",
        "generate_keys": "mesh.trust.keys",
        "load_private_key": "mesh.trust.keys",
        "load_public_keys": "mesh.trust.keys",
        "remove_keys": "mesh.trust.keys",
        "TrustedKeys": "mesh.trust.store",
        "TrustedIssuers": "mesh.trust.issuers",
        "add_token_issuers": "mesh.trust.issuers",
        "read_token_issuers": "mesh.trust.issuers",
        "remove_token_issuers": "mesh.trust.issuers",
        "TokenMinter": "mesh.trust.tokens",
        "TokenVerifier": "mesh.trust.tokens",
    },
)
