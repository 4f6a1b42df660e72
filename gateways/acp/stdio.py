"""ACP's transport on this process's stdio: NDJSON JSON-RPC messages, stdout kept for them alone.

Before the first message, file descriptor 1 is duplicated for the protocol and then pointed at
stderr (``sys.stdout`` too), so a stray ``print`` or a library writing to stdout can never
corrupt the protocol stream an editor reads (:mod:`gateways.stdio`, which also takes regular
files redirected in or out).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from gateways.stdio import LineWriter, protocol_writer, stdin_reader

__all__ = ["StdioTransport"]

log = logging.getLogger(__name__)

_MAX_LINE_BYTES = 64 * 1024 * 1024


class StdioTransport:
    """A message transport for :class:`acp.connection.Connection` (``send`` / ``receive`` / ``close``)."""

    def __init__(self, reader: asyncio.StreamReader, writer: LineWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = asyncio.Lock()

    @classmethod
    async def open(cls) -> StdioTransport:
        """Take over stdin and stdout (see the module's docstring; pipes or regular files)."""
        reader, _ = await stdin_reader(_MAX_LINE_BYTES)
        return cls(reader, await protocol_writer(reader))

    async def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        async with self._lock:
            self._writer.write(line)
            await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        """The next message; ``None`` once stdin is closed. Lines that are no JSON object are skipped."""
        while True:
            try:
                line = await self._reader.readline()
            except (ValueError, asyncio.LimitOverrunError):
                log.warning("skipped an ACP line longer than %d bytes", _MAX_LINE_BYTES)
                continue
            if not line:
                return None
            if not line.strip():
                continue
            try:
                message = json.loads(line)
            except ValueError:
                log.warning("skipped an ACP line that is no JSON: %r", line[:200])
                await self.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
                continue
            if isinstance(message, dict):
                return message
            log.warning("skipped an ACP line that is no JSON object: %r", line[:200])

    async def close(self) -> None:
        self._writer.close()
