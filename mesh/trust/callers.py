"""Who sent a request, proven: caller tokens (DESIGN, "Tasks belong to their users").

A task with no user token belongs to the component that asked for it. The broker verifies who
connects, but no MQTT v5 property tells the receiver who published (and the answer topic a
request names is the sender's choice: any component may name another's). So every component
with a signing key (mesh up gives each its own, ``<name>.jwk``) puts a short JWT in the
``a2aCaller`` user property of each request it sends: ``kid`` = ``iss`` = its name, ``sub`` =
``<kind>:<name>`` (``agent``, ``gateway`` or ``client``), ``aud`` = ``<namespace>/<agent>``, the
one agent it is for, and ``iat``/``exp``. An agent with trusted keys verifies it against the key
of that name (:class:`~mesh.trust.store.TrustedKeys`, live) and takes the task's owner from it.

The audience binds a token to its agent: calculator, which receives the CLI's tokens for
calculator, cannot use them with echo. Both sides cache (a token per agent while more than half
its lifetime is left; a verified token until it expires), so the hot path costs a dict lookup.
"""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Literal

from joserfc import jwk, jws

from mesh.errors import TrustError
from mesh.trust.files import POLL_INTERVAL_S
from mesh.trust.keys import ALGORITHMS, PrivateKey
from mesh.trust.store import TrustedKeys
from mesh.trust.tokens import json_part, signed_by

__all__ = ["CALLER_KINDS", "CallerKind", "CallerMinter", "CallerVerifier", "caller_audience"]

CallerKind = Literal["agent", "gateway", "client"]
CALLER_KINDS: tuple[CallerKind, ...] = ("agent", "gateway", "client")
#: Longest token accepted: ours are about 300 bytes.
MAX_TOKEN_BYTES = 2048


def caller_audience(namespace: str, agent: str) -> str:
    """The ``aud`` of a caller token for ``agent``: ``<namespace>/<agent>``."""
    return f"{namespace}/{agent}"


class CallerMinter:
    """Mints the caller tokens of one component (``kind``, the name of its ``key``) in ``namespace``."""

    def __init__(
        self,
        key: PrivateKey,
        *,
        kind: CallerKind,
        namespace: str,
        ttl_s: float = 300.0,
        clock: Callable[[], float] = time.time,
        cache_size: int = 1024,
    ) -> None:
        if key.kid is None:
            raise ValueError("a caller key needs a kid (the component's name)")
        self.name, self.kind, self.namespace, self.ttl_s = key.kid, kind, namespace, ttl_s
        self.key = key
        self._clock = clock
        self._alg = "ES256" if isinstance(key, jwk.ECKey) else "Ed25519"
        self._cache: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._cache_size = cache_size

    @property
    def caller(self) -> str:
        """What a verifier makes of these tokens: ``<kind>:<name>``."""
        return f"{self.kind}:{self.name}"

    def mint(self, agent: str) -> str:
        """A token for requests to ``agent``: a cached one while more than half its lifetime is left."""
        now = self._clock()
        cached = self._cache.get(agent)
        if cached is not None and cached[1] - now > self.ttl_s / 2:
            return cached[0]
        claims = {
            "iss": self.name,
            "sub": self.caller,
            "aud": caller_audience(self.namespace, agent),
            "iat": int(now),
            "exp": int(now + self.ttl_s),
        }
        header = {"alg": self._alg, "kid": self.name, "typ": "a2a-caller+jwt"}
        token = jws.serialize_compact(header, json.dumps(claims, separators=(",", ":")).encode(), self.key, ALGORITHMS)
        self._cache[agent] = (token, now + self.ttl_s)
        self._cache.move_to_end(agent)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return token


class CallerVerifier:
    """Verifies the caller tokens of requests to ``agent`` against ``keys`` (kid = the caller's name)."""

    def __init__(
        self,
        keys: TrustedKeys,
        *,
        namespace: str,
        agent: str,
        leeway_s: float = 5.0,
        clock: Callable[[], float] = time.time,
        cache_size: int = 4096,
    ) -> None:
        self.keys = keys
        self.audience = caller_audience(namespace, agent)
        self.leeway_s = leeway_s
        self._clock = clock
        self._cache: OrderedDict[str, tuple[str, float]] = OrderedDict()
        self._cache_size = cache_size
        self._generation = keys.generation

    def caller(self, token: str | None) -> str | None:
        """``<kind>:<name>`` of a valid token, else None (no token, or one that does not verify)."""
        if not token:
            return None
        try:
            return self.verify(token)
        except TrustError:
            return None

    def verify(self, token: str) -> str:
        """The caller a valid token proves; :class:`TrustError` names what is wrong with it."""
        self.keys.check(POLL_INTERVAL_S)
        if self.keys.generation != self._generation:  # a key withdrawn: its tokens with it
            self._generation = self.keys.generation
            self._cache.clear()
        now = self._clock()
        cached = self._cache.get(token)
        if cached is not None and now < cached[1] + self.leeway_s:
            self._cache.move_to_end(token)
            return cached[0]
        caller, expires = self._verify(token, now)
        self._cache[token] = (caller, expires)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return caller

    def _verify(self, token: str, now: float) -> tuple[str, float]:
        if len(token) > MAX_TOKEN_BYTES:
            raise TrustError(f"the caller token is over {MAX_TOKEN_BYTES} bytes; it is no token this mesh mints")
        parts = token.split(".")
        if len(parts) != 3:
            raise TrustError("the caller token is not a JWT (three dot-separated parts)")
        name = json_part(parts[0], "header", "caller token").get("kid")
        if not isinstance(name, str) or (key := self.keys.get(name)) is None:
            raise TrustError(f"the caller token is signed by {name!r}, which has no trusted key")
        # A mismatch may be a key replaced just now: look at the file (rate-limited) and try again.
        if not signed_by(token, key) and not (
            self.keys.check() and (key := self.keys.get(name)) is not None and signed_by(token, key)
        ):
            raise TrustError(f"the caller token's signature does not verify with {name!r}'s key")
        claims = json_part(parts[1], "claims", "caller token")
        subject = claims.get("sub")
        kind, _, subject_name = subject.partition(":") if isinstance(subject, str) else ("", "", "")
        if claims.get("iss") != name or subject_name != name or kind not in CALLER_KINDS:
            raise TrustError(f"the caller token's iss/sub {claims.get('iss')!r}/{subject!r} are not of {name!r}")
        if claims.get("aud") != self.audience:
            raise TrustError(f"the caller token is for {claims.get('aud')!r}, not {self.audience!r}")
        expires = claims.get("exp")
        if not isinstance(expires, int | float) or isinstance(expires, bool):
            raise TrustError("the caller token has no exp claim")
        if now >= expires + self.leeway_s:
            raise TrustError(f"the caller token expired {now - expires:.0f} s ago")
        return f"{kind}:{name}", float(expires)
