"""MCP's stdio transport on asyncio pipes: newline-delimited JSON-RPC, stdout kept for the protocol alone.

The SDK's ``stdio_server`` reads and writes through ``anyio.wrap_file``, a worker-thread hop per
line each way; on the round trip of a short tool call those hops cost more than the mesh does
(bench/mcp.py). This one reads stdin and writes stdout with the event loop's own pipe transports
and hands the server the same streams of :class:`~mcp.shared.message.SessionMessage`.

Before the first message, file descriptor 1 is duplicated for the protocol and then pointed at
stderr (``sys.stdout`` too), so a stray ``print`` or a library writing to stdout can never
corrupt the stream the client reads. When stdin is no pipe (a regular file), the SDK's own
``stdio_server`` serves instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import AsyncIterator

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

__all__ = ["stdio_streams"]

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 64 * 1024 * 1024  # one JSON-RPC message; a longer line is refused, not buffered without end

Streams = tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]


@contextlib.asynccontextmanager
async def stdio_streams() -> AsyncIterator[Streams]:
    """The server's read and write streams over this process's stdin and stdout."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    stdin = os.fdopen(0, "rb", 0, closefd=False)
    try:
        read_transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
    except ValueError:  # a regular file: no pipe to poll
        from mcp.server.stdio import stdio_server

        async with stdio_server() as streams:
            yield streams
        return
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    write_transport, write_protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(protocol_fd, "wb", 0)
    )
    writer = asyncio.StreamWriter(write_transport, write_protocol, reader, loop)
    incoming_send, incoming = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    outgoing, outgoing_receive = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_lines() -> None:
        async with incoming_send:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError) as exc:
                    await incoming_send.send(ValueError(f"a message longer than {MAX_LINE_BYTES} bytes: {exc}"))
                    continue
                if not line:
                    return  # stdin closed: the client is gone
                if not line.strip():
                    continue
                try:
                    message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                except Exception as exc:  # the dispatcher answers a parse error
                    await incoming_send.send(exc)
                    continue
                await incoming_send.send(SessionMessage(message))

    async def write_lines() -> None:
        async with outgoing_receive:
            async for session_message in outgoing_receive:
                data = session_message.message.model_dump_json(by_alias=True, exclude_unset=True)
                writer.write(data.encode() + b"\n")
                await writer.drain()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(read_lines)
            group.start_soon(write_lines)
            yield incoming, outgoing
            group.cancel_scope.cancel()
    finally:
        read_transport.close()
        writer.close()
