"""Trust on the mesh: component keys, signed cards and signed user tokens (README, "Trust").

- :mod:`mesh.trust.keys`: a key pair per component (``mesh keys``), the JWKS others trust;
- :mod:`mesh.trust.cards`: A2A 1.0 card signatures (JWS over the RFC 8785 canonical card);
- :mod:`mesh.trust.tokens`: user tokens gateways mint and agents verify;
- :mod:`mesh.trust.config`: the ``trust:`` settings and what they load.
"""

from __future__ import annotations

from mesh.trust.cards import CardVerifier, canonical_card, sign_card
from mesh.trust.config import Trust, TrustSettings, load_trust
from mesh.trust.keys import generate_keys, load_private_key, load_public_keys
from mesh.trust.tokens import Identity, TokenMinter, TokenVerifier

__all__ = [
    "CardVerifier",
    "Identity",
    "TokenMinter",
    "TokenVerifier",
    "Trust",
    "TrustSettings",
    "canonical_card",
    "generate_keys",
    "load_private_key",
    "load_public_keys",
    "load_trust",
    "sign_card",
]
