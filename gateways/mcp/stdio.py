"""MCP's stdio transport on asyncio pipes: newline-delimited JSON-RPC, stdout kept for the protocol alone.

The SDK's ``stdio_server`` reads and writes through ``anyio.wrap_file``, a worker-thread hop per
line each way, and hands the lines over through memory streams, a task hop more each way; on
the round trip of a short tool call those hops cost more than the mesh does (bench/mcp.py).
Here the server's two streams (the SDK's ``ReadStream`` / ``WriteStream`` protocols) are the
pipes themselves, on the event loop's own pipe transports: the server's receive loop reads and
parses the next line of stdin, and ``send`` writes the message to stdout before it returns
(waiting only while the pipe is full). One message is one ``write`` of a whole line, so the
handlers that answer, report progress and announce list changes at once never interleave.

Before the first message, file descriptor 1 is duplicated for the protocol and then pointed at
stderr (``sys.stdout`` too), so a stray ``print`` or a library writing to stdout can never
corrupt the stream the client reads (:mod:`gateways.stdio`, which also takes regular files
redirected in or out).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from types import TracebackType
from typing import TYPE_CHECKING

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from gateways.stdio import LineWriter, protocol_writer, stdin_reader

if TYPE_CHECKING:  # the SDK's stream protocols (structural: only the type checker needs them)
    from mcp.shared._stream_protocols import ReadStream, WriteStream

__all__ = ["MAX_LINE_BYTES", "stdio_streams"]

MAX_LINE_BYTES = 64 * 1024 * 1024  # one JSON-RPC message; a longer line is refused, not buffered without end

Streams = tuple["ReadStream[SessionMessage | Exception]", "WriteStream[SessionMessage]"]


class _LineReader:
    """stdin as the server's read stream: each line parsed, a bad one yielded as its error."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader
        self._closed = False

    async def receive(self) -> SessionMessage | Exception:
        while True:
            if self._closed:
                raise anyio.ClosedResourceError
            try:
                line = await self._reader.readline()
            except (ValueError, asyncio.LimitOverrunError) as exc:
                return ValueError(f"a message longer than {MAX_LINE_BYTES} bytes: {exc}")
            if not line:
                raise anyio.EndOfStream  # stdin closed: the client is gone
            if not line.strip():
                continue
            try:
                message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except Exception as exc:  # the dispatcher answers a parse error
                return exc
            return SessionMessage(message)

    def __aiter__(self) -> _LineReader:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> _LineReader:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


class _LineWriter:
    """stdout as the server's write stream: one message, one line, written before ``send`` returns."""

    def __init__(self, writer: LineWriter) -> None:
        self._writer = writer
        self._closed = False

    async def send(self, item: SessionMessage, /) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        if self._writer.is_closing():
            raise anyio.BrokenResourceError  # the pipe broke on an earlier write
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        try:
            self._writer.write(data.encode() + b"\n")
            await self._writer.drain()  # returns at once unless the pipe is full
        except ConnectionError as exc:  # the client closed its end of the pipe
            raise anyio.BrokenResourceError from exc

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> _LineWriter:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[Streams]:
    """The server's read and write streams over this process's stdin and stdout (pipes or regular files)."""
    reader, read_transport = await stdin_reader(MAX_LINE_BYTES)
    writer = await protocol_writer(reader)
    try:
        yield _LineReader(reader), _LineWriter(writer)
    finally:
        if read_transport is not None:
            read_transport.close()
        writer.close()
