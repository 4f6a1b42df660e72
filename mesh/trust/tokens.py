"""Signed user identity: gateways mint a short-lived JWT per user, agents verify it.

A gateway that authenticated a user puts a JWT in the request's ``authToken`` user property:
``sub`` = the user id, ``iss`` = the gateway's id (also the ``kid`` of the key that signed
it), ``aud`` = the namespace, ``iat``/``exp`` and ``scope`` (space-separated). An agent that
trusts the issuer verifies it and hands the handler a verified :class:`Identity`; without a
valid token the ``userId`` property is only an unverified claim.

Both sides cache: a minter reuses a user's token while more than half its lifetime is left,
and a verifier remembers a verified token until it expires, so a user's requests cost one
signature and one verification per half lifetime, not one per request.

A verifier's trust is live: its keys (:class:`~mesh.trust.store.TrustedKeys`) and its issuers
(:class:`~mesh.trust.issuers.TrustedIssuers`: ``issuers`` plus those of an issuers' file)
follow their files. An unknown issuer or kid looks at the files at once (rate-limited), every
verification looks at most every :data:`~mesh.trust.files.POLL_INTERVAL_S`, and any change of
keys or issuers drops the cache of verified tokens: an issuer removed is distrusted within a
poll, its cached tokens included.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from joserfc import jwk, jws
from joserfc.errors import JoseError

from mesh.errors import TrustError
from mesh.trust.files import POLL_INTERVAL_S
from mesh.trust.identity import Identity
from mesh.trust.issuers import TrustedIssuers
from mesh.trust.keys import ALGORITHMS, PrivateKey
from mesh.trust.store import TrustedKeys, trusted_keys

__all__ = ["Identity", "TokenMinter", "TokenVerifier"]


class TokenMinter:
    """Mints the user tokens of one gateway (``issuer``) for one namespace (``audience``)."""

    def __init__(
        self,
        key: PrivateKey,
        *,
        issuer: str,
        audience: str,
        ttl_s: float = 300.0,
        scopes: Iterable[str] = (),
        clock: Callable[[], float] = time.time,
        cache_size: int = 4096,
    ) -> None:
        if key.kid != issuer:
            raise ValueError(f"the key's kid is {key.kid!r}, not the issuer {issuer!r}; use the gateway's own key")
        self.key, self.issuer, self.audience, self.ttl_s = key, issuer, audience, ttl_s
        self.scopes = tuple(scopes)
        self._clock = clock
        self._alg = "ES256" if isinstance(key, jwk.ECKey) else "Ed25519"
        self._cache: OrderedDict[tuple[str, tuple[str, ...]], tuple[str, float]] = OrderedDict()
        self._cache_size = cache_size

    def mint(self, user_id: str, scopes: Iterable[str] | None = None) -> str:
        """A token for ``user_id``: a cached one while more than half its lifetime is left."""
        granted = self.scopes if scopes is None else tuple(scopes)
        now = self._clock()
        cached = self._cache.get((user_id, granted))
        if cached is not None and cached[1] - now > self.ttl_s / 2:
            return cached[0]
        claims: dict[str, Any] = {
            "sub": user_id,
            "iss": self.issuer,
            "aud": self.audience,
            "iat": int(now),
            "exp": int(now + self.ttl_s),
        }
        if granted:
            claims["scope"] = " ".join(granted)
        header = {"alg": self._alg, "kid": self.issuer, "typ": "JWT"}
        payload = json.dumps(claims, separators=(",", ":")).encode()
        token = jws.serialize_compact(header, payload, self.key, algorithms=ALGORITHMS)
        self._cache[(user_id, granted)] = (token, now + self.ttl_s)
        self._cache.move_to_end((user_id, granted))
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return token


class TokenVerifier:
    """Verifies user tokens from trusted issuers (their keys in ``keys``, ``kid`` = issuer): the
    names of ``issuers`` and of the file ``issuers_file`` (one per line; it may not exist yet), or
    a :class:`~mesh.trust.issuers.TrustedIssuers` as ``issuers``."""

    def __init__(
        self,
        keys: TrustedKeys | jwk.KeySet,
        *,
        issuers: Iterable[str] | TrustedIssuers = (),
        issuers_file: Path | None = None,
        audience: str,
        leeway_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        cache_size: int = 4096,
    ) -> None:
        self._keys = trusted_keys(keys)
        if isinstance(issuers, TrustedIssuers) and issuers_file is not None:
            raise TypeError("give the issuers' file to the TrustedIssuers, not to the TokenVerifier as well")
        self._issuers = issuers if isinstance(issuers, TrustedIssuers) else TrustedIssuers(issuers, issuers_file)
        self.audience = audience
        self.leeway_s = leeway_s
        self._clock = clock
        self._cache: OrderedDict[str, Identity] = OrderedDict()
        self._cache_size = cache_size
        self._generation = self._trust_generation()

    @property
    def keys(self) -> TrustedKeys:
        """The trusted keys; assigning others (a ``jwk.KeySet`` or :class:`TrustedKeys`) drops the
        verified tokens."""
        return self._keys

    @keys.setter
    def keys(self, keys: TrustedKeys | jwk.KeySet) -> None:
        self._keys = trusted_keys(keys)

    @property
    def issuers(self) -> frozenset[str]:
        """The issuers trusted now."""
        return self._issuers.names

    def refresh(self) -> bool:
        """Look at the trust files now; True when keys or issuers changed (the cache is dropped)."""
        changed = self._keys.refresh() | self._issuers.refresh()
        self._follow()
        return changed

    def _trust_generation(self) -> tuple[int, int, int]:
        return id(self._keys), self._keys.generation, self._issuers.generation

    def _follow(self) -> None:
        """Drop the verified tokens when the keys or issuers changed: one may have been withdrawn."""
        if (generation := self._trust_generation()) != self._generation:
            self._generation = generation
            self._cache.clear()

    def identify(self, user_id: str | None, token: str | None) -> Identity:
        """The verified identity of ``token``, else ``user_id`` as an unverified claim (with the reason)."""
        if not token:
            return Identity(user_id, problem="the request carries no authToken")
        try:
            return self.verify(token)
        except TrustError as exc:
            return Identity(user_id, problem=str(exc))

    def verify(self, token: str) -> Identity:
        """The identity a valid token carries; :class:`TrustError` names what is wrong with it."""
        self._keys.check(POLL_INTERVAL_S)  # one stat per file per poll at most, not one per request
        self._issuers.check(POLL_INTERVAL_S)
        self._follow()
        now = self._clock()
        cached = self._cache.get(token)
        if cached is not None and cached.expires_at is not None and now < cached.expires_at + self.leeway_s:
            self._cache.move_to_end(token)
            return cached
        identity = self._verify(token, now)
        self._cache[token] = identity
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return identity

    def _verify(self, token: str, now: float) -> Identity:
        if len(token) > 8192:
            raise TrustError("the authToken is over 8 KiB; it is no token this mesh mints")
        parts = token.split(".")
        if len(parts) != 3:
            raise TrustError("the authToken is not a JWT (three dot-separated parts)")
        header = json_part(parts[0], "header")
        issuer = header.get("kid")
        if not isinstance(issuer, str) or issuer not in self._issuers:  # a miss looks at the issuers' file
            raise TrustError(f"the authToken is signed by {issuer!r}, not by a trusted issuer")
        key = self._keys.get(issuer)  # a miss looks at the trust file
        if key is None:
            raise TrustError(f"the trusted issuer {issuer!r} has no public key in the trust store")
        # A mismatch may be a key replaced just now: look at the file (rate-limited) and try again.
        if not signed_by(token, key) and not (
            self._keys.check() and (key := self._keys.get(issuer)) is not None and signed_by(token, key)
        ):
            raise TrustError(f"the authToken's signature does not verify with {issuer!r}'s key")
        claims = json_part(parts[1], "claims")
        if claims.get("iss") != issuer:
            raise TrustError(f"the authToken's iss {claims.get('iss')!r} is not its signer {issuer!r}")
        audience = claims.get("aud")
        if audience != self.audience and not (isinstance(audience, list) and self.audience in audience):
            raise TrustError(f"the authToken is for audience {audience!r}, not namespace {self.audience!r}")
        expires = claims.get("exp")
        if not isinstance(expires, int | float) or isinstance(expires, bool):
            raise TrustError("the authToken has no exp claim")
        if now >= expires + self.leeway_s:
            raise TrustError(f"the authToken expired {now - expires:.0f} s ago")
        not_before = claims.get("nbf")
        if isinstance(not_before, int | float) and now + self.leeway_s < not_before:
            raise TrustError("the authToken is not valid yet (nbf)")
        subject = claims.get("sub")
        if not isinstance(subject, str) or not subject:
            raise TrustError("the authToken has no sub (user id)")
        scope = claims.get("scope")
        scopes = tuple(scope.split()) if isinstance(scope, str) else ()
        return Identity(subject, verified=True, issuer=issuer, scopes=scopes, expires_at=float(expires))


def signed_by(token: str, key: jwk.Key) -> bool:
    try:
        jws.deserialize_compact(token, key, algorithms=ALGORITHMS)
    except (JoseError, ValueError):
        return False
    return True


def json_part(part: str, what: str, token: str = "authToken") -> dict[str, Any]:  # noqa: S107 - a name
    """The JSON object of one part of a compact JWS; :class:`TrustError` when it is none."""
    try:
        value = json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except (binascii.Error, ValueError, RecursionError):
        raise TrustError(f"the {token}'s {what} is not base64url JSON") from None
    if not isinstance(value, dict):
        raise TrustError(f"the {token}'s {what} is not a JSON object")
    return value
