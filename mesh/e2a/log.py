"""NDJSON log of E2A responses (spec 12.7): one compact JSON line per frame, secrets redacted.

Every line starts with ``request_id``, ``response_id``, ``sequence``, ``is_final``,
``response_kind`` and ``timestamp`` so a log can be grepped, sorted and replayed by sequence.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping
from typing import IO, Any

from mesh.e2a.models import E2AResponse
from mesh.redaction import is_secret_key

REDACTED = "[redacted]"

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
    """Appends response lines to a file path or a text stream, flushing after each line.

    A lock serializes writes, so one log may be shared by threads (or by tasks of one event
    loop; a write is a short blocking call). A log opened from a path owns the file and closes
    it in :meth:`close`; a stream passed in is flushed but left open.
    """

    def __init__(self, target: str | os.PathLike[str] | IO[str]) -> None:
        if isinstance(target, (str, os.PathLike)):
            self._stream: IO[str] = open(target, "a", encoding="utf-8")
            self._owns_stream = True
        else:
            self._stream = target
            self._owns_stream = False
        self._lock = threading.Lock()

    def write(self, response: E2AResponse) -> str:
        """Log ``response``; returns the line written (without its newline)."""
        line = format_response_line(response)
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()
        return line

    def close(self) -> None:
        with self._lock:
            if self._owns_stream and not self._stream.closed:
                self._stream.close()

    def __enter__(self) -> ResponseLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
