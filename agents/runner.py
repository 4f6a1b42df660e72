"""Running a handler: from a message to status and artifact events and a final state.

A task runs in *segments*: from a new message (or the reply that resumes an
``input-required`` task) until it is terminal or interrupted again. Each segment runs the
handler in an asyncio task of its own, so ``tasks/cancel`` can cancel exactly that.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import AsyncGenerator, Callable, Coroutine
from typing import Any

from agents.agent import Agent
from agents.context import TaskContext
from agents.input_timers import deadline_metadata
from agents.tasks import TaskRecord
from agents.updates import (
    AuthRequired,
    DataArtifact,
    FileArtifact,
    InputRequired,
    MessageOnly,
    PartsArtifact,
    Rejected,
    Reply,
    Status,
    TaskFailed,
    TextArtifact,
)
from mesh.a2a import (
    INTERRUPTED_STATES,
    Message,
    Part,
    Role,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
    new_id,
)
from mesh.artifacts.parts import file_part, safe_file_name
from mesh.background import BackgroundTasks
from mesh.telemetry import ComponentMetrics, tracing

log = logging.getLogger(__name__)

EventSink = Callable[[TaskRecord, TaskStatusUpdateEvent | TaskArtifactUpdateEvent], None]

# The states in which a handler's progress is emitted.
_RUNNING = frozenset({TaskState.submitted, TaskState.working})

# How long a canceled handler may take to unwind before the task is marked canceled anyway.
CANCEL_GRACE_S = 5.0


class TaskRunner:
    """Drives one agent's handler for every task segment.

    At most ``max_concurrent`` segments run at once (:attr:`at_capacity` tells the methods to
    answer busy). With ``stall_timeout_s`` a watchdog fails a running task that emitted no
    event for that long, saying so.
    """

    def __init__(
        self,
        agent: Agent,
        on_event: EventSink,
        *,
        max_concurrent: int,
        stall_timeout_s: float | None = None,
        metrics: ComponentMetrics | None = None,
    ) -> None:
        self.agent = agent
        self.metrics = metrics
        self._on_event = on_event
        self.max_concurrent = max_concurrent
        self.stall_timeout_s = stall_timeout_s
        self._segments: dict[asyncio.Task[None], TaskRecord] = {}
        self._watchdog: asyncio.Task[None] | None = None
        self._giving_up = BackgroundTasks(log, f"{agent.name}'s stall watchdog")
        #: Called whenever a segment ends (a place is free): the held requests go on (agents.admission).
        self.on_place_free: Callable[[], None] | None = None

    @property
    def running(self) -> int:
        """How many segments (handlers) run now."""
        return len(self._segments)

    @property
    def at_capacity(self) -> bool:
        """Whether as many segments run as may (a new one would be refused as busy)."""
        return len(self._segments) >= self.max_concurrent

    # ------------------------------------------------------------------ transitions

    def transition(
        self,
        record: TaskRecord,
        state: TaskState,
        parts: list[Part] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Move ``record`` to ``state`` with an agent message made of ``parts``, and emit it."""
        message = None
        if parts:
            message = Message(
                message_id=new_id(),
                role=Role.agent,
                parts=parts,
                task_id=record.id,
                context_id=record.context_id,
                metadata=metadata,
            )
        previous = record.state
        event = record.set_status(state, message)
        if state is not previous:
            log.info("%s: task %s %s -> %s", self.agent.name, record.id, previous.value, state.value)
            if self.metrics is not None and record.is_terminal:
                self.metrics.task_ended(state.value, time.monotonic() - record.created_at)
        self._on_event(record, event)

    # ------------------------------------------------------------------ segments

    def launch(self, record: TaskRecord, message: Message, ctx: TaskContext) -> None:
        """Start a segment for ``message`` (a new task, or the reply to an interrupted one)."""
        record.settled.clear()
        record.progressed_at = time.monotonic()
        run = self._run_segment(record, message, ctx)
        if tracing.enabled:
            run = self._traced(run, record, ctx)
        segment = asyncio.get_running_loop().create_task(run)
        self._segments[segment] = record
        segment.add_done_callback(self._segment_done)
        if self.stall_timeout_s is not None and self._watchdog is None:
            self._watchdog = asyncio.get_running_loop().create_task(self._watch(self.stall_timeout_s))

    async def _traced(self, run: Coroutine[Any, Any, None], record: TaskRecord, ctx: TaskContext) -> None:
        """``run`` in the task's span: a child of the request's ``traceparent``, the parent of the
        delegations it makes."""
        name = self.agent.name
        span = tracing.start_span(
            f"task {name}",
            "server",
            traceparent=ctx.traceparent,
            attributes={"a2a.agent": name, "a2a.task_id": record.id, "a2a.context_id": record.context_id},
        )
        error: BaseException | None = None
        try:
            with tracing.activated(span):
                await run
        except BaseException as exc:
            error = exc
            raise
        finally:
            tracing.end_span(span, error, **{"a2a.task.state": record.state.value})

    def _segment_done(self, segment: asyncio.Task[None]) -> None:
        record = self._segments.pop(segment)
        self._failed_outside(segment, record)
        if self.on_place_free is not None:
            self.on_place_free()

    def _failed_outside(self, segment: asyncio.Task[None], record: TaskRecord) -> None:
        if segment.cancelled() or (exc := segment.exception()) is None:
            return
        # A failure outside the handler (sending an event): the task must still end.
        log.error("%s: task %s: the runtime failed: %s: %s", self.agent.name, record.id, type(exc).__name__, exc)
        try:
            self._end(record, TaskState.failed, f"the agent's runtime failed: {type(exc).__name__}: {exc}")
        except Exception as again:
            log.error("%s: task %s could not be failed: %s", self.agent.name, record.id, again)

    async def _run_segment(self, record: TaskRecord, message: Message, ctx: TaskContext) -> None:
        if record.is_terminal:
            return  # canceled before it started
        if record.state is not TaskState.submitted or self.agent.starts_working:
            # Resuming after input or authentication is always working again (no second message
            # slips in); a new task of an agent with starts_working = False stays submitted until
            # its handler reports progress, so one that answers at once goes straight to its end.
            self.transition(record, TaskState.working)
        ctx.emit = lambda update: self.apply(record, update) if record.state in _RUNNING else None
        # The handler runs in this task, so tasks/cancel cancels exactly this task.
        this = asyncio.current_task()
        record.drive = this
        try:
            await self._drive(record, message, ctx)
        except asyncio.CancelledError:
            if not record.cancelled.is_set() or this is None:
                raise  # not a tasks/cancel: the loop itself is going away
            this.uncancel()
            self._end(record, record.cancel_state, record.cancel_reason)
        except TaskFailed as failure:
            record.generator = None
            if not record.is_terminal:
                self.transition(record, TaskState.failed, failure.to_parts())
        except Exception as exc:  # the handler's own failure ends the task, not the agent
            log.warning("%s: task %s failed: %s: %s", self.agent.name, record.id, type(exc).__name__, exc, exc_info=exc)
            record.generator = None
            self._end(record, TaskState.failed, f"{type(exc).__name__}: {exc}")
        finally:
            record.drive = None

    # ------------------------------------------------------------------ stalls

    async def _watch(self, stall_timeout_s: float) -> None:
        """Fail running tasks without progress for ``stall_timeout_s``; ends when none runs."""
        period = min(max(stall_timeout_s / 4, 0.05), 30.0)
        try:
            while self._segments:
                await asyncio.sleep(period)
                horizon = time.monotonic() - stall_timeout_s
                for record in list(self._segments.values()):
                    if record.progressed_at < horizon and not record.cancelled.is_set() and not record.is_terminal:
                        self._give_up(record, stall_timeout_s)
        finally:
            self._watchdog = None

    def _give_up(self, record: TaskRecord, stall_timeout_s: float) -> None:
        log.warning("%s: task %s made no progress for %g s; failing it", self.agent.name, record.id, stall_timeout_s)
        reason = f"the task made no progress for {stall_timeout_s:g} s (stall_timeout_s) and was failed"
        self._giving_up.spawn(
            self.cancel(record, reason, state=TaskState.failed), name=f"fail stalled task {record.id}"
        )

    async def _drive(self, record: TaskRecord, message: Message, ctx: TaskContext) -> None:
        generator = record.generator
        sending: Message | None = None
        if generator is None:
            result = self.agent.handle(message, ctx)
            if not isinstance(result, AsyncGenerator):
                if not inspect.isawaitable(result):
                    raise TypeError(
                        f"{type(self.agent).__name__}.handle returned {result!r}; define it with async def "
                        "(returning a result, or yielding updates)"
                    )
                self._finish(record, await result)
                return
            record.generator = generator = result
        else:
            sending = message  # resumes ``reply = yield InputRequired(...)``
        while True:
            try:
                update = await generator.asend(sending)
            except StopAsyncIteration:
                record.generator = None
                self.transition(record, TaskState.completed)
                return
            sending = None
            if isinstance(update, FileArtifact) and update.content is not None:
                update = await _offload(update, ctx)
            if isinstance(update, InputRequired | AuthRequired):
                self._finish(record, update)  # the generator stays suspended until the reply
                return
            if isinstance(update, Reply | Message | Rejected | MessageOnly):
                record.generator = None
                await _close(generator)
                self._finish(record, update)
                return
            self.apply(record, update)

    def apply(self, record: TaskRecord, update: Any) -> None:
        """Emit a progress update (status or artifact) of a working task."""
        if isinstance(update, str):
            update = Status(update)
        if isinstance(update, Status):
            self.transition(record, TaskState.working, update.to_parts(), update.metadata)
        elif isinstance(update, TextArtifact | DataArtifact | FileArtifact | PartsArtifact):
            self._on_event(record, record.add_artifact(update))
        else:
            raise TypeError(
                f"{type(self.agent).__name__}.handle yielded {update!r}; yield a str, Status, TextArtifact, "
                "DataArtifact, FileArtifact, Reply or InputRequired"
            )

    def _finish(self, record: TaskRecord, result: Any) -> None:
        """End the segment with what a handler returned (or yielded last)."""
        if result is None:
            self.transition(record, TaskState.completed)
        elif isinstance(result, str):
            self.transition(record, TaskState.completed, [TextPart(text=result)])
        elif isinstance(result, Message):
            self.transition(record, TaskState.completed, list(result.parts))
        elif isinstance(result, Reply):
            self.transition(record, TaskState.completed, result.to_parts(), result.metadata)
        elif isinstance(result, InputRequired):
            record.input_timeout = (result.timeout_s, result.timeout_reason) if result.timeout_s else None
            metadata = result.metadata
            if result.timeout_s:  # journaled with the question: a restart arms the rest of it
                metadata = deadline_metadata(metadata, result.timeout_s, result.timeout_reason)
            self.transition(record, TaskState.input_required, result.to_parts(), metadata)
        elif isinstance(result, AuthRequired):
            self.transition(record, TaskState.auth_required, result.to_parts())
        elif isinstance(result, Rejected):
            self.transition(record, TaskState.rejected, result.to_parts())
        elif isinstance(result, MessageOnly):
            record.message_answer = Message(
                message_id=new_id(), role=Role.agent, parts=result.to_parts(), context_id=record.context_id
            )
            self.transition(record, TaskState.completed, result.to_parts())
        else:
            raise TypeError(
                f"{type(self.agent).__name__}.handle returned {result!r}; return a str, Message, Reply, "
                "InputRequired, AuthRequired, Rejected, MessageOnly or None"
            )

    def _end(self, record: TaskRecord, state: TaskState, text: str) -> None:
        if record.is_terminal:
            return
        if state is TaskState.failed and record.state in INTERRUPTED_STATES:
            self.transition(record, TaskState.working)  # A2A fails only a working task (an unanswered question)
        self.transition(record, state, [TextPart(text=text)])

    # ------------------------------------------------------------------ cancellation

    async def cancel(
        self, record: TaskRecord, reason: str = "canceled", *, state: TaskState = TaskState.canceled
    ) -> None:
        """End the task in ``state`` (canceled, or failed) wherever it is: running or waiting for input."""
        if record.is_terminal:
            return
        record.cancel_reason = reason
        record.cancel_state = state
        record.cancelled.set()
        drive = record.drive
        if drive is not None and not drive.done():
            drive.cancel()
            if await _settles(record, CANCEL_GRACE_S):
                return
            log.warning("%s: task %s ignored cancellation for %.0f s", self.agent.name, record.id, CANCEL_GRACE_S)
        generator, record.generator = record.generator, None
        if generator is not None:
            await _close(generator)
        self._end(record, record.cancel_state, record.cancel_reason)

    async def wait_idle(self, timeout: float) -> None:
        """Wait for running segments to end (after their tasks were canceled); stop the watchdog."""
        if self._segments:
            await asyncio.wait(list(self._segments), timeout=timeout)
        watchdog = self._watchdog
        if watchdog is not None:
            watchdog.cancel()
            await asyncio.wait([watchdog])


