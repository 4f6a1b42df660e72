"""Between the mesh's A2A 0.3 models and the a2a-sdk's 1.0 protobuf types, both ways.

One reading of A2A 1.0 serves the whole mesh (:mod:`mesh.profile.v1` out, :mod:`mesh.profile.v1_results`
back); here it is applied to what the a2a-sdk client takes and yields, through ProtoJSON. A remote
event becomes the handler update the task runtime knows (:mod:`agents.updates`), so the proxy's
tasks have the same states, events and journal as any agent's.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from typing import Any

from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format

from agents.updates import (
    AuthRequired,
    FileArtifact,
    InputRequired,
    PartsArtifact,
    Rejected,
    Reply,
    Status,
    TaskFailed,
    Update,
)
from mesh.a2a import (
    AgentCard,
    DataPart,
    FilePart,
    FileWithBytes,
    InvalidParams,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    TextPart,
    find_unserializable,
)
from mesh.limits import MessageLimits, check_message_limits
from mesh.profile.v1 import message_v1
from mesh.profile.v1_results import Result, card_from_v1, result_from_v1

__all__ = ["REMOTE_EXTENSION", "RemoteIds", "mesh_card", "outgoing", "translate", "updates_of"]

#: The card extension that says an agent is a remote one, and where it lives.
REMOTE_EXTENSION = "urn:mqtt-agent-mesh:remote-a2a"


class RemoteIds:
    """The remote task and context a mesh task maps to (kept on its messages' metadata)."""

    __slots__ = ("context_id", "task_id")

    def __init__(self, task_id: str | None = None, context_id: str | None = None) -> None:
        self.task_id, self.context_id = task_id, context_id

    def metadata(self) -> dict[str, Any]:
        return {"remote": {"taskId": self.task_id, "contextId": self.context_id}}

    @classmethod
    def of(cls, message: Message | None) -> RemoteIds | None:
        remote = (message.metadata or {}).get("remote") if message is not None else None
        if not isinstance(remote, dict):
            return None
        return cls(remote.get("taskId"), remote.get("contextId"))


def outgoing(message: Message, ids: RemoteIds) -> pb.SendMessageRequest:
    """The mesh message as the remote's ``SendMessage``: on the remote task and context when known."""
    request = pb.SendMessageRequest()
    if _plain_text(message):  # the common message, built directly (ProtoJSON costs ~40 us)
        out = request.message
        out.message_id, out.role = message.message_id, _ROLES[message.role]
        out.parts.extend(pb.Part(text=part.text) for part in message.parts if isinstance(part, TextPart))
    else:
        body = message_v1(message)
        body.pop("taskId", None)
        body.pop("contextId", None)
        json_format.ParseDict({"message": body}, request, ignore_unknown_fields=True)
    if ids.task_id:
        request.message.task_id = ids.task_id
    if ids.context_id:
        request.message.context_id = ids.context_id
    return request


def _plain_text(message: Message) -> bool:
    """Whether ``message`` is text parts and nothing else (no metadata, extensions or references)."""
    if message.metadata or message.extensions or message.reference_task_ids:
        return False
    return all(type(p) is TextPart and not p.metadata and not p.model_extra for p in message.parts)


def updates_of(event: pb.StreamResponse, ids: RemoteIds, limits: MessageLimits) -> list[Update]:
    """The updates one remote event stands for, in order (see :func:`translate`).

    A status (of a Task or a status update) whose message is text only, or that has none, is
    read from the protobuf as it is: most events of a call (submitted, working, the answer) are
    such, and the ProtoJSON and model round trip of the general path costs ~70 us each. The
    rest, and anything unusual, takes the general path (:func:`incoming`, then :func:`translate`).
    """
    kind = event.WhichOneof("payload")
    if kind == "task" and event.task.id and not event.task.artifacts:
        task = event.task  # its history is the remote's record of the turn: not the mesh's to read
        parts = _text_parts(task.status, limits)
        if parts is not None:
            ids.task_id, ids.context_id = task.id, task.context_id or ids.context_id
            return _ended(_STATES[task.status.state], parts, ids)
    elif kind == "status_update" and event.status_update.task_id:
        update = event.status_update
        parts = _text_parts(update.status, limits)
        if parts is not None:
            ids.task_id = ids.task_id or update.task_id
            return _ended(_STATES[update.status.state], parts, ids)
    return translate(incoming(event, limits), ids, with_artifacts=True)


def _text_parts(status: pb.TaskStatus, limits: MessageLimits) -> tuple[TextPart, ...] | None:
    """The status message's text parts (within the limits), () without a message, or None when the
    status is not that simple (another state, another kind of part, metadata, references)."""
    if status.state not in _STATES:
        return None
    if not status.HasField("message"):
        return ()
    message = status.message
    if message.HasField("metadata") or message.extensions or message.reference_task_ids:
        return None
    parts = message.parts
    if not parts or not all(_bare_text(p) for p in parts):
        return None
    texts = [p.text for p in parts]
    try:
        check_message_limits({"parts": [{"text": text} for text in texts]}, limits, path="remote.message")
    except InvalidParams as exc:
        raise TaskFailed(f"the remote agent's answer is refused: {exc}") from None
    return tuple(TextPart(text=text) for text in texts)


def _bare_text(part: pb.Part) -> bool:
    return part.WhichOneof("content") == "text" and not (part.HasField("metadata") or part.filename or part.media_type)


def _ended(state: TaskState, parts: tuple[TextPart, ...], ids: RemoteIds) -> list[Update]:
    ending = _ending(state, parts, ids)
    return [ending] if ending is not None else []


_ROLES = {Role.user: pb.ROLE_USER, Role.agent: pb.ROLE_AGENT}
_STATES = {
    pb.TASK_STATE_SUBMITTED: TaskState.submitted,
    pb.TASK_STATE_WORKING: TaskState.working,
    pb.TASK_STATE_COMPLETED: TaskState.completed,
    pb.TASK_STATE_FAILED: TaskState.failed,
    pb.TASK_STATE_CANCELED: TaskState.canceled,
    pb.TASK_STATE_INPUT_REQUIRED: TaskState.input_required,
    pb.TASK_STATE_REJECTED: TaskState.rejected,
    pb.TASK_STATE_AUTH_REQUIRED: TaskState.auth_required,
}


def incoming(event: Any, limits: MessageLimits) -> Result:
    """One ``StreamResponse`` (or a bare ``Task``) as the mesh's model, within the limits a request
    to a local agent has (nesting depth, parts and their sizes): a remote is no more trusted."""
    doc = json_format.MessageToDict(event)
    found = find_unserializable(doc, "remote", limits.max_nesting_depth)
    if found is not None:
        raise TaskFailed(f"the remote agent's answer is refused: {found[0]}: {found[1]}")
    result = result_from_v1(doc)
    status = getattr(result, "status", None)
    message = result if isinstance(result, Message) else getattr(status, "message", None)
    if message is not None:
        try:
            check_message_limits(message, limits, path="remote.message")
        except InvalidParams as exc:
            raise TaskFailed(f"the remote agent's answer is refused: {exc}") from None
    return result


def _ending(state: TaskState, parts: Sequence[Part], ids: RemoteIds) -> Update | None:
    """The update a remote status (its state and message parts) maps to; ``None`` for progress
    without a message."""
    text = "\n".join(p.text for p in parts if isinstance(p, TextPart)) or None
    data = next((p.data for p in parts if isinstance(p, DataPart)), None)
    if state is TaskState.completed:
        return Reply(parts=tuple(parts), metadata=ids.metadata())
    if state is TaskState.input_required:
        return InputRequired(text or "the remote agent asks for more input", data, metadata=ids.metadata())
    if state is TaskState.auth_required:
        return AuthRequired(text or "the remote agent asks for authentication", data)
    if state is TaskState.rejected:
        return Rejected(text or "the remote agent rejected the task", data)
    if state in (TaskState.failed, TaskState.canceled, TaskState.unknown):
        raise TaskFailed(f"the remote agent's task {ids.task_id} ended {state.value}: {text or 'no reason given'}")
    return Status(parts=tuple(parts)) if parts else None


def _status_ending(status: TaskStatus, ids: RemoteIds) -> Update | None:
    return _ending(status.state, status.message.parts if status.message is not None else (), ids)


def _artifact(event: TaskArtifactUpdateEvent) -> Update:
    artifact = event.artifact
    parts = artifact.parts
    if len(parts) == 1 and isinstance(parts[0], FilePart) and isinstance(parts[0].file, FileWithBytes):
        file = parts[0].file  # inline bytes: the runtime stores them if above the threshold
        try:
            content = base64.b64decode(file.bytes, validate=True)
        except (binascii.Error, ValueError):
            raise TaskFailed(f"the remote agent's file {file.name!r} is not valid base64") from None
        return FileArtifact(
            file.name or artifact.name,
            content=content,
            mime_type=file.mime_type,
            artifact_id=artifact.artifact_id,
            description=artifact.description,
            append=bool(event.append),
            last_chunk=event.last_chunk,
        )
    return PartsArtifact(
        artifact.name,
        list[Part](parts),
        artifact_id=artifact.artifact_id,
        description=artifact.description,
        append=bool(event.append),
        last_chunk=event.last_chunk,
        metadata=artifact.metadata,
    )


def translate(result: Result, ids: RemoteIds, *, with_artifacts: bool) -> list[Update]:
    """The updates one remote event stands for, in order (a Task: its artifacts, then its status)."""
    if isinstance(result, Message):
        return [Reply(parts=tuple(result.parts), metadata=ids.metadata())]
    if isinstance(result, Task):
        ids.task_id, ids.context_id = result.id, result.context_id or ids.context_id
        updates: list[Update] = []
        if with_artifacts:
            for artifact in result.artifacts or ():
                event = TaskArtifactUpdateEvent(task_id=result.id, context_id=result.context_id, artifact=artifact)
                updates.append(_artifact(event))
        ending = _status_ending(result.status, ids)
        return [*updates, ending] if ending is not None else updates
    if isinstance(result, TaskStatusUpdateEvent):
        ids.task_id = ids.task_id or result.task_id
        ending = _status_ending(result.status, ids)
        return [ending] if ending is not None else []
    return [_artifact(result)]


def mesh_card(remote: pb.AgentCard, url: str) -> AgentCard:
    """The registry's view of the remote card (name, skills, capabilities, modes), reached at ``url``."""
    return card_from_v1(json_format.MessageToDict(remote), url=url)
