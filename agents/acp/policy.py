"""How an ACP agent's requests back to its client are answered: never by silently allowing.

A coding agent asks its client (here: the mesh) for permission to run a tool, to read and
write files and to run terminals. The mesh has no user to ask, so a policy from the config
answers:

- ``fs/read_text_file``: allowed for files inside ``directory`` when ``read`` (the default);
- ``fs/write_text_file``: refused unless ``write: true`` (then inside ``directory`` only);
- ``terminal/*``: refused unless ``terminal: true`` (then run in ``directory`` or below it, see
  :mod:`agents.acp.terminals`);
- ``session/request_permission``: the tool call's ``kind`` decides (``read``/``search``/``think``/
  ``fetch`` need ``read``; ``edit``/``delete``/``move`` need ``write``; ``execute`` needs
  ``terminal``; anything else is refused): an ``allow_once`` option when allowed, else
  ``reject_once`` (or the ``cancelled`` outcome if the agent offered no rejection).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ClientPolicy", "PolicyRefusal"]

log = logging.getLogger(__name__)

_READ_KINDS = frozenset({"read", "search", "think", "fetch"})
_WRITE_KINDS = frozenset({"edit", "delete", "move"})
_MAX_READ_BYTES = 10 * 1024 * 1024


class PolicyRefusal(Exception):
    """A client request the policy refuses; the message says which rule and how to allow it."""


@dataclass(frozen=True, slots=True)
class ClientPolicy:
    directory: Path = field(default_factory=Path.cwd)
    read: bool = True
    write: bool = False
    terminal: bool = False

    def client_capabilities(self) -> dict[str, Any]:
        """What the mesh offers in ``initialize`` (``clientCapabilities``)."""
        return {"fs": {"readTextFile": self.read, "writeTextFile": self.write}, "terminal": self.terminal}

    # ------------------------------------------------------------------ permission

    def permission(self, params: dict[str, Any]) -> dict[str, Any]:
        """The answer to ``session/request_permission``."""
        tool = params.get("toolCall") or {}
        kind = tool.get("kind")
        allowed = self._allows_kind(kind)
        wanted = ("allow_once", "allow_always") if allowed else ("reject_once", "reject_always")
        options = [o for o in params.get("options") or [] if isinstance(o, dict)]
        for wanted_kind in wanted:
            for option in options:
                if option.get("kind") == wanted_kind:
                    log.info("permission for tool call %s (%s): %s", tool.get("toolCallId"), kind, wanted_kind)
                    return {"outcome": {"outcome": "selected", "optionId": option.get("optionId")}}
        log.info("permission for tool call %s (%s): cancelled", tool.get("toolCallId"), kind)
        return {"outcome": {"outcome": "cancelled"}}

    def _allows_kind(self, kind: Any) -> bool:
        if kind in _READ_KINDS:
            return self.read
        if kind in _WRITE_KINDS:
            return self.write
        if kind == "execute":
            return self.terminal
        return False

    # ------------------------------------------------------------------ files

    async def read_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
        """``fs/read_text_file``, in a thread: a read of up to 10 MB must not stop the event loop."""
        return await asyncio.to_thread(self._read_text_file, params)

    async def write_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
        """``fs/write_text_file``, in a thread, as reads are."""
        return await asyncio.to_thread(self._write_text_file, params)

    def _read_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
        if not self.read:
            raise PolicyRefusal("reading files is not allowed (set acp.policy.read: true)")
        path = self.inside(params.get("path"), "read")
        try:
            if path.stat().st_size > _MAX_READ_BYTES:
                raise PolicyRefusal(f"{path} is larger than {_MAX_READ_BYTES} bytes")
            text = path.read_text(errors="replace")
        except OSError as exc:
            raise PolicyRefusal(f"cannot read {path}: {exc.strerror or exc}") from None
        line, limit = params.get("line"), params.get("limit")
        if isinstance(line, int) or isinstance(limit, int):
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            text = "".join(lines[start : start + limit] if isinstance(limit, int) else lines[start:])
        return {"content": text}

    def _write_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
        if not self.write:
            raise PolicyRefusal("writing files is not allowed (set acp.policy.write: true to allow it)")
        path = self.inside(params.get("path"), "write")
        try:
            path.write_text(str(params.get("content", "")))
        except OSError as exc:
            raise PolicyRefusal(f"cannot write {path}: {exc.strerror or exc}") from None
        return {}

    def check_terminal(self, method: str) -> None:
        if not self.terminal:
            raise PolicyRefusal(f"{method}: terminals are not allowed (set acp.policy.terminal: true to allow them)")

    def inside(self, value: Any, what: str) -> Path:
        """``value`` as a path inside ``directory`` (relative paths are taken from there)."""
        if not isinstance(value, str) or not value:
            raise PolicyRefusal(f"to {what} a file, give its absolute path")
        root = self.directory.resolve()
        path = Path(value)
        path = (path if path.is_absolute() else root / path).resolve()
        if not path.is_relative_to(root):
            raise PolicyRefusal(f"{value} is outside {root}, the only directory the policy lets the agent {what}")
        return path
