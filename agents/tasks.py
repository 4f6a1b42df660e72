"""Tasks in memory: their state machine, their streams, and how long they are kept.

The :class:`TaskStore` writes every change through to a :class:`~agents.journal.TaskJournal`
(SQLite by default), from which a restarted agent gets its tasks back.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter, OrderedDict, deque
from collections.abc import AsyncGenerator, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.journal import LoadedTasks, NullJournal, TaskJournal
from agents.updates import ArtifactUpdate
from mesh.a2a import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    Artifact,
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    check_transition,
)
from mesh.timestamps import utc_now_iso

if TYPE_CHECKING:
    from agents.answers import AnswerDialect


@dataclass(frozen=True, slots=True)
class Listener:
    """A stream subscribed to a task: events go to ``topic`` as responses to ``request_id``.

    ``progress_only`` is for the status topic of a ``message/send``: it gets the events that
    say something (status messages, artifacts) but not bare state changes, nor the closing
    status-update, which the Task answer repeats at once.

    ``until_terminal`` is for ``tasks/resubscribe``: the stream outlives interrupted states
    (input-required, auth-required; their status-update reaches it with ``final: false``) and
    ends only when the task does.
    """

    topic: str
    request_id: str | int | None
    correlation: bytes | None
    progress_only: bool = False
    until_terminal: bool = False
    #: The request's dialect (the EMQX profile's codec), shared with its final answer's route.
    dialect: AnswerDialect | None = None

    def wants(self, event: TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> bool:
        if not self.progress_only or isinstance(event, TaskArtifactUpdateEvent):
            return True
        return not event.final and event.status.message is not None


@dataclass(eq=False)
class TaskRecord:
    """One task: the A2A ``Task`` plus what the runtime needs to drive it."""

    task: Task
    listeners: list[Listener] = field(default_factory=list)
    # A generator handler waiting in input-required for the next message.
    generator: AsyncGenerator[Any, Any] | None = None
    # The handler's asyncio task while it runs; cancelled by tasks/cancel.
    drive: asyncio.Task[None] | None = None
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    cancel_reason: str = "canceled"
    # Set whenever the task is terminal or interrupted: what blocking requests wait for.
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    finished_at: float | None = None
    # When the task last changed (status or artifact): what the stall watchdog looks at.
    progressed_at: float = field(default_factory=time.monotonic)
    # The state a cancellation ends in: canceled, or failed when the runtime gave up on it.
    cancel_state: TaskState = TaskState.canceled
    input_timer: asyncio.TimerHandle | None = None
    # The current question's own bound (InputRequired.timeout_s) and what the task fails with.
    input_timeout: tuple[float, str] | None = None
    # Called once, the next time the task settles: how blocking requests get their answer.
    on_settle: list[Callable[[], None]] = field(default_factory=list)
    # The request that created it (see agents.dispatch.request_key): how a redelivery is known.
    request_key: str | None = None
    # Loaded from the journal unfinished: its handler died with the previous process.
    orphaned: bool = False
    # The handler answered with a bare Message (MessageOnly): the requests get it, not the Task.
    message_answer: Message | None = None
    # Who may act on it (agents.owners): the verified user, else the calling component.
    owner: str | None = None
    # When this process took the task (time.monotonic): its duration metric starts there.
    created_at: float = field(default_factory=time.monotonic)

    @classmethod
    def new(cls, task_id: str, context_id: str) -> TaskRecord:
        status = TaskStatus(state=TaskState.submitted, timestamp=utc_now_iso())
        return cls(task=Task(id=task_id, context_id=context_id, status=status, history=[], artifacts=[]))

    @property
    def id(self) -> str:
        return self.task.id

    @property
    def context_id(self) -> str:
        return self.task.context_id

    @property
    def state(self) -> TaskState:
        return self.task.status.state

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    def add_message(self, message: Message) -> None:
        if self.task.history is None:
            self.task.history = []
        self.task.history.append(message)

    def set_status(self, state: TaskState, message: Message | None = None) -> TaskStatusUpdateEvent:
        """Move to ``state`` (checked against the state machine) and return the event."""
        check_transition(self.state, state)
        self.progressed_at = time.monotonic()
        self.task.status = TaskStatus(state=state, message=message, timestamp=utc_now_iso())
        if message is not None:
            self.add_message(message)
        final = state in TERMINAL_STATES or state in INTERRUPTED_STATES
        if final:
            self.settled.set()
        if state in TERMINAL_STATES:
            self.finished_at = time.monotonic()
        return TaskStatusUpdateEvent(task_id=self.id, context_id=self.context_id, status=self.task.status, final=final)

    def add_artifact(self, update: ArtifactUpdate) -> TaskArtifactUpdateEvent:
        """Record an artifact (or append a chunk to an earlier one) and return the event."""
        if self.task.artifacts is None:
            self.task.artifacts = []
        self.progressed_at = time.monotonic()
        parts = update.to_parts()
        artifact_id = update.artifact_id or uuid.uuid4().hex
        existing = next((a for a in self.task.artifacts if a.artifact_id == artifact_id), None)
        if update.append and existing is not None:
            existing.parts.extend(parts)
        else:
            self.task.artifacts.append(
                Artifact(
                    artifact_id=artifact_id,
                    name=update.name,
                    description=update.description,
                    parts=list(parts),
                    metadata=update.metadata,
                )
            )
        chunk = Artifact(
            artifact_id=artifact_id,
            name=update.name,
            description=update.description,
            parts=parts,
            metadata=update.metadata,
        )
        return TaskArtifactUpdateEvent(
            task_id=self.id,
            context_id=self.context_id,
            artifact=chunk,
            append=update.append or None,
            last_chunk=update.last_chunk,
        )

    def snapshot(self, history_length: int | None = None) -> Task:
        """A copy of the task as it is now; ``history_length`` keeps the last N messages."""
        history = list(self.task.history or [])
        if history_length is not None:
            history = history[-history_length:] if history_length else []
        return self.task.model_copy(update={"history": history, "artifacts": list(self.task.artifacts or [])})


class TaskStore:
    """Tasks by id; finished ones are kept for tasks/get, bounded by count, bytes and age.

    A finished task is accounted at its JSON size; the oldest finished tasks are forgotten
    first whenever the count, the bytes or the age goes past its bound. Every change goes to
    the ``journal`` too (call :meth:`changed`), and every task forgotten leaves it.
    """

    def __init__(
        self, *, retention_s: float, max_finished: int, max_bytes: int, journal: TaskJournal | None = None
    ) -> None:
        self.retention_s = retention_s
        self.max_finished = max_finished
        self.max_bytes = max_bytes
        self.journal: TaskJournal = journal if journal is not None else NullJournal()
        #: JSON bytes of the finished tasks kept now (at most ``max_bytes`` after each finish).
        self.retained_bytes = 0
        self._tasks: dict[str, TaskRecord] = {}
        self._by_request: dict[str, TaskRecord] = {}
        self._finished: OrderedDict[str, tuple[float, int]] = OrderedDict()
        self._per_context: Counter[str] = Counter()
        #: Told of each task forgotten past its retention (the agent deletes its artifacts).
        self.on_forgotten: Callable[[TaskRecord], None] | None = None

    def __contains__(self, task_id: str) -> bool:
        return task_id in self._tasks

    def __len__(self) -> int:
        return len(self._tasks)

    def get(self, task_id: str) -> TaskRecord | None:
        return self._tasks.get(task_id)

    def add(self, record: TaskRecord) -> None:
        self._tasks[record.id] = record
        self._per_context[record.context_id] += 1
        if record.request_key is not None:
            self._by_request[record.request_key] = record
        self.journal.changed(record)

    def changed(self, record: TaskRecord) -> None:
        """The task changed (status, artifact, message): write it through."""
        self.journal.changed(record)

    def by_request(self, request_key: str) -> TaskRecord | None:
        """The task the request with this key created, if it is still kept."""
        return self._by_request.get(request_key)

    def discard(self, record: TaskRecord) -> None:
        """Forget a task at once (an orphan whose request came back to run again)."""
        if self._tasks.get(record.id) is record:
            self._forget(record)
            self.journal.forgotten(record.id)

    def restore(self, loaded: LoadedTasks) -> list[TaskRecord]:
        """Take back what the journal held; return the tasks that were unfinished (orphans).

        Finished tasks age from when they were last written; the bounds apply at once.
        """
        orphans = []
        now = time.monotonic()
        for stored in loaded.tasks:
            record = TaskRecord(task=stored.task, request_key=stored.request_key, owner=stored.owner)
            self._tasks[record.id] = record
            self._per_context[record.context_id] += 1
            if record.request_key is not None:
                self._by_request[record.request_key] = record
            if record.is_terminal:
                record.settled.set()
                record.finished_at = now - stored.age_s
                self._finished[record.id] = (record.finished_at, _json_size(record.task))
                self.retained_bytes += self._finished[record.id][1]
            elif record.state in INTERRUPTED_STATES:
                record.settled.set()  # still waiting for its user: the answer runs the handler again
            else:
                record.orphaned = True
                orphans.append(record)
        self._forgotten(self._enforce_bounds(now))
        return orphans

    def _forget(self, record: TaskRecord) -> None:
        del self._tasks[record.id]
        if record.request_key is not None and self._by_request.get(record.request_key) is record:
            del self._by_request[record.request_key]
        if (finished := self._finished.pop(record.id, None)) is not None:
            self.retained_bytes -= finished[1]
        left = self._per_context[record.context_id] - 1
        if left > 0:
            self._per_context[record.context_id] = left
        else:
            del self._per_context[record.context_id]

    def records(self) -> Iterator[TaskRecord]:
        """Every task kept, finished or not (``tasks/list``)."""
        return iter(list(self._tasks.values()))

    def active(self) -> Iterator[TaskRecord]:
        return (r for r in list(self._tasks.values()) if not r.is_terminal)

    def has_context(self, context_id: str) -> bool:
        """Whether a task of ``context_id`` is still kept."""
        return context_id in self._per_context

    def finished(self, record: TaskRecord) -> list[TaskRecord]:
        """Note that ``record`` ended; return the tasks forgotten to stay within the bounds."""
        now = time.monotonic()
        if (earlier := self._finished.pop(record.id, None)) is not None:
            self.retained_bytes -= earlier[1]
        try:
            task_json: bytes | None = record.task.to_json_bytes()
        except ValueError:  # text no JSON can carry (a handler's lone surrogate)
            task_json = None
        size = len(task_json) if task_json is not None else _json_size(record.task)
        self._finished[record.id] = (now, size)
        self.retained_bytes += size
        self.journal.changed(record, task_json)  # its final state, serialized once for both
        dropped = self._enforce_bounds(now)
        self._forgotten(dropped)
        return dropped

    def _forgotten(self, dropped: list[TaskRecord]) -> None:
        for gone in dropped:
            self.journal.forgotten(gone.id)
            if self.on_forgotten is not None:
                self.on_forgotten(gone)

    def _enforce_bounds(self, now: float) -> list[TaskRecord]:
        dropped = []
        horizon = now - self.retention_s
        while self._finished:
            oldest_id, (ended, _size) = next(iter(self._finished.items()))
            if ended > horizon and len(self._finished) <= self.max_finished and self.retained_bytes <= self.max_bytes:
                break
            if (gone := self._tasks.get(oldest_id)) is not None:
                self._forget(gone)
                dropped.append(gone)
            else:
                self.retained_bytes -= self._finished.pop(oldest_id)[1]
        return dropped


def _json_size(task: Task) -> int:
    try:
        return len(task.to_json_bytes())
    except ValueError:  # text no JSON can carry (a handler's lone surrogate): count it anyway
        return len(repr(task))


class ContextHistory:
    """The last messages of each ``contextId`` (user messages and agent replies)."""

    def __init__(self, *, per_context: int, max_contexts: int = 10_000) -> None:
        self.per_context = per_context
        self.max_contexts = max_contexts
        self._contexts: OrderedDict[str, deque[Message]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._contexts)

    def messages(self, context_id: str) -> list[Message]:
        found = self._contexts.get(context_id)
        return list(found) if found is not None else []

    def append(self, context_id: str, message: Message) -> None:
        found = self._contexts.get(context_id)
        if found is None:
            found = self._contexts[context_id] = deque(maxlen=self.per_context)
            if len(self._contexts) > self.max_contexts:
                self._contexts.popitem(last=False)
        else:
            self._contexts.move_to_end(context_id)
        found.append(message)

    def drop(self, context_id: str) -> None:
        """Forget a conversation (its last task was forgotten)."""
        self._contexts.pop(context_id, None)
