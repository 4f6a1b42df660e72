"""The writer process of the SQLite task journals (:mod:`agents.journalwriter` runs it).

Run as ``python -I journalproc.py IDLE_CLOSE_S``: the standard library only, so it starts in a
few tens of milliseconds and needs nothing of the agent's environment. It reads batches on
stdin and answers on stdout, each frame a 4-byte little-endian length and a :mod:`marshal`
tuple (both ends are this module's and :mod:`agents.journalwriter`'s code, over a private pipe):

- in: ``("w", jid, path, number, rows, deleted, deleted_rows, push_configs)``, a journal's
  batch; ``("c", jid)``, commit what that journal handed before and close its file;
- out: ``("s", jid, number, error)``, the journal's batches up to ``number`` are committed
  (``error``: why they could not be, or None); ``("c", jid)``, its file is closed.

What arrives together is committed together: each journal's batches in one transaction.
A file with nothing written for ``IDLE_CLOSE_S`` is closed (a SQLite connection holds
~150 KB) and opened again for the next batch. Ctrl-C, which reaches the whole process group,
is ignored: the agent stops first, and its journals hand their last batches here before it
closes the pipe, on which this process exits.
"""

from __future__ import annotations

import contextlib
import functools
import marshal
import os
import select
import signal
import sqlite3
import struct
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["SCHEMA", "Batch", "commit", "connect", "decode_frames", "encode_frame", "in_transaction"]

_T = TypeVar("_T")

# Rows are keyed by the order the journal first wrote each task (seq), not by the task id: ids
# are random, so an index on them puts every insert on another page (~3x the CPU of a commit,
# measured at 23 rows a commit); in seq order, new rows go to the end of the table and retention
# deletes from its start. The journal keeps each task's seq in memory (it holds every task anyway).
SCHEMA = """
CREATE TABLE IF NOT EXISTS task_rows (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL,
    request_key TEXT,
    terminal INTEGER NOT NULL,
    changed_at REAL NOT NULL,
    task BLOB NOT NULL,
    owner TEXT
);
CREATE TABLE IF NOT EXISTS push_configs (
    task_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    config BLOB NOT NULL,
    PRIMARY KEY (task_id, position)
);
"""
_ROW = "(?, ?, ?, ?, ?, ?, ?)"
_UPSERT = (
    "INSERT INTO task_rows (seq, id, request_key, terminal, changed_at, task, owner) VALUES (?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT(seq) DO UPDATE SET terminal = excluded.terminal, changed_at = excluded.changed_at, "
    "task = excluded.task, owner = excluded.owner"
)
#: Rows (or ids) in one statement: 7 values a row, within the 999 variables of older SQLite builds.
_ROWS_PER_STATEMENT = 128
_LENGTH = struct.Struct("<I")

#: A batch as the frame carries it: (number, rows, deleted task ids, deleted seqs, push configs).
Batch = tuple[int, list[tuple[Any, ...]], list[str], list[int], dict[str, list[bytes]]]
_Statement = tuple[str, Sequence[object]]


def encode_frame(message: tuple[Any, ...]) -> bytes:
    payload = marshal.dumps(message)
    return _LENGTH.pack(len(payload)) + payload


def decode_frames(buffer: bytearray) -> list[tuple[Any, ...]]:
    """The whole frames at the start of ``buffer``, which keeps the rest."""
    frames = []
    start = 0
    while len(buffer) - start >= _LENGTH.size:
        (size,) = _LENGTH.unpack_from(buffer, start)
        end = start + _LENGTH.size + size
        if len(buffer) < end:
            break
        # Only this module's and agents.journalwriter's own frames, over the pipe between them.
        frames.append(marshal.loads(bytes(buffer[start + _LENGTH.size : end])))  # noqa: S302
        start = end
    del buffer[:start]
    return frames


def commit(db: sqlite3.Connection, batches: list[Batch]) -> None:
    """Write ``batches`` in one transaction (one statement is a transaction of its own)."""
    statements = [statement for batch in batches for statement in _statements(batch)]
    if len(statements) == 1:
        db.execute(*statements[0])
    elif statements:
        in_transaction(db, statements)


def in_transaction(db: sqlite3.Connection, statements: list[_Statement]) -> None:
    try:
        db.execute("BEGIN")
        for sql, values in statements:
            db.execute(sql, values)
        db.execute("COMMIT")
    except sqlite3.Error:
        with contextlib.suppress(sqlite3.Error):
            db.execute("ROLLBACK")
        raise


def _statements(batch: Batch) -> list[_Statement]:
    """What writes ``batch``, in order: its deletions, its rows (a later row of a task updates an
    earlier one), its push configurations."""
    _number, rows, deleted, deleted_rows, push_configs = batch
    statements: list[_Statement] = []
    for seqs in _chunks(deleted_rows):
        statements.append((_in_ids("DELETE FROM task_rows WHERE seq IN ", len(seqs)), seqs))
    for ids in _chunks(deleted):
        statements.append((_in_ids("DELETE FROM push_configs WHERE task_id IN ", len(ids)), ids))
    for chunk in _chunks(rows):
        statements.append((_upsert_rows(len(chunk)), [value for row in chunk for value in row]))
    for task_id, configs in push_configs.items():
        statements.append(("DELETE FROM push_configs WHERE task_id = ?", [task_id]))
        for position, config in enumerate(configs):
            statements.append(
                ("INSERT INTO push_configs (task_id, position, config) VALUES (?, ?, ?)", [task_id, position, config])
            )
    return statements


