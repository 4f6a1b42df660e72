"""A2A 1.0 results as the mesh's A2A 0.3 models: the way back of :mod:`mesh.profile.v1`.

Used where the mesh is the caller of an A2A 1.0 agent (an EMQX profile agent,
:mod:`mesh.profile.requester`): a ``StreamResponse`` (``{"task"}``, ``{"message"}``,
``{"statusUpdate"}``, ``{"artifactUpdate"}``) becomes a Task, Message or event model, and a
1.0 card the registry's 0.3 :class:`~mesh.a2a.AgentCard`. Parts and messages are read with the
request reader (:mod:`mesh.profile.v1_requests`), so both directions share one ProtoJSON reading.
A status update's ``final`` (0.3) is set when its state ends a stream (terminal or interrupted).

A malformed result raises :class:`~mesh.a2a.InvalidAgentResponse` naming the bad member.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mesh.a2a import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    AgentCard,
    InvalidAgentResponse,
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
    parse_result,
)
from mesh.profile.v1 import JSON, STATE_FROM_V1, TASK_STATE_NAMES
from mesh.profile.v1_requests import BadMember, ProtoObject, message_from_v1, part_from_v1

__all__ = ["card_from_v1", "result_from_v1", "status_from_v1", "task_from_v1"]

Result = Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent


def _put(target: JSON, key: str, value: Any) -> None:
    if value is not None:
        target[key] = value


def status_from_v1(status: ProtoObject) -> JSON:
    """A 1.0 ``TaskStatus`` as 0.3 JSON."""
    name = status.enum("state", TASK_STATE_NAMES)
    out: JSON = {"state": STATE_FROM_V1.get(name, TaskState.unknown).value}
    message = status.child("message")
    if message is not None:
        out["message"] = message_from_v1(message, role_default="ROLE_AGENT")
    _put(out, "timestamp", status.string("timestamp"))
    return out


def _artifact(artifact: ProtoObject) -> JSON:
    out: JSON = {"artifactId": artifact.string("artifactId") or "artifact"}
    out["parts"] = [part_from_v1(p) for p in artifact.children("parts")]
    for key in ("name", "description"):
        _put(out, key, artifact.string(key))
    _put(out, "metadata", artifact.struct("metadata"))
    return out


def task_from_v1(task: ProtoObject) -> JSON:
    """A 1.0 ``Task`` as 0.3 JSON (``kind: task``)."""
    status = task.child("status")
    out: JSON = {"kind": "task", "id": task.required_string("id"), "contextId": task.string("contextId") or ""}
    out["status"] = status_from_v1(status) if status is not None else {"state": TaskState.unknown.value}
    out["artifacts"] = [_artifact(a) for a in task.children("artifacts")]
    out["history"] = [message_from_v1(m) for m in task.children("history")]
    _put(out, "metadata", task.struct("metadata"))
    return out


def _result(doc: ProtoObject) -> JSON:
    if (task := doc.child("task")) is not None:
        return task_from_v1(task)
    if (message := doc.child("message")) is not None:
        return message_from_v1(message, role_default="ROLE_AGENT")
    if (update := doc.child("statusUpdate")) is not None:
        status = update.child("status")
        out: JSON = {"kind": "status-update", "taskId": update.required_string("taskId")}
        out["contextId"] = update.string("contextId") or ""
        out["status"] = status_from_v1(status) if status is not None else {"state": TaskState.unknown.value}
        state = TaskState(out["status"]["state"])
        out["final"] = state in TERMINAL_STATES or state in INTERRUPTED_STATES
        _put(out, "metadata", update.struct("metadata"))
        return out
    if (update := doc.child("artifactUpdate")) is not None:
        artifact = update.child("artifact")
        if artifact is None:
            raise BadMember(update.at("artifact"), "required", "missing")
        out = {"kind": "artifact-update", "taskId": update.required_string("taskId")}
        out["contextId"] = update.string("contextId") or ""
        out["artifact"] = _artifact(artifact)
        for key in ("append", "lastChunk"):
            _put(out, key, update.boolean(key))
        _put(out, "metadata", update.struct("metadata"))
        return out
    # A bare 1.0 Task (GetTask / CancelTask as A2A 1.0 answers them)
    if doc.raw("id") is not None and doc.child("status") is not None:
        return task_from_v1(doc)
    raise BadMember(doc.path, "expected one of task, message, statusUpdate, artifactUpdate", "kind")


def result_from_v1(result: Any) -> Result:
    """One 1.0 result or ``StreamResponse`` as the mesh's 0.3 model."""
    if not isinstance(result, Mapping):
        raise InvalidAgentResponse(f"result: expected an object, got {type(result).__name__}")
    try:
        converted = _result(ProtoObject(dict(result), "result"))
    except BadMember as bad:
        raise InvalidAgentResponse(f"{bad.path}: {bad.reason}") from None
    value: Result = parse_result(converted)
    return value


def card_from_v1(card: Mapping[str, Any], *, url: str) -> AgentCard:
    """The registry's 0.3 view of a 1.0 card (name, description, skills, capabilities); ``url``: where it is reached."""
    data: JSON = {
        "name": card.get("name"),
        "description": card.get("description") or "",
        "url": url,
        "version": card.get("version") or "0",
        "protocolVersion": "0.3.0",
        "capabilities": {
            key: value
            for key, value in (card.get("capabilities") or {}).items()
            if key in ("streaming", "pushNotifications") and isinstance(value, bool)
        },
        "defaultInputModes": card.get("defaultInputModes") or ["text/plain"],
        "defaultOutputModes": card.get("defaultOutputModes") or ["text/plain"],
        "skills": [
            {k: s[k] for k in ("id", "name", "description", "tags", "examples") if k in s}
            | {"tags": s.get("tags") or []}
            for s in card.get("skills") or ()
            if isinstance(s, Mapping)
        ],
    }
    return AgentCard.model_validate(data)
