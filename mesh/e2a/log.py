"""NDJSON log of E2A responses (spec 12.7): one compact JSON line per frame, secrets redacted.

Every line starts with ``request_id``, ``response_id``, ``sequence``, ``is_final``,
``response_kind`` and ``timestamp`` so a log can be grepped, sorted and replayed by sequence.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import threading
from collections.abc import Mapping
from typing import IO, Any

from mesh.e2a.models import E2AResponse
from mesh.redaction import is_secret_key

REDACTED = "[redacted]"

log = logging.getLogger(__name__)

LOG_REQUIRED_KEYS: tuple[str, ...] = (
    "request_id",
    "response_id",
    "sequence",
    "is_final",
    "response_kind",
    "timestamp",
)


def redact(value: Any) -> Any:
    """A copy of ``value`` with every secret-named key's value replaced by ``"[redacted]"``.

    Header maps (``extra_headers``, and any ``headers`` object) keep their header names and
    lose every value: any header may carry a credential. ``None`` stays ``None``: there is
    nothing to hide and the null is informative.
    """
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        for key, item in value.items():
            name = str(key).lower()
            if item is None:
                out[key] = None
            elif name in ("extra_headers", "headers") and isinstance(item, Mapping):
                out[key] = {h: (None if v is None else REDACTED) for h, v in item.items()}
            elif name == "extra_headers" or is_secret_key(name):
                out[key] = REDACTED
            else:
                out[key] = redact(item)
        return out
    if isinstance(value, (list, tuple)):
        return [redact(item) for item in value]
    return value


def format_response_line(response: E2AResponse) -> str:
    """One compact, redacted JSON line (no trailing newline) for ``response``."""
    data = response.to_dict()
    ordered = {key: data.pop(key) for key in LOG_REQUIRED_KEYS}
    ordered.update(data)
    # default=str: a non-JSON value in a body must not lose the whole log line.
    return json.dumps(redact(ordered), separators=(",", ":"), ensure_ascii=False, default=str)


class ResponseLog:
    """Appends response lines to a file path or a text stream from a writer thread.

    :meth:`write` formats the line and queues it, so an event loop never waits on the disk; the
    writer thread writes what is queued and flushes once per batch. At most ``max_queued`` lines
    wait (a disk that stalls must not grow memory without bound): past it, lines are dropped,
    counted in :attr:`dropped` and logged. A log opened from a path owns the file and closes it
    in :meth:`close`; a stream passed in is flushed but left open.
    """

    def __init__(self, target: str | os.PathLike[str] | IO[str], *, max_queued: int = 10_000) -> None:
        if isinstance(target, (str, os.PathLike)):
            # Owned for the log's life and closed in close(), not in one block.
            self._stream: IO[str] = open(target, "a", encoding="utf-8")  # noqa: SIM115
            self._owns_stream = True
        else:
            self._stream = target
            self._owns_stream = False
        self._lines: queue.Queue[str | threading.Event | None] = queue.Queue(maxsize=max_queued)
        self.dropped = 0
        self._closed = False
        self._writer = threading.Thread(target=self._write_lines, name="e2a-response-log", daemon=True)
        self._writer.start()

    def write(self, response: E2AResponse) -> str:
        """Queue ``response``'s line for the log; returns the line (without its newline)."""
        line = format_response_line(response)
        if self._closed:
            return line
        try:
            self._lines.put_nowait(line)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("E2A response log: %d lines dropped, the disk does not keep up", self.dropped)
        return line

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued line is written and flushed; False if ``timeout`` passed first."""
        if self._closed:
            return True
        done = threading.Event()
        self._lines.put(done)  # set by the writer once the lines before it are out
        return done.wait(timeout)

    def close(self) -> None:
        """Write what is queued, stop the writer thread and close an owned file."""
        if self._closed:
            return
        self._closed = True
        self._lines.put(None)
        self._writer.join()
        if self._owns_stream and not self._stream.closed:
            self._stream.close()

    def _write_lines(self) -> None:
        while True:
            line = self._lines.get()
            batch = [line]
            while len(batch) < 512:  # flush at least every 512 lines
                try:
                    batch.append(self._lines.get_nowait())
                except queue.Empty:
                    break
            text = "".join(f"{item}\n" for item in batch if isinstance(item, str))
            try:
                if text:
                    self._stream.write(text)
                    self._stream.flush()
            except (OSError, ValueError) as exc:  # a full disk or a closed stream: say so, keep draining
                log.error("E2A response log: cannot write: %s", exc)
            for item in batch:
                if isinstance(item, threading.Event):
                    item.set()
            if None in batch:
                return

    def __enter__(self) -> ResponseLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
