"""Drive ``mesh acp`` as an editor does: a subprocess, the official ACP SDK's client."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from acp import PROTOCOL_VERSION, Client, RequestPermissionResponse, spawn_agent_process
from acp.client.connection import ClientSideConnection
from acp.schema import AllowedOutcome, ClientCapabilities, DeniedOutcome, Implementation

from tests.mesh.cli_process import mesh_env


@dataclass
class RecordingClient(Client):
    """Keeps every ``session/update``; wakes waiters as they come."""

    updates: list[Any] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    #: What ``session/request_permission`` answers: an option id, or None (cancelled).
    permission: str | None = None
    permission_requests: list[Any] = field(default_factory=list)

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append(update)
        self.changed.set()

    async def request_permission(self, *args: Any, **kwargs: Any) -> RequestPermissionResponse:
        self.permission_requests.append(kwargs or args)
        if self.permission is None:
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=self.permission))

    async def wait_for(self, kind: str, timeout: float = 30.0) -> Any:
        async with asyncio.timeout(timeout):
            while True:
                self.changed.clear()
                for update in self.updates:
                    if update.session_update == kind:
                        return update
                await self.changed.wait()

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]

    def texts(self, kind: str = "agent_message_chunk") -> list[str]:
        return [u.content.text for u in self.updates if u.session_update == kind and u.content.type == "text"]


@dataclass
class Editor:
    conn: ClientSideConnection
    client: RecordingClient
    stderr: Path

    async def initialize(self) -> Any:
        return await self.conn.initialize(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=ClientCapabilities(),
            client_info=Implementation(name="test-editor", version="0"),
        )

    def stderr_text(self) -> str:
        return self.stderr.read_text()


@contextlib.asynccontextmanager
async def mesh_acp(broker_url: str, namespace: str, agent: str, tmp_path: Path, *extra: str) -> AsyncIterator[Editor]:
    """``mesh acp AGENT`` on the test's broker and namespace, its stderr kept in a file."""
    client = RecordingClient()
    stderr = tmp_path / f"mesh-acp-{agent}.stderr"
    with stderr.open("wb") as err:
        async with spawn_agent_process(
            client,
            sys.executable,
            "-m",
            "mesh.cli",
            "acp",
            agent,
            "--broker",
            broker_url,
            "--namespace",
            namespace,
            *extra,
            env=mesh_env(),
            transport_kwargs={"stderr": err},
        ) as (conn, _process):
            yield Editor(conn, client, stderr)