def _chunks(items: list[_T]) -> Iterator[list[_T]]:
    for start in range(0, len(items), _ROWS_PER_STATEMENT):
        yield items[start : start + _ROWS_PER_STATEMENT]


@functools.cache
def _upsert_rows(count: int) -> str:
    """The upsert of ``count`` rows in one statement."""
    return _UPSERT.replace(_ROW, ", ".join([_ROW] * count), 1)


@functools.cache
def _in_ids(statement: str, count: int) -> str:
    return f"{statement}({', '.join(['?'] * count)})"


def connect(path: Path | str) -> sqlite3.Connection:
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    try:
        db.execute("PRAGMA synchronous=NORMAL")
    except sqlite3.Error:
        db.close()
        raise
    return db


def open_for_writing(path: Path) -> sqlite3.Connection:
    """A connection to write ``path``; the file made from the template if it is not there yet."""
    if create_empty(path) or path.exists():
        return connect(path)
    db = connect(path)  # no template (no scratch directory): SQLite makes the file itself
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.executescript(SCHEMA)
    except sqlite3.Error:
        db.close()
        raise
    return db


@functools.cache
def _empty_file() -> bytes:
    """The bytes of a new journal (WAL mode, the schema), made once per process: creating each
    file through SQLite costs ~1.5 ms of CPU (1.5 s at a start of 1,000 agents), copying ~0.1."""
    with tempfile.TemporaryDirectory(prefix="mesh-journal-") as scratch:
        path = Path(scratch) / "empty.sqlite3"
        db = sqlite3.connect(path, isolation_level=None)
        try:
            db.execute("PRAGMA journal_mode=WAL")  # kept in the file's header
            db.executescript(SCHEMA)
        finally:
            db.close()  # checkpoints: the file alone holds it all
        return path.read_bytes()


def create_empty(path: Path) -> bool:
    """Create ``path`` as a new, empty journal unless it exists; whether it was created here.

    Written beside it and linked into place: ``path`` is never a partial file, and a file
    someone else created meanwhile is kept (then read as any existing one).
    """
    if path.exists():
        return False
    try:
        empty = _empty_file()
    except (OSError, sqlite3.Error):  # no scratch directory: SQLite creates the file itself
        return False
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}.new")
    try:
        partial.write_bytes(empty)
        os.link(partial, path)
    except FileExistsError:
        return False
    finally:
        partial.unlink(missing_ok=True)
    return True


class _Files:
    """The open journal files, by journal id, and when each was last written."""

    def __init__(self, idle_s: float) -> None:
        self.idle_s = idle_s
        self.open: dict[int, tuple[sqlite3.Connection, float]] = {}

    def write(self, jid: int, path: str, batches: list[Batch]) -> str | None:
        """Commit ``batches``; why they could not be, or None."""
        try:
            db = self.open[jid][0] if jid in self.open else open_for_writing(Path(path))
            self.open[jid] = (db, time.monotonic())
            commit(db, batches)
        except (sqlite3.Error, OSError) as exc:  # the disk, the file's directory, its permissions
            return str(exc)
        except Exception as exc:  # text no SQLite value can carry, or a bug: reported, not fatal
            return f"{type(exc).__name__}: {exc}"
        return None

    def close(self, jid: int) -> None:
        if (entry := self.open.pop(jid, None)) is not None:
            entry[0].close()

    def close_idle(self) -> None:
        now = time.monotonic()
        for jid in [jid for jid, (_db, written) in self.open.items() if now - written >= self.idle_s]:
            self.close(jid)


def _serve(frames: list[tuple[Any, ...]], files: _Files) -> list[bytes]:
    """Commit what ``frames`` hand over (each journal's batches together); the replies."""
    replies: list[bytes] = []
    pending: dict[int, tuple[str, list[Batch]]] = {}

    def write(jid: int) -> None:
        if (work := pending.pop(jid, None)) is not None:
            path, batches = work
            error = files.write(jid, path, batches)
            replies.append(encode_frame(("s", jid, batches[-1][0], error)))

    for frame in frames:
        if frame[0] == "w":
            _kind, jid, path, *batch = frame
            pending.setdefault(jid, (path, []))[1].append(tuple(batch))
        elif frame[0] == "c":
            jid = frame[1]
            write(jid)
            files.close(jid)
            replies.append(encode_frame(("c", jid)))
    for jid in list(pending):
        write(jid)
    return replies


def _send(data: bytes) -> bool:
    """Write ``data`` to the agent; whether it is still there to read it."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(1, view) :]
    except BrokenPipeError:
        return False
    return True


def main(argv: list[str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # see the module doc
    files = _Files(float(argv[1]) if len(argv) > 1 else 5.0)
    buffer = bytearray()
    next_sweep = 0.0
    while True:
        ready, _, _ = select.select([0], [], [], min(files.idle_s, 1.0) if files.open else None)
        if ready:
            chunk = os.read(0, 1 << 20)
            if not chunk:  # the agent closed the pipe (or died): nothing more will come
                break
            buffer += chunk
            replies = _serve(decode_frames(buffer), files)
            if replies and not _send(b"".join(replies)):
                break
        now = time.monotonic()
        if now >= next_sweep:  # at most once a second, however busy
            next_sweep = now + 1.0
            files.close_idle()
    for jid in list(files.open):
        files.close(jid)


if __name__ == "__main__":
    main(sys.argv)
