"""Trusted token issuers, live: names in the settings plus those of a file, read when it changes.

An agent verifies the user tokens of the gateways it trusts (``trust.token_issuers``). A
gateway enrolled while the mesh runs is trusted the same way as a new key: its id is added to
the issuers' file (``trust.token_issuers_file``), and every running verifier follows the file
(:class:`~mesh.trust.files.WatchedFile`: a miss looks at once, rate-limited; holders look
periodically; a bad or vanished file keeps the names read before, with one warning).

The file holds one gateway id per line; ``#`` starts a comment. :func:`add_token_issuers` and
:func:`remove_token_issuers` change it under a lock and write it atomically.

No JOSE library here: ``mesh up`` and enrollment call the writers without loading it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from mesh.trust.files import MIN_CHECK_INTERVAL_S, WatchedFile, locked, write_atomic
from topics import validate_identifier

__all__ = ["TrustedIssuers", "add_token_issuers", "read_token_issuers", "remove_token_issuers"]

log = logging.getLogger("mesh.trust")


class TrustedIssuers:
    """The issuers trusted: ``names``, and those of the file ``path`` (may not exist yet)."""

    def __init__(
        self,
        names: Iterable[str] = (),
        path: Path | None = None,
        *,
        min_interval_s: float = MIN_CHECK_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.fixed = frozenset(names)
        self.path = path
        self._file: WatchedFile[frozenset[str]] | None = None
        if path is not None:
            self._file = WatchedFile(
                path,
                lambda data: frozenset(_parse(data.decode("utf-8"), path)),
                frozenset(),
                what="token issuers' file",
                min_interval_s=min_interval_s,
                clock=clock,
            )
            if path.exists():
                self._file.load()
            else:  # no gateway enrolled yet: nothing to warn about
                self._file.missing_is_known()

    def __repr__(self) -> str:
        return f"TrustedIssuers({sorted(self.names)}, path={self.path})"

    @property
    def names(self) -> frozenset[str]:
        """Every issuer trusted now."""
        return (self.fixed | self._file.value) if self._file is not None else self.fixed

    @property
    def generation(self) -> int:
        """How many times the file's names changed since they were first read."""
        return self._file.generation if self._file is not None else 0

    def __contains__(self, name: object) -> bool:
        """Whether ``name`` is trusted; a miss first looks whether the file gained it."""
        if not isinstance(name, str):
            return False
        if name in self.fixed or self._file is None:
            return name in self.fixed
        return name in self._file.value or (self._file.check() and name in self._file.value)

    def refresh(self) -> bool:
        """Look at the file now; True when its names changed."""
        return self._file.refresh() if self._file is not None else False

    def check(self, max_age_s: float | None = None) -> bool:
        """:meth:`refresh`, unless the file was looked at in the last ``max_age_s`` (rate-limited)."""
        return self._file.check(max_age_s) if self._file is not None else False


def read_token_issuers(path: Path) -> tuple[str, ...]:
    """The issuer names of the file ``path``, in order (none when it does not exist)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ()
    return tuple(_parse(text, path))


def add_token_issuers(path: Path, names: Iterable[str]) -> tuple[str, ...]:
    """Add ``names`` (gateway ids) to the issuers' file ``path`` (made if absent); returns its names.

    Atomic, under a lock (``.<file>.lock`` beside it): concurrent writers lose no name."""
    wanted = [validate_identifier(name, "gateway id") for name in names]
    return _change(path, lambda lines, present: lines + [name for name in dict.fromkeys(wanted) if name not in present])


def remove_token_issuers(path: Path, names: Iterable[str]) -> tuple[str, ...]:
    """Remove ``names`` from the issuers' file ``path``; returns the names left."""
    gone = {validate_identifier(name, "gateway id") for name in names}
    return _change(path, lambda lines, _present: [line for line in lines if _name_of(line) not in gone])


def _change(path: Path, edit: Callable[[list[str], set[str]], list[str]]) -> tuple[str, ...]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with locked(path.parent / f".{path.name}.lock"):
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            lines = ["# Gateways whose user tokens the mesh's agents trust, one id per line (mesh.trust.issuers)."]
        present = {name for line in lines if (name := _name_of(line))}
        changed = edit(lines, present)
        if changed != lines or not path.exists():
            write_atomic(path, "".join(line + "\n" for line in changed))
    return read_token_issuers(path)


def _name_of(line: str) -> str:
    return line.split("#", 1)[0].strip()


def _parse(text: str, path: Path) -> list[str]:
    names = []
    for number, line in enumerate(text.splitlines(), 1):
        name = _name_of(line)
        if not name:
            continue
        try:
            names.append(validate_identifier(name, "gateway id"))
        except ValueError as exc:  # one bad line does not cost the others their trust
            log.warning("%s:%d: %s; the line is ignored", path, number, exc)
    return names
