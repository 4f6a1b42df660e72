"""Card signatures as in A2A 1.0: a JWS over the RFC 8785 canonical card without its signatures.

A signature is stored detached (``protected`` header + ``signature``, no payload): the payload
is the card itself, canonicalized by whoever checks it. The signer canonicalizes the card's
wire form; a verifier canonicalizes the JSON object it received, so unknown fields are covered.

A card is accepted only if one of its signatures verifies with the trusted key whose ``kid``
is the card's own name: with per-component keys, a component that leaked its key can sign
only its own card, never another agent's.

The trusted keys are live (:class:`~mesh.trust.store.TrustedKeys`): a kid not among them, or
a signature that does not match the key held (a key replaced), makes the verifier look at the
trust file first (rate-limited), so a card that arrives just after its key is accepted. A
registry follows :attr:`CardVerifier.generation` to re-check what it holds and what it refused.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import rfc8785
from joserfc import jwk, jws
from joserfc.errors import JoseError

from mesh.a2a import AgentCard
from mesh.a2a.cards import AgentCardSignature
from mesh.errors import TrustError
from mesh.trust.keys import ALGORITHMS, SIGNING_ALGORITHM, PrivateKey
from mesh.trust.store import TrustedKeys, trusted_keys

__all__ = ["CardVerifier", "canonical_card", "sign_card", "sign_card_object"]


def canonical_card(data: dict[str, Any]) -> bytes:
    """The RFC 8785 bytes a card signature covers: the card's JSON object without ``signatures``."""
    unsigned = {key: value for key, value in data.items() if key != "signatures"}
    try:
        return rfc8785.dumps(unsigned)
    except (rfc8785.CanonicalizationError, RecursionError, ValueError) as exc:
        raise TrustError(f"the card has no canonical form ({exc})") from None


def sign_card(card: AgentCard, key: PrivateKey) -> AgentCard:
    """``card`` with one signature by ``key`` (replacing any it had)."""
    protected, signature = _signature(card.to_wire_dict(), key)
    return card.model_copy(update={"signatures": [AgentCardSignature(protected=protected, signature=signature)]})


def sign_card_object(data: dict[str, Any], key: PrivateKey) -> dict[str, Any]:
    """A card's JSON object (any A2A version's members) with one signature by ``key``, replacing any
    it had: what a gateway serves over HTTP, signed with its own key (``kid`` its id)."""
    protected, signature = _signature(data, key)
    return {**data, "signatures": [{"protected": protected, "signature": signature}]}


def _signature(data: dict[str, Any], key: PrivateKey) -> tuple[str, str]:
    payload = canonical_card(data)
    header = {"alg": SIGNING_ALGORITHM if isinstance(key, jwk.ECKey) else "Ed25519", "kid": key.kid, "typ": "JOSE"}
    compact = jws.serialize_compact(header, payload, key, algorithms=ALGORITHMS)
    protected, _, signature = compact.split(".")
    return protected, signature


class CardVerifier:
    """Checks card signatures against the trusted public keys (live from a file, or fixed)."""

    def __init__(self, keys: TrustedKeys | jwk.KeySet) -> None:
        self.keys = trusted_keys(keys)

    @property
    def live(self) -> bool:
        """Whether the keys come from a file that may change (see :attr:`generation`)."""
        return self.keys.live

    @property
    def generation(self) -> int:
        """Changes of the trusted keys so far: when it moves, what was verified may no longer be."""
        return self.keys.generation

    def refresh(self) -> bool:
        """Look at the trust file now; True when the keys changed."""
        return self.keys.refresh()

    def verify(self, data: dict[str, Any], name: str) -> str:
        """The ``kid`` that signed the card ``data`` of component ``name``; :class:`TrustError` says why not."""
        signatures = data.get("signatures")
        if not isinstance(signatures, list) or not signatures:
            raise TrustError("the card is not signed")
        payload = canonical_card(data)
        problem = "no signature verifies"
        for entry in signatures[:8]:  # a card needs one; a flood of them is not worth checking
            try:
                return self._verify_one(entry, payload, name)
            except TrustError as exc:
                problem = str(exc)
        raise TrustError(problem)

    def _verify_one(self, entry: Any, payload: bytes, name: str) -> str:
        if not isinstance(entry, dict):
            raise TrustError("a signature is not an object")
        protected, signature = entry.get("protected"), entry.get("signature")
        if not isinstance(protected, str) or not isinstance(signature, str):
            raise TrustError("a signature lacks 'protected' or 'signature'")
        try:
            header = json.loads(base64.urlsafe_b64decode(protected + "=" * (-len(protected) % 4)))
        except (binascii.Error, ValueError):
            raise TrustError("a signature's protected header is not base64url JSON") from None
        kid = header.get("kid") if isinstance(header, dict) else None
        if not isinstance(kid, str) or kid != name:
            raise TrustError(f"signed by key {kid!r}, not by the card's own key {name!r}")
        key = self.keys.get(kid)  # a miss looks at the trust file first
        if key is None:
            raise TrustError(f"key {kid!r} is not among the trusted keys")
        compact = f"{protected}..{signature}"
        if _matches(compact, key, payload):
            return kid
        # The key may have been replaced in the file just before this card came (rate-limited look).
        if self.keys.check() and (key := self.keys.get(kid)) is not None and _matches(compact, key, payload):
            return kid
        raise TrustError(f"the signature by key {kid!r} does not match the card")


def _matches(compact: str, key: jwk.Key, payload: bytes) -> bool:
    try:
        jws.deserialize_compact(compact, key, algorithms=ALGORITHMS, payload=payload)
    except (JoseError, ValueError):
        return False
    return True
