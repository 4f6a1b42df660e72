"""Between the mesh's A2A 0.3 models and the a2a-sdk's 1.0 protobuf types, both ways.

One reading of A2A 1.0 serves the whole mesh (:mod:`mesh.profile.v1` out, :mod:`mesh.profile.v1_results`
back); here it is applied to what the a2a-sdk client takes and yields, through ProtoJSON. A remote
event becomes the handler update the task runtime knows (:mod:`agents.updates`), so the proxy's
tasks have the same states, events and journal as any agent's.
"""

from __future__ import annotations

import base64
import binascii
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

__all__ = ["REMOTE_EXTENSION", "RemoteIds", "mesh_card", "outgoing", "translate"]

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
    body = message_v1(message)
    body.pop("taskId", None)
    body.pop("contextId", None)
    if ids.task_id:
        body["taskId"] = ids.task_id
    if ids.context_id:
        body["contextId"] = ids.context_id
    request = pb.SendMessageRequest()
    json_format.ParseDict({"message": body}, request, ignore_unknown_fields=True)
    return request


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


def _text_and_data(message: Message | None) -> tuple[str | None, dict[str, Any] | None]:
    parts = message.parts if message is not None else []
    text = "\n".join(p.text for p in parts if isinstance(p, TextPart)) or None
    data = next((p.data for p in parts if isinstance(p, DataPart)), None)
    return text, data


def _ending(status: TaskStatus, ids: RemoteIds) -> Update | None:
    """The update a remote status maps to; ``None`` for progress without a message."""
    message, state = status.message, status.state
    text, data = _text_and_data(message)
    parts = tuple(message.parts) if message is not None else ()
    if state is TaskState.completed:
        return Reply(parts=parts, metadata=ids.metadata())
    if state is TaskState.input_required:
        return InputRequired(text or "the remote agent asks for more input", data, metadata=ids.metadata())
    if state is TaskState.auth_required:
        return AuthRequired(text or "the remote agent asks for authentication", data)
    if state is TaskState.rejected:
        return Rejected(text or "the remote agent rejected the task", data)
    if state in (TaskState.failed, TaskState.canceled, TaskState.unknown):
        raise TaskFailed(f"the remote agent's task {ids.task_id} ended {state.value}: {text or 'no reason given'}")
    return Status(parts=parts) if parts else None


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
        ending = _ending(result.status, ids)
        return [*updates, ending] if ending is not None else updates
    if isinstance(result, TaskStatusUpdateEvent):
        ids.task_id = ids.task_id or result.task_id
        ending = _ending(result.status, ids)
        return [ending] if ending is not None else []
    return [_artifact(result)]


def mesh_card(remote: pb.AgentCard, url: str) -> AgentCard:
    """The registry's view of the remote card (name, skills, capabilities, modes), reached at ``url``."""
    return card_from_v1(json_format.MessageToDict(remote), url=url)
