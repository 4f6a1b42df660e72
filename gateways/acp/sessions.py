"""The sessions ``mesh acp`` opened, kept on disk so an editor can list and load them later.

One JSON file per namespace (``<state dir>/<namespace>/acp-sessions.json``): for each session
its agent, working directory, title (the first prompt's start), last update and the ids of
its tasks. The conversation itself stays with the agent (its task store);
``session/load`` fetches it from there with ``tasks/get``.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from mesh.config.statedir import namespace_state_dir
from mesh.timestamps import utc_now_iso

__all__ = ["SessionRecord", "SessionStore"]

log = logging.getLogger(__name__)

MAX_SESSIONS = 500  # the oldest are forgotten beyond this


@dataclass(slots=True)
class SessionRecord:
    session_id: str
    agent: str
    cwd: str
    title: str | None = None
    updated_at: str = field(default_factory=utc_now_iso)
    tasks: list[str] = field(default_factory=list)

    def info(self) -> dict[str, Any]:
        """ACP's ``SessionInfo``."""
        out: dict[str, Any] = {"sessionId": self.session_id, "cwd": self.cwd, "updatedAt": self.updated_at}
        if self.title:
            out["title"] = self.title
        return out


class SessionStore:
    """Session records by id; every change is written at once (a small file, rarely written)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._records: dict[str, SessionRecord] | None = None

    @classmethod
    def for_namespace(cls, namespace: str) -> SessionStore:
        return cls(namespace_state_dir(namespace) / "acp-sessions.json")

    def get(self, session_id: str) -> SessionRecord | None:
        return self._all().get(session_id)

    def list(self, cwd: str | None = None) -> list[SessionRecord]:
        records = [r for r in self._all().values() if cwd is None or r.cwd == cwd]
        return sorted(records, key=lambda r: r.updated_at, reverse=True)

    def save(self, record: SessionRecord) -> None:
        record.updated_at = utc_now_iso()
        records = self._all()
        records[record.session_id] = record
        while len(records) > MAX_SESSIONS:
            del records[min(records.values(), key=lambda r: r.updated_at).session_id]
        self._write(records)

    def _all(self) -> dict[str, SessionRecord]:
        if self._records is None:
            self._records = self._read()
        return self._records

    def _read(self) -> dict[str, SessionRecord]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            raw = json.loads(self.path.read_text())
            return {item["session_id"]: SessionRecord(**item) for item in raw.get("sessions", [])}
        except (OSError, ValueError, TypeError, KeyError) as exc:
            log.warning("ignoring the ACP session file %s: %s", self.path, exc)
            return {}

    def _write(self, records: dict[str, SessionRecord]) -> None:
        if self.path is None:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            partial = self.path.with_suffix(".tmp")
            partial.write_text(json.dumps({"sessions": [asdict(r) for r in records.values()]}))
            os.replace(partial, self.path)  # never a half-written file
        except OSError as exc:
            log.warning("cannot save ACP sessions to %s: %s", self.path, exc)
