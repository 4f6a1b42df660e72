"""NDJSON framing: one compact JSON object per ``\\n``-terminated line.

Reading never fails on bad input: a line that is not JSON, is longer than ``max_line_bytes``,
or is not an object is reported once (to ``on_bad``) and skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_core import from_json

from agents.a2e.messages import A2EMessage

__all__ = ["DEFAULT_MAX_LINE_BYTES", "NdjsonDecoder", "encode"]

DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024


def encode(message: A2EMessage) -> bytes:
    """The message as one NDJSON line (compact, UTF-8, ``\\n`` at the end)."""
    return message.model_dump_json().encode() + b"\n"


class NdjsonDecoder:
    """Turns bytes, fed as they arrive, into JSON objects; ``on_bad(reason, head)`` for the rest.

    A line over the limit is dropped as it streams in, never held whole.
    """

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, on_bad: Callable[[str, bytes], None]) -> None:
        self.max_line_bytes = max_line_bytes
        self._on_bad = on_bad
        self._buffer = bytearray()
        self._skipping = 0  # > 0 while dropping the rest of a too-long line: its length so far
        self._head = b""

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """The objects completed by ``data``."""
        found: list[dict[str, Any]] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            piece = data[start:] if end < 0 else data[start:end]
            if self._skipping:
                self._skipping += len(piece)
                if end >= 0:
                    self._too_long("")
            else:
                self._buffer += piece
                if len(self._buffer) > self.max_line_bytes:
                    self._skipping, self._head = len(self._buffer), bytes(self._buffer[:80])
                    self._buffer.clear()
                    if end >= 0:
                        self._too_long("")
                elif end >= 0:
                    self._line(found, "")
            if end < 0:
                return found
            start = end + 1

    def close(self) -> list[dict[str, Any]]:
        """At end of input: the last line if it lacked its ``\\n``."""
        found: list[dict[str, Any]] = []
        if self._skipping:
            self._too_long(", cut off by end of file")
        elif self._buffer.strip():
            self._line(found, " (cut off by end of file)")
        return found

    def _line(self, found: list[dict[str, Any]], note: str) -> None:
        line = bytes(self._buffer)
        self._buffer.clear()
        if not line.strip():
            return
        try:
            value = from_json(line)  # pydantic's parser: a third of json.loads' time per line
        except ValueError as exc:  # not JSON, or not UTF-8
            self._on_bad(f"not JSON ({exc}){note}", line[:80])
            return
        if isinstance(value, dict):
            found.append(value)
        else:
            self._on_bad(f"a JSON {type(value).__name__}, not an object{note}", line[:80])

    def _too_long(self, note: str) -> None:
        self._on_bad(f"a line of {self._skipping} bytes, over the limit of {self.max_line_bytes}{note}", self._head)
        self._skipping = 0
