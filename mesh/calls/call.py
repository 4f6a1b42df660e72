"""One request in flight (:class:`Call`) and what goes with it (:class:`CallOptions`).

A call is made by :meth:`mesh.calls.CallPath.call` and sent when its ``async with`` block is
entered; see :mod:`mesh.calls` for its life. The wait lives here: an idle timer restarted by
every answer, an optional deadline, and the cancel of the remote task when either runs out or
the waiting coroutine is cancelled.
"""

from __future__ import annotations

import asyncio
import math
import random
import uuid
from collections import deque
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any

from mesh.a2a import A2AModel, AgentBusy, request_bytes
from mesh.a2a.methods import SEND_METHODS
from mesh.calls.answers import Answer, read_answer
from mesh.errors import CallTimeoutError
from mesh.telemetry import tracing
from mesh.transport import InboundMessage

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from mesh.calls.path import CallPath

__all__ = ["SEND_METHODS", "Call", "CallOptions", "Params"]

#: A request's params: a typed model, or 0.3 JSON as the gateway has it.
Params = A2AModel | Mapping[str, Any]

#: Retrying "busy" (-32050): the first wait, and the most any one wait grows to (jittered).
BUSY_RETRY_FIRST_S = 0.05
BUSY_RETRY_MAX_S = 2.0
# A busy answer is recognised by its code before it is parsed (the rest pay nothing).
_BUSY_MARK = b"-32050"
# The calls that start work on the callee, which a timeout therefore cancels. Not a
# tasks/resubscribe: it follows a task until it ends, also while it waits for its client's
# input, and a watcher that stops waiting must not end a task someone else is answering.
_WORK_METHODS = SEND_METHODS


@dataclass(slots=True)
class CallOptions:
    """What goes with a request besides its method and params, and how long to wait for it."""

    user_id: str | None = None
    user_config: dict[str, Any] | None = None
    auth_token: str | None = field(default=None, repr=False)  # a bearer credential: never in a repr
    call_depth: int | None = None
    call_chain: list[str] | None = None
    traceparent: str | None = None
    #: The longest silence between two answers; every event restarts it.
    idle_timeout_s: float = 60.0
    #: An overall bound on the call, if any.
    deadline_s: float | None = None
    #: Ask for stream events (send an ``a2aStatusTopic``); they also restart the idle timeout.
    events: bool = True
    #: Cancel the remote task when the waiting coroutine is cancelled.
    cancel_on_abandon: bool = True

    @property
    def expiry_s(self) -> int:
        """The request's Message Expiry: how long the call is prepared to wait, in whole seconds."""
        return max(1, math.ceil(self.deadline_s if self.deadline_s is not None else self.idle_timeout_s))


