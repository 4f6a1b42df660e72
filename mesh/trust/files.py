"""The trust files as running components see them: read again when they change, written whole.

DESIGN, "Trust": a component started later is trusted by every running registry within
seconds, and trust comes only from the state directory. So the files that say whom to trust
(``jwks.json``, the token issuers' file) are *watched*: :class:`WatchedFile` compares the
file's ``os.stat`` (``st_mtime_ns``, ``st_size``, ``st_ino``) with the one it last read and
parses the file again only when it differs. A check costs one ``stat``; :meth:`WatchedFile.check`
makes at most one per :data:`MIN_CHECK_INTERVAL_S`, whoever asks.

A file that is missing, unreadable or does not parse keeps the value last read and logs one
warning per version of the file (not one per check); a check never raises.

Writers go through :func:`locked` and :func:`write_atomic`: an exclusive ``flock`` around
read-modify-write, so two processes adding a name at once never lose one's, and a temporary
file renamed over the old one, so a reader never sees half a file (and the new inode changes
the stamp even within one tick of the file system's clock).

No JOSE library here: the token issuers' file is read without it.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Generic, TypeVar

from mesh.errors import ConfigError

__all__ = ["MIN_CHECK_INTERVAL_S", "POLL_INTERVAL_S", "WatchedFile", "locked", "write_atomic"]

log = logging.getLogger("mesh.trust")

#: The least time between two looks at a watched file (a burst of unknown kids costs one stat).
MIN_CHECK_INTERVAL_S = 0.05
#: How often long-lived holders (registries, token verifiers) look for a change: DESIGN says
#: "within seconds"; half a second of stat calls costs nothing.
POLL_INTERVAL_S = 0.5
# A file modified this recently may be modified again within the file system's timestamp
# granularity with the same size (an in-place writer): read it again at the next check.
_RACY_NS = 100_000_000

T = TypeVar("T")
Stamp = tuple[int, int, int]
_MISSING = (-1, -1, -1)


class WatchedFile(Generic[T]):
    """``parse(bytes)`` of the file at ``path``, parsed again when the file changes.

    ``value`` is what the last good read parsed (``initial`` before); ``generation`` counts
    the changes of ``value``. Thread-safe: a check from the event loop never waits for a read
    in progress on another thread (it skips).
    """

    def __init__(
        self,
        path: Path,
        parse: Callable[[bytes], T],
        initial: T,
        *,
        what: str,
        min_interval_s: float = MIN_CHECK_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = path
        self.what = what
        self.value = initial
        self.generation = 0
        self._parse = parse
        self._min_interval_s = min_interval_s
        self._clock = clock
        self._stamp: Stamp | None = None  # of the version last read (good or bad)
        self._racy = False
        self._warned: Stamp | None = None  # the version last warned about (_MISSING: its absence)
        self._checked = -float("inf")
        self._lock = threading.Lock()

    def load(self) -> None:
        """Read and parse the file now; unlike a check, raise what goes wrong (a bad start):
        :class:`~mesh.errors.ConfigError` when it cannot be read, else what ``parse`` raises."""
        with self._lock:
            try:
                stamp, data = self._read()
            except OSError as exc:
                raise ConfigError(
                    f"{self.path}: cannot read the {self.what} ({exc.strerror}); check the path"
                ) from None
            self.value = self._parse(data)
            self._settle(stamp)

    def missing_is_known(self) -> None:
        """Take the file's absence as known: no warning until it has been there and is gone again."""
        self._warned = _MISSING

    def check(self, max_age_s: float | None = None) -> bool:
        """:meth:`refresh` unless the file was looked at in the last ``max_age_s`` (default
        :data:`MIN_CHECK_INTERVAL_S`) or a refresh runs on another thread; True: ``value`` changed."""
        limit = self._min_interval_s if max_age_s is None else max(max_age_s, self._min_interval_s)
        now = self._clock()
        if now - self._checked < limit or not self._lock.acquire(blocking=False):
            return False
        try:
            self._checked = now
            return self._refresh()
        finally:
            self._lock.release()

    def refresh(self) -> bool:
        """Look at the file now, and parse it again if it changed; True: ``value`` changed.

        Not counted by the rate limit of :meth:`check`: a periodic refresh just before a key is
        written must not delay the look a card of that key makes."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> bool:
        try:
            stat = os.stat(self.path)
        except OSError as exc:
            self._warn(_MISSING, f"cannot read it ({exc.strerror})")
            return False
        if _stamp(stat) == self._stamp and not self._racy:
            return False
        try:
            stamp, data = self._read()
        except OSError as exc:  # there but unreadable (its mode), or gone since the stat
            self._warn(_stamp(stat), f"cannot read it ({exc.strerror})")
            return False
        try:
            value = self._parse(data)
        except Exception as exc:  # whatever a bad file makes the parser raise, the holder keeps going
            self._settle(stamp)
            self._warn(stamp, str(exc))
            return False
        self._settle(stamp)
        self._warned = None
        if value == self.value:
            return False
        self.value = value
        self.generation += 1
        return True

    def _read(self) -> tuple[Stamp, bytes]:
        with open(self.path, "rb") as file:  # the stamp of what is read, not of what was stat'ed
            return _stamp(os.fstat(file.fileno())), file.read()

    def _settle(self, stamp: Stamp) -> None:
        self._stamp = stamp
        self._racy = time.time_ns() - stamp[0] < _RACY_NS

    def _warn(self, version: Stamp, problem: str) -> None:
        if self._warned == version:
            return
        self._warned = version
        log.warning("%s %s: %s; keeping the %s read before", self.what, self.path, problem, self.what)


def _stamp(stat: os.stat_result) -> Stamp:
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


@contextlib.contextmanager
def locked(lock_file: Path) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_file`` (created, mode 0600), across processes."""
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def write_atomic(path: Path, text: str, *, mode: int = 0o644) -> None:
    """Replace ``path`` by a file holding ``text`` (``mode``): readers see the old file or the new one."""
    # The temporary name ends in .tmp: a directory listing of *.jwk never sees it.
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            os.fchmod(file.fileno(), mode)
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
