"""This process's stdin and stdout as the asyncio streams of a protocol on stdio (ACP, MCP).

Editors and MCP clients connect pipes, which the event loop polls. A user may also redirect a
regular file in or out (``mesh acp echo < session.jsonl > out.jsonl``), which the loop cannot
poll (``connect_read_pipe`` refuses it): a file read in is fed to the reader in one piece from a
worker thread, a file written out is written directly (a regular file never blocks for long).

:func:`protocol_writer` first duplicates file descriptor 1 for the protocol and points it (and
``sys.stdout``) at stderr, so a stray ``print`` can never corrupt the protocol stream.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from typing import Protocol

__all__ = ["LineWriter", "protocol_writer", "stdin_reader"]


class LineWriter(Protocol):
    """What the protocols write through (an :class:`asyncio.StreamWriter`, or a file's)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def is_closing(self) -> bool: ...

    def close(self) -> None: ...


class _FileWriter:
    """A regular file as a :class:`LineWriter`: each write goes straight to the file."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    def write(self, data: bytes) -> None:
        if self._fd is None:
            raise ConnectionResetError("the protocol's output is closed")
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    async def drain(self) -> None:
        return None

    def is_closing(self) -> bool:
        return self._fd is None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _is_file(fd: int) -> bool:
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        return False


async def stdin_reader(limit: int) -> tuple[asyncio.StreamReader, asyncio.BaseTransport | None]:
    """stdin as a stream reader (lines up to ``limit`` bytes), and its transport to close (None for a file)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    if _is_file(0):
        data = await asyncio.to_thread(os.fdopen(0, "rb", closefd=False).read)
        reader.feed_data(data)
        reader.feed_eof()
        return reader, None
    stdin = os.fdopen(0, "rb", 0, closefd=False)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    return reader, transport


async def protocol_writer(reader: asyncio.StreamReader) -> LineWriter:
    """stdout, kept for the protocol alone (see the module doc)."""
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if _is_file(protocol_fd):
        return _FileWriter(protocol_fd)
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(protocol_fd, "wb", 0)
    )
    return asyncio.StreamWriter(transport, protocol, reader, loop)
