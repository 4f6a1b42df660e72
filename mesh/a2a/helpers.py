"""SAM's A2A helper functions, same names and keywords, so SAM agent code ports directly.

Message ids default to ``uuid4().hex``; status timestamps are UTC ISO 8601.
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

from mesh.timestamps import utc_now_iso

from .errors import InternalErrorObject
from .jsonrpc import (
    CancelTaskRequest,
    JSONRPCErrorResponse,
    RequestId,
    SendMessageRequest,
    SendStreamingMessageRequest,
)
from .messages import Message, Role
from .params import MessageSendParams, TaskIdParams
from .parts import DataPart, FilePart, FileWithBytes, FileWithUri, TextPart
from .tasks import Artifact, TaskArtifactUpdateEvent, TaskState, TaskStatus, TaskStatusUpdateEvent

AnyPart = TextPart | FilePart | DataPart


def new_id() -> str:
    """A fresh message / request id."""
    return uuid.uuid4().hex


def create_text_part(text: str, metadata: dict[str, Any] | None = None) -> TextPart:
    """A text part."""
    return TextPart(text=text, metadata=metadata)


def create_file_part_from_uri(
    uri: str,
    name: str | None = None,
    mime_type: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> FilePart:
    """A file part referring to ``uri``."""
    return FilePart(file=FileWithUri(uri=uri, name=name, mime_type=mime_type), metadata=metadata)


def create_file_part_from_bytes(
    content: bytes,
    name: str | None = None,
    mime_type: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> FilePart:
    """A file part carrying ``content`` inline (base64-encoded on the wire)."""
    encoded = base64.b64encode(content).decode("ascii")
    return FilePart(file=FileWithBytes(bytes=encoded, name=name, mime_type=mime_type), metadata=metadata)


def create_data_part(data: dict[str, Any], metadata: dict[str, Any] | None = None) -> DataPart:
    """A structured-data part."""
    return DataPart(data=data, metadata=metadata)


def _message(
    role: Role,
    parts: list[AnyPart],
    metadata: dict[str, Any] | None,
    context_id: str | None,
    task_id: str | None,
    message_id: str | None,
) -> Message:
    return Message(
        message_id=message_id or new_id(),
        role=role,
        parts=parts,
        context_id=context_id,
        task_id=task_id,
        metadata=metadata,
    )


def create_user_message(
    parts: list[AnyPart],
    metadata: dict[str, Any] | None = None,
    context_id: str | None = None,
    task_id: str | None = None,
    message_id: str | None = None,
) -> Message:
    """A user message with a fresh message id unless ``message_id`` is given."""
    return _message(Role.user, parts, metadata, context_id, task_id, message_id)


def create_agent_message(
    parts: list[AnyPart],
    metadata: dict[str, Any] | None = None,
    context_id: str | None = None,
    task_id: str | None = None,
    message_id: str | None = None,
) -> Message:
    """An agent message with a fresh message id unless ``message_id`` is given."""
    return _message(Role.agent, parts, metadata, context_id, task_id, message_id)


def create_agent_data_message(
    data: dict[str, Any],
    metadata: dict[str, Any] | None = None,
    context_id: str | None = None,
    task_id: str | None = None,
    message_id: str | None = None,
) -> Message:
    """An agent message with a single data part."""
    return _message(Role.agent, [DataPart(data=data)], metadata, context_id, task_id, message_id)


def create_status_update(
    task_id: str,
    context_id: str,
    message: Message | None = None,
    is_final: bool = False,
    state: TaskState = TaskState.working,
    metadata: dict[str, Any] | None = None,
) -> TaskStatusUpdateEvent:
    """A status-update event stamped with the current time."""
    return TaskStatusUpdateEvent(
        task_id=task_id,
        context_id=context_id,
        status=TaskStatus(state=state, message=message, timestamp=utc_now_iso()),
        final=is_final,
        metadata=metadata,
    )


def create_artifact_update(
    task_id: str,
    context_id: str,
    artifact: Artifact,
    append: bool | None = None,
    last_chunk: bool | None = None,
    metadata: dict[str, Any] | None = None,
) -> TaskArtifactUpdateEvent:
    """An artifact-update event."""
    return TaskArtifactUpdateEvent(
        task_id=task_id,
        context_id=context_id,
        artifact=artifact,
        append=append,
        last_chunk=last_chunk,
        metadata=metadata,
    )


def get_message_from_status_update(event: TaskStatusUpdateEvent) -> Message | None:
    """The message of an event's status, if any."""
    return event.status.message


def get_parts_from_message(message: Message) -> list[AnyPart]:
    """The parts of a message (a new list)."""
    return list(message.parts)


def get_text_from_message(message: Message, delimiter: str = "\n") -> str:
    """The text parts of a message joined by ``delimiter``; other parts are skipped."""
    return delimiter.join(part.text for part in message.parts if isinstance(part, TextPart))


def create_send_message_request(
    message: Message, task_id: str, metadata: dict[str, Any] | None = None
) -> SendMessageRequest:
    """A ``message/send`` request whose JSON-RPC id is the task id (SAM's convention)."""
    params = MessageSendParams(message=message, metadata=metadata)
    return SendMessageRequest(id=task_id, params=params)


def create_send_streaming_message_request(
    message: Message, task_id: str, metadata: dict[str, Any] | None = None
) -> SendStreamingMessageRequest:
    """A ``message/stream`` request whose JSON-RPC id is the task id (SAM's convention)."""
    params = MessageSendParams(message=message, metadata=metadata)
    return SendStreamingMessageRequest(id=task_id, params=params)


def create_cancel_task_request(task_id: str) -> CancelTaskRequest:
    """A ``tasks/cancel`` request for ``task_id`` with a fresh request id."""
    return CancelTaskRequest(id=new_id(), params=TaskIdParams(id=task_id))


def create_internal_error_response(
    message: str, request_id: RequestId, data: dict[str, Any] | None = None
) -> JSONRPCErrorResponse:
    """A -32603 internal error answering ``request_id``."""
    return JSONRPCErrorResponse(id=request_id, error=InternalErrorObject(message=message, data=data))
