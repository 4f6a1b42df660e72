"""Terminals an ACP agent runs through its client, when the policy allows them (``terminal: true``).

``terminal/create`` starts the command in the policy's directory (or a ``cwd`` inside it) with
stdout and stderr merged; the output is kept up to ``outputByteLimit`` bytes (the newest kept,
cut at a character boundary); ``terminal/output``, ``terminal/wait_for_exit``,
``terminal/kill`` and ``terminal/release`` act on it. Released or not, every terminal is
killed when the agent process goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_OUTPUT_LIMIT", "TerminalError", "Terminals"]

DEFAULT_OUTPUT_LIMIT = 1024 * 1024
_READ_BYTES = 64 * 1024


class TerminalError(Exception):
    """A terminal request that cannot be served; the message says why."""


@dataclass(slots=True)
class _Terminal:
    process: asyncio.subprocess.Process
    limit: int
    output: bytearray = field(default_factory=bytearray)
    truncated: bool = False
    reader: asyncio.Task[None] | None = None

    def exit_status(self) -> dict[str, Any] | None:
        code = self.process.returncode
        if code is None:
            return None
        if code < 0:
            return {"exitCode": None, "signal": signal.Signals(-code).name}
        return {"exitCode": code, "signal": None}


class Terminals:
    """The terminals of one ACP agent process."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._terminals: dict[str, _Terminal] = {}

    async def create(self, params: dict[str, Any], cwd: Path) -> dict[str, Any]:
        command = params.get("command")
        args = params.get("args") or []
        if not isinstance(command, str) or not command or not all(isinstance(a, str) for a in args):
            raise TerminalError("terminal/create needs a command (a string) and args (strings)")
        env = {**os.environ}
        for item in params.get("env") or []:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                env[item["name"]] = str(item.get("value", ""))
        limit = params.get("outputByteLimit")
        try:
            process = await asyncio.create_subprocess_exec(
                command,
                *args,
                cwd=cwd,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
        except OSError as exc:
            raise TerminalError(f"cannot run {command!r}: {exc.strerror or exc}") from None
        terminal = _Terminal(process, limit if isinstance(limit, int) and limit >= 0 else DEFAULT_OUTPUT_LIMIT)
        terminal.reader = asyncio.get_running_loop().create_task(_read(terminal))
        terminal_id = uuid.uuid4().hex
        self._terminals[terminal_id] = terminal
        return {"terminalId": terminal_id}

    def output(self, params: dict[str, Any]) -> dict[str, Any]:
        terminal = self._get(params)
        out: dict[str, Any] = {
            "output": terminal.output.decode(errors="ignore"),
            "truncated": terminal.truncated,
        }
        status = terminal.exit_status()
        if status is not None and terminal.reader is not None and terminal.reader.done():
            out["exitStatus"] = status
        return out

    async def wait_for_exit(self, params: dict[str, Any]) -> dict[str, Any]:
        terminal = self._get(params)
        await terminal.process.wait()
        if terminal.reader is not None:
            await terminal.reader  # all its output is in
        status = terminal.exit_status()
        if status is None:  # the output ended before the exit: wait for the exit itself
            await terminal.process.wait()
            status = terminal.exit_status() or {"exitCode": None, "signal": None}
        return status

    def kill(self, params: dict[str, Any]) -> dict[str, Any]:
        _kill(self._get(params))
        return {}

    def release(self, params: dict[str, Any]) -> dict[str, Any]:
        terminal = self._get(params)
        _kill(terminal)
        del self._terminals[str(params.get("terminalId"))]
        return {}

    def close(self) -> None:
        for terminal in self._terminals.values():
            _kill(terminal)
        self._terminals.clear()

    def _get(self, params: dict[str, Any]) -> _Terminal:
        terminal = self._terminals.get(str(params.get("terminalId")))
        if terminal is None:
            raise TerminalError(f"no terminal {params.get('terminalId')!r} (released, or never created)")
        return terminal


async def _read(terminal: _Terminal) -> None:
    stream = terminal.process.stdout
    if stream is None:  # started without stdout=PIPE: nothing to read
        return
    while chunk := await stream.read(_READ_BYTES):
        terminal.output += chunk
        if len(terminal.output) > terminal.limit:
            cut = len(terminal.output) - terminal.limit
            while cut < len(terminal.output) and (terminal.output[cut] & 0xC0) == 0x80:
                cut += 1  # not inside a UTF-8 character
            del terminal.output[:cut]
            terminal.truncated = True


def _kill(terminal: _Terminal) -> None:
    if terminal.process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            terminal.process.kill()
