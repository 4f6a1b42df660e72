"""Drive ``mesh mcp`` as an MCP client does: a subprocess, the official ``mcp`` SDK's ClientSession.

Over stdio (the client launches ``mesh mcp``) or streamable HTTP (``mesh mcp --http 0``
started first, the client connects to the URL it prints on stderr).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.mesh.cli_process import mesh_env


@dataclass
class Recorder:
    """Every notification the server sent; wakes waiters as they come."""

    notifications: list[types.ServerNotification] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def handle(self, message: object) -> None:
        if isinstance(message, Exception):
            return
        self.notifications.append(message)  # type: ignore[arg-type]
        self.changed.set()

    def list_changes(self) -> int:
        return sum(isinstance(n, types.ToolListChangedNotification) for n in self.notifications)

    async def wait_for_list_change(self, seen: int, timeout: float = 15.0) -> None:
        async with asyncio.timeout(timeout):
            while self.list_changes() <= seen:
                self.changed.clear()
                await self.changed.wait()


@dataclass
class McpClient:
    session: ClientSession
    recorder: Recorder
    stderr: Path

    def stderr_text(self) -> str:
        return self.stderr.read_text()

    async def tool_names(self) -> list[str]:
        return [tool.name for tool in (await self.session.list_tools()).tools]

    async def wait_for_tools(self, *names: str, present: bool = True, timeout: float = 15.0) -> list[types.Tool]:
        """The tool list once every name in ``names`` is in it (``present=False``: none is)."""
        async with asyncio.timeout(timeout):
            while True:
                seen = self.recorder.list_changes()
                tools = (await self.session.list_tools()).tools
                listed = {tool.name for tool in tools}
                if all((name in listed) == present for name in names):
                    return tools
                await self.recorder.wait_for_list_change(seen, timeout)


def _args(broker_url: str, namespace: str, extra: tuple[str, ...]) -> list[str]:
    return ["-m", "mesh.cli", "mcp", "--broker", broker_url, "--namespace", namespace, "--log-level", "info", *extra]


@contextlib.asynccontextmanager
async def mesh_mcp(
    broker_url: str,
    namespace: str,
    tmp_path: Path,
    *extra: str,
    transport: str = "stdio",
    headers: dict[str, str] | None = None,
    elicitation_callback: Any = None,
) -> AsyncIterator[McpClient]:
    """A client session to a ``mesh mcp`` subprocess, initialized (``headers``: on every HTTP request)."""
    recorder = Recorder()
    stderr_path = tmp_path / f"mesh-mcp-{transport}.stderr"
    if transport == "stdio":
        params = StdioServerParameters(command=sys.executable, args=_args(broker_url, namespace, extra), env=mesh_env())
        with stderr_path.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(
                    read, write, message_handler=recorder.handle, elicitation_callback=elicitation_callback
                ) as session,
            ):
                await session.initialize()
                yield McpClient(session, recorder, stderr_path)
        return
    with stderr_path.open("w") as errlog:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *_args(broker_url, namespace, ("--http", "0", *extra)), env=mesh_env(), stderr=errlog
        )
    try:
        url = await _served_url(stderr_path, proc)
        async with (
            create_mcp_http_client(headers=headers) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(
                read, write, message_handler=recorder.handle, elicitation_callback=elicitation_callback
            ) as session,
        ):
            await session.initialize()
            yield McpClient(session, recorder, stderr_path)
    finally:
        if proc.returncode is None:
            proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                proc.kill()
                await proc.wait()


@contextlib.asynccontextmanager
async def mesh_mcp_http(broker_url: str, namespace: str, tmp_path: Path, *extra: str) -> AsyncIterator[str]:
    """A ``mesh mcp --http 0`` subprocess; yields its URL."""
    stderr_path = tmp_path / "mesh-mcp-http-only.stderr"
    with stderr_path.open("w") as errlog:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, *_args(broker_url, namespace, ("--http", "0", *extra)), env=mesh_env(), stderr=errlog
        )
    try:
        yield await _served_url(stderr_path, proc)
    finally:
        if proc.returncode is None:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 10)


async def _served_url(stderr_path: Path, proc: asyncio.subprocess.Process, timeout: float = 30.0) -> str:
    """The URL ``mesh mcp --http`` prints once it listens (its stderr is a file: polled)."""
    pattern = re.compile(r"serving MCP on (http://\S+)")
    async with asyncio.timeout(timeout):
        while True:
            found = pattern.search(stderr_path.read_text())
            if found:
                return found.group(1)
            if proc.returncode is not None:
                raise AssertionError(f"mesh mcp --http exited {proc.returncode}: {stderr_path.read_text()}")
            await asyncio.sleep(0.05)
