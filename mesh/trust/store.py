"""The trusted public keys, live: a JWKS file read again when it changes, or a fixed key set.

DESIGN, "Trust": a key added to the trust file (``mesh run`` enrolling a component) joins the
trusted keys of every running registry within seconds, with no restart; a key removed or
replaced leaves them the same way. :class:`TrustedKeys` is that file as the process sees it
(a :class:`~mesh.trust.files.WatchedFile`):

- a lookup that misses (a kid not among the keys) looks at the file at once, at most once per
  :data:`~mesh.trust.files.MIN_CHECK_INTERVAL_S`: a key written just before its card arrives
  is found; a lookup that hits costs no system call;
- holders that must also see removals look periodically (:meth:`TrustedKeys.check`, every
  :data:`~mesh.trust.files.POLL_INTERVAL_S` for registries and token verifiers) and follow
  :attr:`TrustedKeys.generation`, which counts the changes;
- a file that is missing, half-written or not a JWKS keeps the keys read before (one warning).

Trust comes only from the file, never from the network: an unknown kid is looked up in the
file, nowhere else.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path

from joserfc import jwk

from mesh.trust.files import MIN_CHECK_INTERVAL_S, WatchedFile
from mesh.trust.keys import parse_public_keys

__all__ = ["TrustedKeys", "trusted_keys"]


class _Index:
    """Keys by kid (the first of a kid wins, as in ``KeySet.get_by_kid``); equal when the same keys."""

    __slots__ = ("by_kid", "key_set", "thumbprints")

    def __init__(self, key_set: jwk.KeySet) -> None:
        self.key_set = key_set
        self.by_kid: dict[str, jwk.Key] = {}
        for key in key_set.keys:
            if key.kid is not None:
                self.by_kid.setdefault(key.kid, key)
        self.thumbprints = {kid: key.thumbprint() for kid, key in self.by_kid.items()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Index) and other.thumbprints == self.thumbprints

    __hash__ = None  # type: ignore[assignment]  # mutable-looking value: compared, never hashed


class TrustedKeys:
    """The public keys trusted: those of the JWKS file ``source`` (re-read when it changes), or a
    fixed ``jwk.KeySet``.

    Made from a file, the first read is strict (:class:`~mesh.errors.ConfigError` when the file
    is missing or bad: a wrong path is a configuration error); later reads keep the keys.
    """

    def __init__(
        self,
        source: Path | jwk.KeySet,
        *,
        min_interval_s: float = MIN_CHECK_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._file: WatchedFile[_Index] | None = None
        if isinstance(source, jwk.KeySet):
            self.path: Path | None = None
            self._fixed = _Index(source)
            return
        self.path = source
        self._file = WatchedFile(
            source,
            lambda data: _Index(parse_public_keys(data, source)),
            _Index(jwk.KeySet([])),
            what="JWKS",
            min_interval_s=min_interval_s,
            clock=clock,
        )
        self._file.load()

    def __repr__(self) -> str:
        return f"TrustedKeys({self.path or 'fixed'}, kids={sorted(self._index.by_kid)})"

    @property
    def _index(self) -> _Index:
        return self._file.value if self._file is not None else self._fixed

    @property
    def live(self) -> bool:
        """Whether the keys come from a file, hence may change."""
        return self._file is not None

    @property
    def generation(self) -> int:
        """How many times the keys changed since they were first read."""
        return self._file.generation if self._file is not None else 0

    @property
    def key_set(self) -> jwk.KeySet:
        """The keys trusted now."""
        return self._index.key_set

    @property
    def keys(self) -> list[jwk.Key]:
        """The keys trusted now, as ``jwk.KeySet.keys`` lists them."""
        return self._index.key_set.keys

    def thumbprints(self) -> Mapping[str, str]:
        """kid -> RFC 7638 thumbprint of each key trusted now: what tells which kids a change touched."""
        return self._index.thumbprints

    def get(self, kid: str) -> jwk.Key | None:
        """The trusted key ``kid``, or None; a miss first looks whether the file gained it."""
        key = self._index.by_kid.get(kid)
        if key is None and self.check():
            key = self._index.by_kid.get(kid)
        return key

    def refresh(self) -> bool:
        """Look at the file now; True when the keys changed (False for fixed keys)."""
        return self._file.refresh() if self._file is not None else False

    def check(self, max_age_s: float | None = None) -> bool:
        """:meth:`refresh`, unless the file was looked at in the last ``max_age_s`` (rate-limited)."""
        return self._file.check(max_age_s) if self._file is not None else False


def trusted_keys(keys: TrustedKeys | jwk.KeySet) -> TrustedKeys:
    """``keys`` as :class:`TrustedKeys` (a plain key set wrapped: fixed)."""
    return keys if isinstance(keys, TrustedKeys) else TrustedKeys(keys)
