"""NDJSON framing: one compact JSON object per ``\\n``-terminated line.

Reading never fails on bad input: a line that is not JSON, is longer than ``max_line_bytes``,
or is not an object is reported once (to ``on_bad``) and skipped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from agents.a2e.messages import A2EMessage

__all__ = ["DEFAULT_MAX_LINE_BYTES", "ByteSource", "encode", "read_objects"]

log = logging.getLogger(__name__)

DEFAULT_MAX_LINE_BYTES = 4 * 1024 * 1024
_CHUNK = 64 * 1024


class ByteSource(Protocol):
    async def read(self, n: int = -1, /) -> bytes: ...


def encode(message: A2EMessage) -> bytes:
    """The message as one NDJSON line (compact, UTF-8, ``\\n`` at the end)."""
    return message.model_dump_json().encode() + b"\n"


def _parse(line: bytes) -> tuple[dict[str, Any] | None, str]:
    try:
        value = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"not JSON ({exc})"
    if not isinstance(value, dict):
        return None, f"a JSON {type(value).__name__}, not an object"
    return value, ""


async def read_objects(
    source: ByteSource,
    *,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    on_bad: Callable[[str, bytes], None],
) -> AsyncIterator[dict[str, Any]]:
    """The JSON objects read from ``source`` until end of file; ``on_bad(reason, head)`` for the rest.

    Reads in chunks rather than with ``readline`` so a line over the limit is skipped without
    ever being held whole.
    """
    buffer = bytearray()
    skipping = 0  # > 0 while dropping the rest of a too-long line: its length so far
    head = b""
    while True:
        chunk = await source.read(_CHUNK)
        if not chunk:
            break
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            if skipping:
                skipping += len(piece)
                if end >= 0:
                    on_bad(f"a line of {skipping} bytes, over the limit of {max_line_bytes}", head)
                    skipping = 0
            else:
                buffer += piece
                if len(buffer) > max_line_bytes:
                    skipping = len(buffer)
                    head = bytes(buffer[:80])
                    buffer.clear()
                    if end >= 0:
                        on_bad(f"a line of {skipping} bytes, over the limit of {max_line_bytes}", head)
                        skipping = 0
                elif end >= 0:
                    line = bytes(buffer)
                    buffer.clear()
                    if line.strip():
                        obj, problem = _parse(line)
                        if obj is None:
                            on_bad(problem, line[:80])
                        else:
                            yield obj
            if end < 0:
                break
            start = end + 1
    if skipping:
        on_bad(f"a line of {skipping} bytes, over the limit of {max_line_bytes}, cut off by end of file", head)
    elif buffer.strip():
        obj, problem = _parse(bytes(buffer))
        if obj is None:
            on_bad(problem + " (cut off by end of file)", bytes(buffer[:80]))
        else:
            yield obj
