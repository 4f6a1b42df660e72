"""An agent whose work is done by an ACP agent subprocess (any ACP coding agent).

Each A2A context is an ACP session (``session/new``, kept for the context while the process
lives); each task is one ``session/prompt``, built as an E2A envelope and made an ACP call by
the seed's :func:`~mesh.e2a.envelope_to_acp_jsonrpc_call`. The agent's ``session/update``s
become status and artifact updates and its ``stopReason`` the task's end
(:mod:`agents.acp.updates`); ``tasks/cancel`` sends ``session/cancel``. The agent's requests to
its client are answered by the configured :class:`~agents.acp.policy.ClientPolicy`.

The process is supervised as an A2E worker is (:class:`~agents.a2e.supervisor.ProcessSupervisor`):
a crash fails its running tasks at once, with its exit status and last stderr lines, and it is
restarted with backoff (its sessions are gone with it: the next task of a context opens a new one).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from acp.exceptions import RequestError

from agents.a2e.errors import WorkerGone, WorkerUnavailable
from agents.a2e.process import WorkerCommand
from agents.a2e.supervisor import ProcessSupervisor, SupervisorSettings
from agents.acp.policy import ClientPolicy
from agents.acp.process import AcpProcess
from agents.acp.updates import UpdateTranslator
from agents.agent import Agent
from agents.context import TaskContext
from agents.updates import TaskFailed, Update
from mesh.a2a import AgentCard, Message
from mesh.e2a import E2AEnvelope, envelope_to_acp_jsonrpc_call
from mesh.e2a.acp_content import a2a_parts_to_acp_blocks, acp_prompt_params

__all__ = ["AcpAgent", "AcpSupervisor"]

log = logging.getLogger(__name__)

MAX_SESSIONS = 10_000
"""Contexts remembered as ACP sessions; the oldest is forgotten beyond (its next task opens a new one)."""

CANCEL_GRACE_S = 5.0
"""After ``session/cancel``, how long the agent has to end the turn before the task ends anyway."""


class AcpSupervisor(ProcessSupervisor[AcpProcess]):
    """An ACP agent kept alive: each start runs ``initialize``."""

    label = "ACP agent"

    def __init__(self, command: WorkerCommand, *, policy: ClientPolicy, **options: Any) -> None:
        super().__init__(command, **options)
        self.policy = policy

    async def _spawn(self) -> AcpProcess:
        process = AcpProcess(
            self.command,
            name=self.name,
            policy=self.policy,
            max_line_bytes=self.settings.max_line_bytes,
            on_exit=self._exited,
        )
        info = await process.start(timeout=self.settings.handshake_timeout_s)
        log.info("ACP agent %s (%s) up: %s", self.name, self.command, info.get("agentInfo") or "no agentInfo")
        return process


class AcpAgent(Agent):
    """Serves an ACP agent; ``acp`` is a :class:`WorkerCommand`, an argv list or a command string.

    ``policy`` answers the agent's permission, file and terminal requests (default: reads
    inside the agent's working directory, no writes, no terminals); the other options tune
    the supervision (:class:`SupervisorSettings`; ACP has no ping, so it is off).
    """

    description = "An agent served by an ACP agent process"
    input_modes = ("text/plain", "application/json", "*/*")
    output_modes = ("text/plain", "application/json", "*/*")

    def __init__(
        self,
        *,
        acp: WorkerCommand | str | Sequence[str],
        cwd: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        policy: ClientPolicy | None = None,
        name: str | None = None,
        description: str | None = None,
        version: str | None = None,
        **supervision: Any,
    ) -> None:
        super().__init__(name=name, description=description, version=version)
        self.command = acp if isinstance(acp, WorkerCommand) else WorkerCommand.of(acp, cwd=cwd, env=env)
        self.policy = policy or ClientPolicy(directory=self.command.cwd or Path.cwd())
        self.supervision = SupervisorSettings.of("AcpAgent", supervision, besides="policy", ping_interval_s=0.0)
        self._supervisor: AcpSupervisor | None = None
        self._sessions: dict[str, tuple[AcpProcess, str]] = {}  # context id -> (process, session id)
        self._turns: dict[str, asyncio.Lock] = {}  # one prompt at a time per session

    async def setup(self) -> None:
        self._supervisor = AcpSupervisor(
            self.command, policy=self.policy, name=self.name, settings=self.supervision, on_give_up=self.give_up
        )
        await self._supervisor.start()

    async def teardown(self) -> None:
        if self._supervisor is not None:
            await self._supervisor.stop()

    def card(self, *, url: str, push_notifications: bool) -> AgentCard:
        card = super().card(url=url, push_notifications=push_notifications)
        return card.model_copy(update={"capabilities": card.capabilities.model_copy(update={"streaming": True})})

    async def process(self) -> AcpProcess:
        if self._supervisor is None:
            raise WorkerUnavailable(f"ACP agent {self.name!r} was not set up; serve it with AgentService")
        return await self._supervisor.current()

    # ------------------------------------------------------------------ tasks

    async def handle(self, message: Message, ctx: TaskContext) -> AsyncIterator[Update]:
        try:
            process = await self.process()
            session_id = await self._session(process, ctx)
        except (WorkerGone, WorkerUnavailable) as exc:
            raise TaskFailed(str(exc)) from None
        except RequestError as exc:
            raise TaskFailed(f"ACP agent {self.name!r} refused session/new: {exc}") from None
        lock = self._turns.setdefault(session_id, asyncio.Lock())
        async with lock, contextlib.aclosing(self._prompt(process, session_id, message, ctx)) as updates:
            async for update in updates:
                yield update

    async def _prompt(
        self, process: AcpProcess, session_id: str, message: Message, ctx: TaskContext
    ) -> AsyncGenerator[Update, None]:
        images = bool(process.prompt_capabilities.get("image"))
        parts = [part.model_dump(mode="json", by_alias=True, exclude_none=True) for part in message.parts]
        envelope = E2AEnvelope(
            request_id=ctx.task_id,
            task_id=ctx.task_id,
            context_id=ctx.context_id,
            session_id=session_id,
            method="session/prompt",
            params={"content_blocks": a2a_parts_to_acp_blocks(parts, images=images)},
        )
        params = acp_prompt_params(envelope_to_acp_jsonrpc_call(envelope)["params"])
        translator = UpdateTranslator(self.name, ctx.task_id)
        # The updates, then None once the prompt is answered: the agent's notifications are read
        # before its answer, so none is left behind.
        inbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        process.listen(session_id, inbox.put_nowait)
        prompt = asyncio.ensure_future(process.request("session/prompt", params))
        prompt.add_done_callback(lambda _: inbox.put_nowait(None))
        try:
            while (item := await inbox.get()) is not None:
                update = translator.accept(item)
                if update is not None:
                    yield update
            result = prompt.result()
        except (WorkerGone, WorkerUnavailable) as exc:
            raise TaskFailed(str(exc)) from None
        except RequestError as exc:
            raise TaskFailed(f"ACP agent {self.name!r} answered session/prompt with error {exc}") from None
        except asyncio.CancelledError:
            await self._cancel(process, session_id, prompt)
            raise
        finally:
            process.unlisten(session_id)
            if not prompt.done():
                prompt.cancel()
        yield translator.outcome(result)

    async def _cancel(self, process: AcpProcess, session_id: str, prompt: asyncio.Future[Any]) -> None:
        """``tasks/cancel``: ask the agent to stop the turn, and give it a moment to say ``cancelled``."""
        await process.notify("session/cancel", {"sessionId": session_id})
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(prompt), CANCEL_GRACE_S)

    async def _session(self, process: AcpProcess, ctx: TaskContext) -> str:
        known = self._sessions.get(ctx.context_id)
        if known is not None and known[0] is process:
            return known[1]
        cwd = str((self.command.cwd or Path.cwd()).resolve())
        answer = await process.request("session/new", {"cwd": cwd, "mcpServers": []})
        session_id = answer.get("sessionId") if isinstance(answer, dict) else None
        if not isinstance(session_id, str):
            raise TaskFailed(f"ACP agent {self.name!r} answered session/new without a sessionId: {answer!r}")
        self._sessions.pop(ctx.context_id, None)
        if known is not None:
            self._turns.pop(known[1], None)  # a session of a process that is gone
        self._sessions[ctx.context_id] = (process, session_id)
        while len(self._sessions) > MAX_SESSIONS:
            _, (_, oldest) = next(iter(self._sessions.items()))
            del self._sessions[next(iter(self._sessions))]
            lock = self._turns.get(oldest)
            if lock is not None and not lock.locked():
                del self._turns[oldest]
        log.info("%s: context %s is ACP session %s", self.name, ctx.context_id, session_id)
        return session_id
