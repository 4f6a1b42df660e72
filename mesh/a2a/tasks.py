"""Tasks, their status and artifacts, and the streaming events that update them."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from .base import A2AModel
from .messages import Message
from .parts import Part
from .validation import discriminator, read_field, tag


class TaskState(StrEnum):
    """The nine A2A 0.3 task states; values are the wire strings."""

    submitted = "submitted"
    working = "working"
    input_required = "input-required"
    completed = "completed"
    canceled = "canceled"
    failed = "failed"
    rejected = "rejected"
    auth_required = "auth-required"
    unknown = "unknown"


class TaskStatus(A2AModel):
    """A task's state, with an optional message and an ISO 8601 timestamp."""

    state: TaskState
    message: Message | None = None
    # Kept as the sender's string: relayed status must not be reformatted.
    timestamp: str | None = None


class Artifact(A2AModel):
    """An output produced by a task."""

    artifact_id: str
    parts: list[Part]
    name: str | None = None
    description: str | None = None
    extensions: list[str] | None = None
    metadata: dict[str, Any] | None = None


class Task(A2AModel):
    """A unit of work with a lifecycle; the final answer to ``message/send``."""

    id: str
    context_id: str
    status: TaskStatus
    kind: Literal["task"] = "task"
    history: list[Message] | None = None
    artifacts: list[Artifact] | None = None
    metadata: dict[str, Any] | None = None


class TaskStatusUpdateEvent(A2AModel):
    """A streamed change of a task's status; ``final`` marks the last event of a stream."""

    task_id: str
    context_id: str
    status: TaskStatus
    final: bool
    kind: Literal["status-update"] = "status-update"
    metadata: dict[str, Any] | None = None


class TaskArtifactUpdateEvent(A2AModel):
    """A streamed artifact or artifact chunk (``append`` / ``last_chunk`` for chunking)."""

    task_id: str
    context_id: str
    artifact: Artifact
    kind: Literal["artifact-update"] = "artifact-update"
    append: bool | None = None
    last_chunk: bool | None = None
    metadata: dict[str, Any] | None = None


#: What a response ``result`` or stream event can be, discriminated by ``kind``.
Result = Annotated[
    Annotated[Task, tag(Task)]
    | Annotated[Message, tag(Message)]
    | Annotated[TaskStatusUpdateEvent, tag(TaskStatusUpdateEvent)]
    | Annotated[TaskArtifactUpdateEvent, tag(TaskArtifactUpdateEvent)],
    discriminator(
        {
            "task": Task,
            "message": Message,
            "status-update": TaskStatusUpdateEvent,
            "artifact-update": TaskArtifactUpdateEvent,
        },
        read=read_field("kind"),
        field="kind",
        expected="'task', 'message', 'status-update' or 'artifact-update'",
    ),
]