async def _settles(record: TaskRecord, timeout: float) -> bool:
    """Whether the task ends within ``timeout`` seconds (its handler unwound after a cancel)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(record.settled.wait(), timeout)
    return record.is_terminal


async def _close(generator: AsyncGenerator[Any, Any]) -> None:
    try:
        await generator.aclose()
    except Exception:  # a handler's cleanup failing must not mask the outcome
        log.exception("closing a handler generator failed")


async def _offload(update: FileArtifact, ctx: TaskContext) -> FileArtifact | PartsArtifact:
    """An inline file over the store's threshold, stored and replaced by its URI (the seed's rule)."""
    store = ctx.artifacts
    content = update.content
    if store is None or content is None or len(content) <= store.limits.inline_threshold_bytes:
        return update
    if update.append or update.last_chunk is False:  # one chunk of a streamed file: left as it comes
        return update
    name = safe_file_name(update.name, f"{update.artifact_id or 'file'}.bin")
    info = await store.save(
        ctx.context_id, name, content, mime_type=update.mime_type, owner_task=ctx.task_id, owner_user=ctx.user_id
    )
    return PartsArtifact(
        update.name,
        [file_part(info)],
        artifact_id=update.artifact_id,
        description=update.description,
        append=update.append,
        last_chunk=update.last_chunk,
        metadata={**(update.metadata or {}), "size_bytes": info.size, "version": info.version},
    )
