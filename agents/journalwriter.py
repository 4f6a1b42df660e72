"""One writer thread per process for every SQLite task journal (:mod:`agents.sqlitejournal`).

A process serving a thousand agents would otherwise run a thousand writer threads. The
journals hand their batches to :func:`shared_writer`, whose thread commits them in order,
each journal's pending batches in one transaction, and tells each journal's event loop how far
its batches are stored. The semantics stay the journal's own: requests are acknowledged after
the commit, and each journal bounds its own backlog.

The thread starts with the first journal and then lives as long as the process (a daemon
thread, idle on its queue): one thread, not one per journal. It also closes the files of the
journals that had nothing to write for :data:`IDLE_CLOSE_S` (they open them again when they do).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import ctypes
import ctypes.util
import logging
import queue
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import asyncio

__all__ = ["IDLE_CLOSE_S", "JournalWriter", "Writable", "shared_writer"]

log = logging.getLogger(__name__)

#: A journal's file is closed after this long with nothing to write, and opened again on demand.
IDLE_CLOSE_S = 5.0


class Writable(Protocol):
    """What the writer needs of a journal: commit batches, and the loop to tell."""

    loop: asyncio.AbstractEventLoop | None

    def commit(self, batches: list[object]) -> int:
        """Commit ``batches`` (writer thread); return the number of the last one."""
        ...

    def stored_up_to(self, number: int) -> None:
        """On the journal's loop: batches up to ``number`` are committed."""
        ...

    def close_if_idle(self, now: float, idle_s: float) -> bool:
        """Close the file if nothing was written for ``idle_s`` (writer thread); whether it is closed."""
        ...


_Item = tuple[Writable, object | concurrent.futures.Future[None]]


class JournalWriter:
    """A thread that commits the batches of many journals (see the module doc)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def submit(self, journal: Writable, batch: object) -> None:
        """Commit ``batch`` for ``journal``, after the batches handed before it."""
        self._ensure_thread()
        self._queue.put((journal, batch))

    def barrier(self, journal: Writable) -> concurrent.futures.Future[None]:
        """A future done once every batch ``journal`` handed over so far is committed."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._ensure_thread()
        self._queue.put((journal, done))
        return done

    def _ensure_thread(self) -> None:
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="task-journals", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        open_files: set[Writable] = set()  # journals written to whose files may still be open
        next_sweep = 0.0
        while True:
            try:
                items = [self._queue.get(timeout=IDLE_CLOSE_S if open_files else None)]
            except queue.Empty:
                items = []
            while True:  # everything queued meanwhile: one transaction per journal
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            pending: dict[Writable, list[object]] = {}
            for journal, item in items:
                if isinstance(item, concurrent.futures.Future):
                    self._commit(journal, pending.pop(journal, []))
                    item.set_result(None)
                else:
                    pending.setdefault(journal, []).append(item)
                    open_files.add(journal)
            for journal, batches in pending.items():
                self._commit(journal, batches)
            now = time.monotonic()
            if now >= next_sweep:  # at most once a second, however busy
                next_sweep = now + 1.0
                still_open = {journal for journal in open_files if not journal.close_if_idle(now, IDLE_CLOSE_S)}
                if len(still_open) < len(open_files):
                    _return_freed_memory()
                open_files = still_open

    @staticmethod
    def _commit(journal: Writable, batches: list[object]) -> None:
        if not batches:
            return
        try:
            last = journal.commit(batches)
        except Exception:  # a bug, not a disk error (the journal handles those): keep the others going
            log.exception("committing the tasks of %r failed", journal)
            return
        loop = journal.loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
                loop.call_soon_threadsafe(journal.stored_up_to, last)


def _load_malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None elsewhere (musl, macOS)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim: Callable[[int], int] = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


_malloc_trim = _load_malloc_trim() if sys.platform.startswith("linux") else None


def _return_freed_memory() -> None:
    """Give the heap's free pages back to the system. A burst of work opens many journal files at
    once (~150 KB each); glibc keeps what their closing freed, so without this the process would
    stay at its peak while its agents sit idle."""
    if _malloc_trim is not None:
        _malloc_trim(0)  # ctypes releases the GIL for the call


_shared = JournalWriter()


def shared_writer() -> JournalWriter:
    """The process's writer."""
    return _shared
