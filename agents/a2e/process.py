"""One worker process: spawn, handshake, correlated calls, ping, and the shutdown sequence.

Requests are correlated by ``req_id``: each has a :class:`PendingCall` that receives its
events and then exactly one final message, or :class:`WorkerGone` when the process exits
first, so no caller waits on a dead worker. ``max_parallel`` (from the handshake) bounds the
skill calls in flight; a call holds its slot until the worker answers it, even when the
caller stopped listening (a canceled task), because the worker is still busy with it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from agents.a2e.artifacts import REQUEST_TYPES
from agents.a2e.child import CLOSE_WAIT_S, TERM_WAIT_S, ChildProcess, WorkerCommand
from agents.a2e.errors import WorkerGone, WorkerStartError
from agents.a2e.framing import DEFAULT_MAX_LINE_BYTES, encode
from agents.a2e.messages import (
    A2EError,
    A2EEvent,
    A2EMessage,
    GenericMessage,
    HandshakeRequest,
    HandshakeResponse,
    Ping,
    Shutdown,
    SkillCallRequest,
    SkillCancel,
)
from agents.a2e.pipes import WorkerPipes
from agents.a2e.registry import TypeRegistry
from mesh.background import BackgroundTasks

__all__ = [
    "CLOSE_WAIT_S",
    "TERM_WAIT_S",
    "PendingCall",
    "WorkerCommand",
    "WorkerProcess",
]

log = logging.getLogger(__name__)

# The A2E subprocess transport's shutdown: close stdin, wait 3 s, SIGTERM, wait 2 s, SIGKILL.
# After stdout closes or the process exits, how long to wait for the other and for stderr.


class PendingCall:
    """The answers to one request: events, then the final message (or :class:`WorkerGone`)."""

    def __init__(self, request_id: str, release: Callable[[], None] | None) -> None:
        self.request_id = request_id
        self.done = False
        self.abandoned = False
        self._release = release
        # A deque and one waiter rather than an asyncio.Queue and asyncio.timeout: this is on
        # every call's path, and one reader needs none of their generality.
        self._items: deque[A2EMessage | WorkerGone] = deque()
        self._waiter: asyncio.Future[None] | None = None

    def deliver(self, message: A2EMessage) -> None:
        if not self.abandoned:
            self._put(message)

    def finish(self, outcome: A2EMessage | WorkerGone) -> None:
        self.done = True
        if self._release is not None:
            self._release()
            self._release = None
        if self.abandoned:
            log.debug("discarding the late answer to abandoned request %s", self.request_id)
        else:
            self._put(outcome)

    async def next(self, timeout: float | None = None) -> A2EMessage:
        """The next event or the final message; raises :class:`WorkerGone` or ``TimeoutError``."""
        if not self._items:
            loop = asyncio.get_running_loop()
            waiter = self._waiter = loop.create_future()
            timer = None if timeout is None else loop.call_later(timeout, _expire, waiter)
            try:
                await waiter
            finally:
                self._waiter = None
                if timer is not None:
                    timer.cancel()
        item = self._items.popleft()
        if isinstance(item, WorkerGone):
            raise item
        return item

    def _put(self, item: A2EMessage | WorkerGone) -> None:
        self._items.append(item)
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def result(self) -> A2EMessage:
        """The final message, skipping events."""
        while True:
            item = await self.next()
            if not isinstance(item, A2EEvent):
                return item


class WorkerProcess(ChildProcess):
    """A running worker. Build it, ``await start()``, then call; ``exited`` resolves with the exit status."""

    kind = "worker"

    def __init__(
        self,
        command: WorkerCommand,
        *,
        name: str,
        registry: TypeRegistry | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        stderr_lines: int = 20,
        on_exit: Callable[[WorkerProcess], None] | None = None,
    ) -> None:
        self.command = command
        self.name = name
        self.registry = registry or TypeRegistry()
        self.max_line_bytes = max_line_bytes
        self.handshake: HandshakeResponse | None = None
        self.exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self.exit_reason = ""
        self.bad_lines = 0
        self.started_at = time.monotonic()
        self.stderr_lines = stderr_lines
        self._on_exit = on_exit
        self._pending: dict[str, PendingCall] = {}
        self._slots = asyncio.Semaphore(1)
        self._pipes: WorkerPipes | None = None
        self._finishing: asyncio.Task[None] | None = None
        self._background = BackgroundTasks(log, "A2E worker")
        self._stopping = False
        #: Answers the worker's own requests (artifact/save, artifact/load: agents.a2e.artifacts).
        self.on_request: Callable[[WorkerProcess, A2EMessage], None] | None = None

    # ------------------------------------------------------------------ start

    async def start(self, *, agent_caps: Sequence[str], timeout: float) -> HandshakeResponse:
        """Spawn the process and run the handshake; :class:`WorkerStartError` says why not."""
        await self._spawn(self._on_message)
        request = HandshakeRequest(agent_id=self.name, agent_caps=list(agent_caps))
        try:
            answer = await self.request(request, timeout)
        except TimeoutError:
            await self.stop(reason="no handshake answer")
            raise WorkerStartError(
                f"worker {self.name!r} ({self.command}) did not answer the handshake within {timeout:g} s"
                f"{self.stderr_text()}; make it answer handshake/req on stdout"
            ) from None
        except WorkerGone as exc:
            raise WorkerStartError(f"{exc} before answering the handshake") from None
        if isinstance(answer, HandshakeResponse) and answer.ok:
            self.handshake = answer
            self._slots = asyncio.Semaphore(answer.max_parallel)
            return answer
        reason = answer.reason if isinstance(answer, HandshakeResponse) else _error_text(answer)
        await self.stop(reason="handshake refused")
        raise WorkerStartError(
            f"worker {self.name!r} ({self.command}) refused the handshake: {reason or 'no reason given'}"
            f"{self.stderr_text()}"
        )

    @property
    def accepted_caps(self) -> set[str]:
        if self.handshake is None:
            return set()
        return {c.capability for c in self.handshake.accepted_caps if c.enabled}

    @property
    def max_parallel(self) -> int:
        return self.handshake.max_parallel if self.handshake else 1

    @property
    def alive(self) -> bool:
        return not self.exited.done() and not self._stopping

    # ------------------------------------------------------------------ requests and calls

    async def request(self, message: A2EMessage, timeout: float) -> A2EMessage:
        """Send ``message`` and return its answer; ``TimeoutError`` / :class:`WorkerGone` otherwise."""
        pending = self._register(message.id, None)
        try:
            await self._send(message, pending)
            return await asyncio.wait_for(pending.result(), timeout)
        finally:
            if not pending.done:
                pending.abandoned = True
                self._pending.pop(message.id, None)

    async def open_call(self, request: SkillCallRequest) -> PendingCall:
        """Wait for a free slot, send the call, and return where its answers arrive."""
        await self._acquire_slot()
        pending = self._register(request.id, self._slots.release)
        await self._send(request, pending)
        return pending

    def abandon(self, pending: PendingCall) -> None:
        """The caller stops listening (its task was canceled); the answer will be discarded."""
        if pending.done:
            return
        pending.abandoned = True
        if "cancel" in self.accepted_caps and self.alive:
            self._background.spawn(self._send_quietly(SkillCancel(req_id=pending.request_id)))

    async def ping(self, timeout: float) -> None:
        """One ping; a worker that does not answer in time is killed (its calls fail as it exits)."""
        try:
            await self.request(Ping(), timeout)
        except TimeoutError:
            self.kill(f"it did not answer ping within {timeout:g} s")

    def _register(self, request_id: str, release: Callable[[], None] | None) -> PendingCall:
        if self.exited.done():
            if release is not None:
                release()
            raise WorkerGone(self.gone_text(), sent=False)
        pending = PendingCall(request_id, release)
        self._pending[request_id] = pending
        return pending

    async def _acquire_slot(self) -> None:
        if self.exited.done():
            raise WorkerGone(self.gone_text(), sent=False)
        if not self._slots.locked():  # the common case: a free slot, taken without waiting
            await self._slots.acquire()
            return
        acquire = asyncio.ensure_future(self._slots.acquire())
        either: set[asyncio.Future[Any]] = {acquire, self.exited}
        try:
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not acquire.done():
                acquire.cancel()
            elif not acquire.cancelled() and self.exited.done():
                self._slots.release()
        if self.exited.done():
            raise WorkerGone(self.gone_text(), sent=False)

    async def _send(self, message: A2EMessage, pending: PendingCall) -> None:
        if not await self._write(message):  # stdin is closed: the process is going away
            self._pending.pop(message.id, None)
            pending.abandoned = True
            pending.finish(WorkerGone(self.gone_text(), sent=False))
            raise WorkerGone(f"worker {self.name!r}: its stdin is closed", sent=False)

    async def _write(self, message: A2EMessage) -> bool:
        if self._pipes is None:
            raise WorkerGone(f"worker {self.name!r}: not started", sent=False)
        if not self._pipes.write(encode(message)):
            return False
        await self._pipes.drain()
        return True

    async def answer(self, message: A2EMessage) -> None:
        """Send the answer to one of the worker's own requests (dropped if stdin is closed)."""
        await self._write(message)

    async def _send_quietly(self, message: A2EMessage) -> None:
        await self._write(message)

    # ------------------------------------------------------------------ reading

    def _on_message(self, obj: dict[str, Any]) -> None:
        self._dispatch(self.registry.decode(obj))

    def _dispatch(self, message: A2EMessage) -> None:
        if message.type in REQUEST_TYPES:  # the worker asks; no pending call of ours is answered
            if self.on_request is not None:
                self.on_request(self, message)
            return
        req_id = getattr(message, "req_id", None)
        pending = self._pending.get(req_id) if isinstance(req_id, str) else None
        if pending is None:
            if isinstance(message, A2EError):
                log.warning("worker %s: error without a pending request: %s", self.name, _error_text(message))
            else:
                log.debug("worker %s: %s message answers no pending request; ignored", self.name, message.type)
            return
        if isinstance(message, A2EEvent):
            pending.deliver(message)
            return
        if isinstance(message, GenericMessage) and message.type.endswith("/event"):
            # An event that fits no model (an unknown kind...) is not the call's answer.
            log.warning("worker %s: skipped a %s message that fits no event model", self.name, message.type)
            return
        # Any other message with this req_id ends the request, even one of an unknown type.
        del self._pending[pending.request_id]
        pending.finish(message)

    def _bad_line(self, problem: str, head: bytes) -> None:
        self.bad_lines += 1
        super()._bad_line(problem, head)

    def _ended(self, status: int) -> None:
        gone = WorkerGone(self.gone_text(status))
        pending, self._pending = list(self._pending.values()), {}
        for call in pending:
            call.finish(gone)

    # ------------------------------------------------------------------ stop

    async def stop(self, *, reason: str = "the agent is stopping", drain_s: int = 10) -> int:
        """The shutdown sequence: ``shutdown``, close stdin, wait, SIGTERM, wait, SIGKILL."""
        return await self._terminate(reason, lambda: self._send_quietly(Shutdown(timeout=drain_s)))


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


def _error_text(message: A2EMessage) -> str:
    if isinstance(message, A2EError):
        return f"{message.code}: {message.message}" if message.message else message.code
    return f"an unexpected {message.type or 'untyped'} message"
