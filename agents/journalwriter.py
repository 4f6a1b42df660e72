"""One writer process per event loop for every SQLite task journal (:mod:`agents.sqlitejournal`).

The journals hand their batches to :func:`writer_for` their loop, whose process
(:mod:`agents.journalproc`) commits them in order, each journal's waiting batches in one
transaction, and tells the loop how far each journal's batches are stored. The semantics stay
the journal's own: requests are acknowledged after the commit, and each journal bounds its own
backlog (what the pipe cannot take at once waits here, counted in that backlog).

Why a process and not a thread: a thread shares the GIL with the event loop. Each SQLite call
releases it and takes it back, and each time the loop, back from a socket call, waits for the
thread to be scheduled. Measured on a 2-vCPU VM, a handoff cost the loop ~0.5 ms of CPU and an
echo agent 8-11% of its throughput; through a pipe, the loop pays a write and a read per batch.

The process starts with the first journal of the loop and ends when the last one closes (the
pipe closed, it exits). If it dies meanwhile, another is started and sent every batch not yet
confirmed (writing a batch twice leaves the file as writing it once). If that one dies too
without committing anything, the journals are told their batches failed: they log it, serve
their tasks from memory and acknowledge their requests, as when the disk fails.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import subprocess
import sys
import weakref
from collections import deque
from pathlib import Path
from typing import Any, Protocol

from agents.journalproc import decode_frames, encode_frame

__all__ = ["IDLE_CLOSE_S", "JournalWriter", "Writable", "writer_for"]

log = logging.getLogger(__name__)

#: A journal's file is closed after this long with nothing to write, and opened again on demand.
IDLE_CLOSE_S = 5.0
_SCRIPT = Path(__file__).with_name("journalproc.py")
_CLOSE = -1  # the number of a close request among a journal's unconfirmed frames


class Writable(Protocol):
    """What the writer needs of a journal: its file, and what to tell it."""

    path: Path

    def stored_up_to(self, number: int, error: str | None = None) -> None:
        """On the journal's loop: batches up to ``number`` are committed (or failed with ``error``)."""
        ...