class Call:
    """One request in flight: ``async with`` it, then read :meth:`events` or :meth:`result`."""

    __slots__ = (
        "_busy_retries",
        "_deadline",
        "_failure",
        "_inbox",
        "_new_task",
        "_payload",
        "_retry_until",
        "_state",
        "_waiter",
        "agent",
        "correlation",
        "instance",
        "key",
        "method",
        "options",
        "path",
        "props",
        "reply_topic",
        "sent_at",
        "span",
        "status_topic",
        "task_id",
        "topic",
    )

    def __init__(self, path: CallPath, agent: str, method: str, params: Params, options: CallOptions) -> None:
        self.path = path
        self.agent = agent
        self.method = method
        self.options = options
        self.key = f"{path.key_prefix}{uuid.uuid4().hex}"
        self.correlation = self.key.encode()
        self.reply_topic = path.reply_topic(self.key)
        self.status_topic = path.status_topic(self.key)
        #: The remote task this call is about, as far as known (updated from every answer).
        self.task_id = _named_task(method, params) or (self.key if method in SEND_METHODS else None)
        #: The replica that owns the task (a2aInstance of its answers), if the agent has replicas.
        self.instance: str | None = None
        self._new_task = method in SEND_METHODS and self.task_id == self.key
        self._payload = request_bytes(method, self.key, params)
        self._inbox: deque[tuple[bool, InboundMessage]] = deque()
        self._waiter: asyncio.Future[bool] | None = None
        self._failure: BaseException | None = None
        self._deadline: float | None = None
        self._busy_retries = 0
        self._retry_until: float | None = None
        #: Where and with what properties it was sent (resent as is when the agent was busy).
        self.topic = ""
        self.props: Any = None
        #: When it was sent (time.perf_counter), and its span while tracing is on.
        self.sent_at = 0.0
        self.span: Span | None = None
        # "new" -> "open" (sent) -> "answered" (final answer read) / "closed" (block left)
        self._state = "new"

    def __repr__(self) -> str:
        return f"<Call {self.method} to {self.agent!r} key={self.key!r} task={self.task_id!r} {self._state}>"

    async def __aenter__(self) -> Call:
        await self.path.send(self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.path.close(self)
        if self.span is not None:
            self.end_span(exc)

    def end_span(self, error: BaseException | None) -> None:
        """End the call's span (tracing), with the task it was about."""
        span, self.span = self.span, None
        if span is not None:
            tracing.end_span(span, error, **({"a2a.task_id": self.task_id} if self.task_id else {}))

    # ------------------------------------------------------------------ reading

    async def events(self) -> AsyncGenerator[Answer, None]:
        """Every answer in order: the stream events, then the final answer (and the end)."""
        while True:
            answer = await self.next()
            yield answer
            if answer.final:
                return

    async def result(self) -> Answer:
        """The final answer; events only restart the idle timeout."""
        while True:
            answer = await self.next()
            if answer.final:
                return answer

    async def next(self) -> Answer:
        """The next answer, event or final (don't ask again after the final one).

        A final "busy" (-32050: nothing was done) is not returned while the call has time left:
        the request is sent again after a jittered, growing wait (:meth:`_retry_busy`).
        """
        while True:
            while not self._inbox:
                if self._failure is not None:
                    raise self._failure
                await self._wait()
            final, message = self._inbox.popleft()
            if not (final and _BUSY_MARK in message.payload and self._retry_busy(message)):
                break
        if final:
            self._state = "answered"  # nothing left to cancel, whatever the answer says
        answer = read_answer(message.payload, message.properties, final=final)
        task_id = answer.task_id
        if task_id is not None:
            self.task_id = task_id
        return answer

    # ------------------------------------------------------------------ the path's seam

    @property
    def state(self) -> str:
        """``new``, ``open`` (sent), ``answered`` (final answer read) or ``closed`` (block left)."""
        return self._state

    @property
    def payload(self) -> bytes:
        """The request as sent (and sent again when the agent was busy or its replica gone)."""
        return self._payload

    @property
    def deadline(self) -> float | None:
        """The loop time the call's overall bound runs out, if it has one."""
        return self._deadline

    @property
    def starts_task(self) -> bool:
        """Whether the request asks for a new task (its id is the call's own key)."""
        return self._new_task

    @property
    def failed(self) -> bool:
        return self._failure is not None

    def opened(self, deadline: float | None) -> None:
        """The path sent it: answers are awaited from now, until ``deadline`` (loop time) if set."""
        self._deadline = deadline
        self._state = "open"

    def closed(self) -> None:
        """The path forgot it: nothing more is read."""
        self._state = "closed"

    def deliver(self, final: bool, message: InboundMessage) -> None:
        """An answer for this call (the path routed it here by its correlation data)."""
        instance = message.properties.instance
        if instance is not None:
            self.instance = instance
            # The replica that took a new task owns it (a follow-up's answer may be a stranger's
            # "task not found").
            if self._new_task and self.task_id is not None:
                self.path.learned_owner(self.agent, self.task_id, instance)
        self._inbox.append((final, message))
        self._wake(True)

    def fail(self, error: BaseException) -> None:
        """End the call with ``error``: its reader raises it once the answers already in are read."""
        if self._state != "open" or self._failure is not None:
            return
        self._failure = error
        self._wake(True)

    # ------------------------------------------------------------------ internals

    def _retry_busy(self, message: InboundMessage) -> bool:
        """Send the request again later if ``message`` is "busy" and the wait fits the call's time.

        The retries end with the call's deadline, or one idle timeout after the first "busy":
        a retry is scheduled only if it can still be answered within that.
        """
        try:
            read_answer(message.payload, message.properties, final=True)
        except AgentBusy:
            pass
        except Exception:  # any other answer is read (and raised) by next()
            return False
        else:
            return False
        loop = asyncio.get_running_loop()
        now = loop.time()
        if self._retry_until is None:
            self._retry_until = now + self.options.idle_timeout_s
            if self._deadline is not None:
                self._retry_until = min(self._retry_until, self._deadline)
        ceiling = min(BUSY_RETRY_MAX_S, BUSY_RETRY_FIRST_S * 2**self._busy_retries)
        delay = random.uniform(ceiling / 2, ceiling)  # noqa: S311 -- jitter, not a secret
        if now + delay + BUSY_RETRY_FIRST_S >= self._retry_until or self._state != "open":
            return False
        self._busy_retries += 1
        loop.call_later(delay, self.path.resend, self, self._retry_until)
        return True

    def _wake(self, woken: bool) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(woken)

    async def _wait(self) -> None:
        """Wait for the next arrival; raise :class:`CallTimeoutError` when the wait runs out."""
        loop = asyncio.get_running_loop()
        wait, reason, waited = self.options.idle_timeout_s, "idle", self.options.idle_timeout_s
        if self._deadline is not None:
            remaining = self._deadline - loop.time()
            if remaining < wait:
                wait, reason, waited = remaining, "deadline", self.options.deadline_s or 0.0
        if wait > 0:
            # A timer on a bare future: lighter than asyncio.timeout() on every hop.
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(wait, self._wake, False)
            try:
                if await waiter:
                    return
            except asyncio.CancelledError:
                if self.options.cancel_on_abandon:
                    self._cancel_remote("its caller stopped waiting")
                raise
            finally:
                timer.cancel()
                self._waiter = None
        canceled = self._cancel_remote(f"{reason} timeout")
        raise CallTimeoutError(
            agent=self.agent,
            method=self.method,
            task_id=self.task_id,
            waited_s=waited,
            reason=reason,
            canceled=canceled,
        )

    def _cancel_remote(self, why: str) -> bool:
        if self._state != "open" or self.method not in _WORK_METHODS or self.task_id is None:
            return False
        self._state = "answered"  # once
        options = self.options
        return self.path.cancel(
            self.agent, self.task_id, key=self.key, why=why, user_id=options.user_id, auth_token=options.auth_token
        )


def _named_task(method: str, params: Params) -> str | None:
    """The task a request names: the message's ``taskId``, or the ``id`` / ``taskId`` of tasks/*."""
    if isinstance(params, Mapping):
        if method in SEND_METHODS:
            message = params.get("message")
            value = message.get("taskId") if isinstance(message, Mapping) else None
        else:
            value = params.get("id", params.get("taskId"))
    elif method in SEND_METHODS:
        value = getattr(getattr(params, "message", None), "task_id", None)
    else:
        value = getattr(params, "id", None) or getattr(params, "task_id", None)
    return value if isinstance(value, str) else None
