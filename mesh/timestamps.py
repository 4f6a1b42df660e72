"""Timestamps as the mesh writes them: RFC 3339 / ISO 8601 strings in UTC."""

from __future__ import annotations

import time
from datetime import UTC, datetime

__all__ = ["utc_iso", "utc_now_iso"]


def utc_iso(at: float, *, timespec: str = "auto") -> str:
    """Epoch seconds as an RFC 3339 UTC string, e.g. ``2026-03-28T12:00:00.123+00:00``.

    ``timespec`` is :meth:`datetime.isoformat`'s (``"milliseconds"`` for event logs). Raises
    ``OverflowError``, ``OSError`` or ``ValueError`` for a time the platform cannot represent.
    """
    return datetime.fromtimestamp(at, UTC).isoformat(timespec=timespec)


def utc_now_iso() -> str:
    """Now, as A2A task statuses and E2A frames stamp it (microseconds)."""
    return utc_iso(time.time())