class JournalWriter:
    """The writer process of one event loop's journals (see the module doc)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)  # not kept alive by its writer (see writer_for)
        self._proc: subprocess.Popen[bytes] | None = None
        self._end: weakref.finalize[[subprocess.Popen[bytes]], JournalWriter] | None = None
        self._to_child = -1
        self._from_child = -1
        self._ids = itertools.count(1)
        self._journals: dict[int, Writable] = {}
        # Per journal, the frames sent and not yet confirmed (its batch number, or _CLOSE): resent
        # to a new process if this one dies.
        self._unconfirmed: dict[int, deque[tuple[int, bytes]]] = {}
        self._closing: dict[int, asyncio.Future[None]] = {}
        self._out = bytearray()  # what the pipe could not take yet
        self._in = bytearray()
        self._confirmed = False  # the running process committed something
        self._failed_starts = 0
        self._gave_up: str | None = None

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        loop = self._loop()
        if loop is None:
            raise RuntimeError("the journals' event loop is gone")
        return loop

    @property
    def pid(self) -> int | None:
        """The writer process's id while it runs."""
        return self._proc.pid if self._proc is not None else None

    def register(self, journal: Writable) -> int:
        """A journal that will hand batches; its id for :meth:`submit` and :meth:`close_journal`."""
        jid = next(self._ids)
        self._journals[jid] = journal
        self._unconfirmed[jid] = deque()
        return jid

    def submit(self, jid: int, number: int, batch: tuple[Any, ...]) -> None:
        """Commit batch ``number`` of journal ``jid`` (its rows, deletions and push configs), after
        the batches it handed before."""
        journal = self._journals[jid]
        self._send(jid, number, encode_frame(("w", jid, str(journal.path), number, *batch)))

    async def close_journal(self, jid: int) -> None:
        """Wait until what journal ``jid`` handed is committed, and close its file."""
        if self._proc is None and not self._unconfirmed.get(jid):  # nothing to wait for: no process to start
            self._closed(jid)
            return
        closed = self.loop.create_future()
        self._closing[jid] = closed
        self._send(jid, _CLOSE, encode_frame(("c", jid)))
        await closed

    # ------------------------------------------------------------------ the pipe

    def _send(self, jid: int, number: int, frame: bytes) -> None:
        if self._gave_up is not None:
            self._fail(jid, number)
            return
        self._unconfirmed[jid].append((number, frame))
        if self._proc is None:
            self._start()  # which sends what is unconfirmed, this frame with it
        else:
            self._write(frame)

    def _write(self, frame: bytes) -> None:
        if self._out:  # the pipe is full: after what waits
            self._out += frame
            return
        try:
            written = os.write(self._to_child, frame)
        except BlockingIOError:
            written = 0
        except OSError:  # a broken pipe: the process is gone
            self._lost()
            return
        if written < len(frame):
            self._out += frame[written:]
            self.loop.add_writer(self._to_child, self._drain)

    def _drain(self) -> None:
        try:
            written = os.write(self._to_child, self._out)
        except BlockingIOError:
            return
        except OSError:  # a broken pipe: the process is gone
            self._lost()
            return
        del self._out[:written]
        if not self._out:
            self.loop.remove_writer(self._to_child)

    def _readable(self) -> None:
        try:
            chunk = os.read(self._from_child, 1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            self._lost()
            return
        self._in += chunk
        for frame in decode_frames(self._in):
            if frame[0] == "s":
                _kind, jid, number, error = frame
                self._confirm(jid, number)
                if (journal := self._journals.get(jid)) is not None:
                    journal.stored_up_to(number, error)
            elif frame[0] == "c":
                self._closed(frame[1])

    def _confirm(self, jid: int, number: int) -> None:
        self._confirmed = True
        frames = self._unconfirmed.get(jid)
        while frames and frames[0][0] != _CLOSE and frames[0][0] <= number:
            frames.popleft()

    def _closed(self, jid: int) -> None:
        self._journals.pop(jid, None)
        self._unconfirmed.pop(jid, None)
        if (closed := self._closing.pop(jid, None)) is not None and not closed.done():
            closed.set_result(None)
        if not self._journals:  # close the pipe, on which the process exits (its files closed)
            self._detach()

    # ------------------------------------------------------------------ the process

    def _start(self) -> None:
        """Start the process and send it what is unconfirmed."""
        try:
            proc = subprocess.Popen(  # noqa: S603 - our own argument list, no shell
                [sys.executable, "-I", str(_SCRIPT), repr(IDLE_CLOSE_S)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        except OSError as exc:
            self._give_up(f"the task journals' writer process could not start: {exc}")
            return
        if proc.stdin is None or proc.stdout is None:  # never: both are PIPE
            raise RuntimeError("the writer process has no pipes")
        self._proc, self._confirmed, self._out, self._in = proc, False, bytearray(), bytearray()
        # Ends it if the writer is dropped with it running (its loop gone, journals never closed),
        # or at the interpreter's exit: pipes closed, the process waited for.
        self._end = weakref.finalize(self, _end_process, proc)
        self._to_child, self._from_child = proc.stdin.fileno(), proc.stdout.fileno()
        os.set_blocking(self._to_child, False)
        os.set_blocking(self._from_child, False)
        self.loop.add_reader(self._from_child, self._readable)
        for frames in list(self._unconfirmed.values()):
            for _number, frame in list(frames):
                if self._proc is not proc:  # it died already, and _lost() took over
                    return
                self._write(frame)

    def _detach(self) -> subprocess.Popen[bytes] | None:
        """Stop reading and writing the process, close its pipes and wait for it to end."""
        proc, self._proc = self._proc, None
        if proc is not None:
            self.loop.remove_reader(self._from_child)
            self.loop.remove_writer(self._to_child)
            if self._end is not None:
                self._end()
        return proc

    def _lost(self) -> None:
        """The process died (or closed its pipe): start another, or give up (see the module doc)."""
        confirmed = self._confirmed
        proc = self._detach()
        if proc is None:
            return
        code = proc.returncode
        if not self._journals:
            return
        self._failed_starts = 1 if confirmed else self._failed_starts + 1
        how = f"the task journals' writer process (pid {proc.pid}) exited with code {code}"
        if self._failed_starts >= 2:
            self._give_up(f"{how}, twice without committing anything")
            return
        log.warning("%s; starting another and sending it the batches not yet stored", how)
        self._start()

    def _give_up(self, reason: str) -> None:
        log.error("%s; tasks are kept in memory only, and requests are acknowledged without them", reason)
        self._gave_up = reason
        self._detach()
        for jid, frames in list(self._unconfirmed.items()):
            while frames:
                self._fail(jid, frames.popleft()[0])

    def _fail(self, jid: int, number: int) -> None:
        """What failing batch ``number`` (or a close) of journal ``jid`` tells the journal."""
        if number == _CLOSE:
            self.loop.call_soon(self._closed, jid)
        elif (journal := self._journals.get(jid)) is not None:
            self.loop.call_soon(journal.stored_up_to, number, self._gave_up)


def _end_process(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout):
        if pipe is not None:
            pipe.close()
    try:
        proc.wait(5)  # with its pipe closed, it exits: milliseconds
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


_writers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, JournalWriter] = weakref.WeakKeyDictionary()


def writer_for(loop: asyncio.AbstractEventLoop) -> JournalWriter:
    """The writer of ``loop``'s journals."""
    writer = _writers.get(loop)
    if writer is None:
        writer = _writers[loop] = JournalWriter(loop)
    return writer
