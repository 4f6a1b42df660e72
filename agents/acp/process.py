"""One ACP agent subprocess: its pipes, the JSON-RPC connection to it, ``initialize``, stop.

The stdio is the A2E worker's (:class:`~agents.a2e.pipes.WorkerPipes`: NDJSON decoded as it
arrives, a stderr tail, signals); JSON-RPC is the ACP SDK's :class:`acp.connection.Connection`
on top, with this class as its message transport. The agent's requests back to its client
(permission, files, terminals) are answered by the :class:`~agents.acp.policy.ClientPolicy`;
its ``session/update`` notifications go to the listener of their session.

When the process exits, the connection ends only once the exit status is known, so every
request still waiting fails with :class:`~agents.a2e.errors.WorkerGone` saying how it ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from acp.connection import Connection
from acp.exceptions import RequestError

from agents.a2e.child import ChildProcess
from agents.a2e.errors import WorkerGone, WorkerStartError
from agents.a2e.framing import DEFAULT_MAX_LINE_BYTES
from agents.a2e.pipes import WorkerPipes
from agents.a2e.process import WorkerCommand
from agents.acp.policy import ClientPolicy, PolicyRefusal
from agents.acp.terminals import TerminalError, Terminals

__all__ = ["PROTOCOL_VERSION", "AcpProcess"]

log = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
_CLIENT_INFO = {"name": "mqtt-agent-mesh", "title": "MQTT agent mesh", "version": "0.1.0"}

UpdateListener = Callable[[dict[str, Any]], None]


class AcpProcess(ChildProcess):
    """A running ACP agent. Build it, ``await start()``, then :meth:`request` / :meth:`notify`."""

    kind = "ACP agent"
    config_key = "acp"

    def __init__(
        self,
        command: WorkerCommand,
        *,
        name: str,
        policy: ClientPolicy,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        stderr_lines: int = 20,
        on_exit: Callable[[AcpProcess], None] | None = None,
    ) -> None:
        self.command = command
        self.name = name
        self.policy = policy
        self.max_line_bytes = max_line_bytes
        self.stderr_lines = stderr_lines
        self.exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.exit_reason = ""
        self.started_at = time.monotonic()
        self.agent_info: dict[str, Any] = {}
        self._on_exit = on_exit
        self._inbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._listeners: dict[str, UpdateListener] = {}
        self._terminals = Terminals(policy.directory)
        self._pipes: WorkerPipes | None = None
        self._connection: Connection | None = None
        self._finishing: asyncio.Task[None] | None = None
        self._stopping = False

    # ------------------------------------------------------------------ start

    async def start(self, *, timeout: float) -> dict[str, Any]:
        """Spawn the agent and run ``initialize``; :class:`WorkerStartError` says why not."""
        await self._spawn(self._inbox.put_nowait)
        self._connection = Connection(self._client_request, self)
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "clientCapabilities": self.policy.client_capabilities(),
            "clientInfo": _CLIENT_INFO,
        }
        try:
            answer = await asyncio.wait_for(self.request("initialize", params), timeout)
        except TimeoutError:
            await self.stop(reason="no initialize answer")
            raise WorkerStartError(
                f"ACP agent {self.name!r} ({self.command}) did not answer initialize within {timeout:g} s"
                f"{self.stderr_text()}; is it an ACP agent on stdio?"
            ) from None
        except (WorkerGone, RequestError) as exc:
            await self.stop(reason="initialize failed")
            raise WorkerStartError(f"ACP agent {self.name!r} ({self.command}): initialize failed: {exc}") from None
        self.agent_info = answer if isinstance(answer, dict) else {}
        return self.agent_info

    @property
    def prompt_capabilities(self) -> dict[str, Any]:
        caps = (self.agent_info.get("agentCapabilities") or {}).get("promptCapabilities") or {}
        return caps if isinstance(caps, dict) else {}

    @property
    def alive(self) -> bool:
        return not self.exited.done() and not self._stopping

    # ------------------------------------------------------------------ requests

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request; its result, or :class:`RequestError` / :class:`WorkerGone`."""
        if self._connection is None or self.exited.done():
            raise WorkerGone(self.gone_text(), sent=False)
        try:
            return await self._connection.send_request(method, params)
        except ConnectionError:
            await asyncio.shield(self.exited)  # set before the connection ends (see _finish)
            raise WorkerGone(self.gone_text()) from None

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        if self._connection is not None and self.alive:
            with contextlib.suppress(ConnectionError):
                await self._connection.send_notification(method, params)

    def listen(self, session_id: str, listener: UpdateListener) -> None:
        self._listeners[session_id] = listener

    def unlisten(self, session_id: str) -> None:
        self._listeners.pop(session_id, None)

    async def ping(self, timeout: float) -> None:
        """ACP has no ping; a hung agent is caught by the task's stall timeout instead."""

    # ------------------------------------------------------------------ the transport the connection reads

    async def send(self, message: dict[str, Any]) -> None:
        line = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"
        if self._pipes is None or not self._pipes.write(line):
            raise ConnectionError(f"ACP agent {self.name!r}: its stdin is closed")
        await self._pipes.drain()

    async def receive(self) -> dict[str, Any] | None:
        return await self._inbox.get()

    async def close(self) -> None:
        """The connection is done with us; the process is stopped by :meth:`stop`."""

    # ------------------------------------------------------------------ the agent's requests to us

    async def _client_request(self, method: str, params: Any, is_notification: bool) -> Any:
        params = params if isinstance(params, dict) else {}
        if method == "session/update":
            listener = self._listeners.get(str(params.get("sessionId")))
            update = params.get("update")
            if listener is not None and isinstance(update, dict):
                listener(update)
            return None
        answer = _POLICY_METHODS.get(method)
        if answer is None and not method.startswith("terminal/"):
            if is_notification:
                return None
            raise RequestError.method_not_found(method)
        try:
            if answer is not None:
                result = answer(self.policy, params)
                return await result if inspect.isawaitable(result) else result
            return await self._terminal(method, params)
        except (PolicyRefusal, TerminalError) as exc:
            log.info("ACP agent %s: refused %s: %s", self.name, method, exc)
            raise RequestError(-32602, str(exc)) from None

    async def _terminal(self, method: str, params: dict[str, Any]) -> Any:
        self.policy.check_terminal(method)
        if method == "terminal/create":
            cwd = self.policy.inside(params.get("cwd") or str(self.policy.directory), "run commands in")
            return await self._terminals.create(params, cwd)
        if method == "terminal/output":
            return self._terminals.output(params)
        if method == "terminal/wait_for_exit":
            return await self._terminals.wait_for_exit(params)
        if method == "terminal/kill":
            return self._terminals.kill(params)
        if method == "terminal/release":
            return self._terminals.release(params)
        raise RequestError.method_not_found(method)

    # ------------------------------------------------------------------ exit

    def _ended(self, status: int) -> None:
        self._inbox.put_nowait(None)  # ends the connection: waiting requests fail, saying how it ended
        self._terminals.close()

    async def stop(self, *, reason: str = "the agent is stopping") -> int:
        """Close stdin, wait, SIGTERM, wait, SIGKILL (the A2E worker's sequence, without ``shutdown``)."""
        status = await self._terminate(reason)
        if self._connection is not None:
            await self._connection.close()
        return status


# The file methods are coroutines (their I/O runs in a thread); permission is a plain answer.
_POLICY_METHODS: dict[str, Callable[[ClientPolicy, dict[str, Any]], dict[str, Any] | Awaitable[dict[str, Any]]]] = {
    "session/request_permission": ClientPolicy.permission,
    "fs/read_text_file": ClientPolicy.read_text_file,
    "fs/write_text_file": ClientPolicy.write_text_file,
}
