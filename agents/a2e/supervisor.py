"""Keeps a worker process running: start, discover, ping, restart with backoff, give up.

A worker that exits, crashes or stops answering ping fails its in-flight calls at once (see
:mod:`agents.a2e.process`) and is restarted after ``backoff_s`` (doubling up to
``max_backoff_s``). The restarts are counted until a worker has stayed up ``stable_after_s``;
past ``max_restarts`` the supervisor gives up and calls ``on_give_up``.

:class:`ProcessSupervisor` is that policy for any :class:`SupervisedProcess`; a subclass says
how to spawn one (:class:`WorkerSupervisor`: an A2E worker, :mod:`agents.acp`: an ACP agent).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from agents.a2e.errors import WorkerError, WorkerStartError, WorkerUnavailable
from agents.a2e.framing import DEFAULT_MAX_LINE_BYTES
from agents.a2e.messages import SkillDefinition, SkillDiscoverRequest, SkillDiscoverResponse
from agents.a2e.process import WorkerCommand, WorkerProcess

__all__ = ["AGENT_CAPS", "ProcessSupervisor", "SupervisedProcess", "SupervisorSettings", "WorkerSupervisor"]

log = logging.getLogger(__name__)

AGENT_CAPS = ("skill", "streaming", "artifacts", "cancel")
"""What the mesh side offers in ``handshake/req``; a worker accepting ``cancel`` gets ``skill/cancel``."""


@dataclass(frozen=True, slots=True)
class SupervisorSettings:
    handshake_timeout_s: float = 10.0
    ping_interval_s: float = 10.0
    ping_timeout_s: float = 5.0
    max_restarts: int = 5
    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    stable_after_s: float = 60.0
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES

    @classmethod
    def of(cls, owner: str, options: Mapping[str, Any], *, besides: str, **defaults: Any) -> SupervisorSettings:
        """The settings from an agent's keyword ``options``; ``TypeError`` naming any unknown one.

        ``owner`` names the agent class, ``besides`` its own options, for the message.
        """
        unknown = sorted(set(options) - set(cls.__dataclass_fields__))
        if unknown:
            accepted = ", ".join(cls.__dataclass_fields__)
            raise TypeError(
                f"{owner} got unknown option(s) {', '.join(unknown)}; besides {besides} it takes the "
                f"supervision options: {accepted}"
            )
        return cls(**{**defaults, **options})


class SupervisedProcess(Protocol):
    """What the supervisor needs of a running process."""

    exited: asyncio.Future[int]
    exit_reason: str
    started_at: float

    @property
    def alive(self) -> bool: ...

    async def ping(self, timeout: float) -> None: ...

    async def stop(self) -> int: ...


P = TypeVar("P", bound=SupervisedProcess)


class ProcessSupervisor(Generic[P]):
    """One command kept alive for one agent; subclasses implement :meth:`_spawn`."""

    label = "worker"  # what the process is called in messages

    def __init__(
        self,
        command: WorkerCommand,
        *,
        name: str,
        settings: SupervisorSettings,
        on_give_up: Callable[[str], None] | None = None,
    ) -> None:
        self.command = command
        self.name = name
        self.settings = settings
        self.restarts = 0
        self._on_give_up = on_give_up
        self._process: P | None = None
        self._ready = asyncio.Event()
        self._failure = ""
        self._stopping = False
        self._watcher: asyncio.Task[None] | None = None
        self._pinger: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start the worker and learn its skills; :class:`WorkerStartError` if it will not come up."""
        self._process = await self._spawn()
        self._ready.set()
        loop = asyncio.get_running_loop()
        self._watcher = loop.create_task(self._watch())
        if self.settings.ping_interval_s > 0:
            self._pinger = loop.create_task(self._ping())

    async def current(self) -> P:
        """The running worker, waiting while it restarts; :class:`WorkerUnavailable` once given up."""
        await self._ready.wait()
        if self._failure or self._process is None:
            raise WorkerUnavailable(self._failure or f"{self.label} {self.name!r} is not running")
        return self._process

    async def stop(self) -> None:
        self._stopping = True
        self._failure = self._failure or f"{self.label} {self.name!r} is stopping"
        self._ready.set()
        for task in (self._pinger, self._watcher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._process is not None:
            status = await self._process.stop()
            log.info("%s %s stopped (exit status %d)", self.label, self.name, status)

    # ------------------------------------------------------------------ internals

    async def _spawn(self) -> P:
        """Start one process (``on_exit`` = :meth:`_exited`); :class:`WorkerStartError` if it will not come up."""
        raise NotImplementedError

    def _exited(self, process: P) -> None:
        # Synchronous, so no caller is handed the dead process while the watcher wakes up.
        if process is self._process:
            self._ready.clear()

    async def _watch(self) -> None:
        while True:
            if self._process is None:  # watched only once started
                return
            await asyncio.shield(self._process.exited)
            if self._stopping:
                return
            if time.monotonic() - self._process.started_at >= self.settings.stable_after_s:
                self.restarts = 0
            last_exit = f"{self._process.exit_reason or 'exited'}"
            while True:
                self.restarts += 1
                if self.restarts > self.settings.max_restarts:
                    self._give_up(f"{self.label} {self.name!r} ({self.command}) failed {self.restarts} times in a row")
                    return
                delay = min(self.settings.backoff_s * 2 ** (self.restarts - 1), self.settings.max_backoff_s)
                log.warning(
                    "%s %s: restart %d of %d in %.2f s (%s)",
                    self.label,
                    self.name,
                    self.restarts,
                    self.settings.max_restarts,
                    delay,
                    last_exit,
                )
                await asyncio.sleep(delay)  # the backoff itself, not a wait for an event
                try:
                    self._process = await self._spawn()
                    break
                except WorkerStartError as exc:
                    last_exit = str(exc)
                    log.warning("%s", exc)
            self._ready.set()

    def _give_up(self, reason: str) -> None:
        self._failure = f"{reason}; the agent gave up on it and leaves the mesh"
        log.error("%s: %s", self.name, self._failure)
        self._ready.set()
        if self._on_give_up is not None:
            self._on_give_up(self._failure)

    async def _ping(self) -> None:
        while not (self._stopping or self._failure):
            await asyncio.sleep(self.settings.ping_interval_s)  # the ping period
            process = self._process
            if process is None or not process.alive:
                continue
            with contextlib.suppress(WorkerError):
                await process.ping(self.settings.ping_timeout_s)


class WorkerSupervisor(ProcessSupervisor[WorkerProcess]):
    """An A2E worker kept alive: each start runs the handshake and learns the skills."""

    def __init__(
        self,
        command: WorkerCommand,
        *,
        name: str,
        settings: SupervisorSettings,
        on_give_up: Callable[[str], None] | None = None,
        on_skills: Callable[[Sequence[SkillDefinition]], None] | None = None,
    ) -> None:
        super().__init__(command, name=name, settings=settings, on_give_up=on_give_up)
        self.skills: list[SkillDefinition] = []
        self._on_skills = on_skills

    async def _spawn(self) -> WorkerProcess:
        process = WorkerProcess(
            self.command, name=self.name, max_line_bytes=self.settings.max_line_bytes, on_exit=self._exited
        )
        answer = await process.start(agent_caps=AGENT_CAPS, timeout=self.settings.handshake_timeout_s)
        try:
            found = await process.request(SkillDiscoverRequest(), self.settings.handshake_timeout_s)
        except (TimeoutError, WorkerError) as exc:
            await process.stop(reason="skill discovery failed")
            raise WorkerStartError(
                f"worker {self.name!r} ({self.command}) did not answer skill/discover/req: {exc or 'timed out'}"
                f"{process.stderr_text()}"
            ) from None
        if not isinstance(found, SkillDiscoverResponse):
            await process.stop(reason="skill discovery failed")
            raise WorkerStartError(
                f"worker {self.name!r} ({self.command}) answered skill/discover/req with a {found.type!r} message"
                f"{process.stderr_text()}; answer with skill/discover/resp"
            )
        self.skills = list(found.skills)
        log.info(
            "worker %s (%s) up: %d skill(s) %s, max_parallel %d, caps %s",
            self.name,
            self.command,
            len(self.skills),
            [s.name for s in self.skills],
            answer.max_parallel,
            sorted(process.accepted_caps),
        )
        if self._on_skills is not None:
            self._on_skills(self.skills)
        return process
