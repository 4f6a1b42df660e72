"""The mesh's A2A 0.3 results as A2A 1.0 JSON (ProtoJSON of a2a-sdk's ``lf.a2a.v1`` types).

Also the vocabulary and codecs both directions share (enum names, base64, timestamps). The HTTP
gateway translates its 1.0 clients' answers with it; agents write the push notifications of
configs a 1.0 client created with it (:func:`push_payload_v1`), since they POST them directly.

Input is what an agent answered: a mesh model or its decoded JSON (validated here with
:func:`mesh.a2a.parse_result`, so a malformed answer raises :class:`InvalidAgentResponse`
naming the bad member). Output is what a2a-sdk 1.3's ``json_format.ParseDict`` reads:

- no ``kind``; the member name says the type: ``{"task"}`` / ``{"message"}`` for
  ``SendMessage``, plus ``{"statusUpdate"}`` / ``{"artifactUpdate"}`` as stream items;
- ``TASK_STATE_*`` and ``ROLE_*`` enum names (0.3 ``unknown`` -> ``TASK_STATE_UNSPECIFIED``);
- parts: text -> ``{text}``, data -> ``{data}`` (a2a-sdk's ``data_part_compat`` wrapper
  unwrapped), file bytes -> ``{raw}`` (standard base64), file uri -> ``{url}``, with
  ``mimeType``/``name`` -> ``mediaType``/``filename``;
- timestamps as RFC 3339 UTC the way protobuf writes them (``2026-11-01T12:00:00.120Z``; a
  naive one is read as UTC, an unreadable one is left out);
- ``final`` of a status update is dropped: :class:`StreamToV1` ends the stream instead;
- push configs flat: ``{taskId, id, url, token, authentication: {scheme, credentials}}``
  (the first of the 0.3 ``schemes``; 1.0 has one).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any, Final, TypeVar

from pydantic import ValidationError

from mesh.a2a import (
    INTERRUPTED_STATES,
    TERMINAL_STATES,
    Artifact,
    DataPart,
    FileWithBytes,
    InvalidAgentResponse,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    TextPart,
    parse_result,
)
from mesh.a2a.methods import BY_V1_NAME, TASK_ANSWER_METHODS, Method
from mesh.a2a.validation import format_validation_error, validation_error_details

JSON = dict[str, Any]

#: Enum names in proto number order: ``names[number]`` (ProtoJSON accepts either).
ROLE_NAMES: Final = ("ROLE_UNSPECIFIED", "ROLE_USER", "ROLE_AGENT")
TASK_STATE_NAMES: Final = (
    "TASK_STATE_UNSPECIFIED",
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
)

#: 0.3 role -> 1.0 enum name.
ROLE_TO_V1: Mapping[Role, str] = MappingProxyType({Role.user: "ROLE_USER", Role.agent: "ROLE_AGENT"})
#: 0.3 state -> 1.0 enum name; 0.3 ``unknown`` has no 1.0 state and becomes UNSPECIFIED.
STATE_TO_V1: Mapping[TaskState, str] = MappingProxyType(
    {state: "TASK_STATE_" + state.name.upper() for state in TaskState if state is not TaskState.unknown}
    | {TaskState.unknown: "TASK_STATE_UNSPECIFIED"}
)
#: 1.0 enum name -> 0.3 role / state (UNSPECIFIED has none).
ROLE_FROM_V1: Mapping[str, Role] = MappingProxyType({name: role for role, name in ROLE_TO_V1.items()})
STATE_FROM_V1: Mapping[str, TaskState] = MappingProxyType(
    {name: state for state, name in STATE_TO_V1.items() if state is not TaskState.unknown}
)

#: 0.3 DataPart metadata flag: ``data`` is ``{"value": <a non-object 1.0 data>}`` (a2a-sdk's rule).
DATA_PART_COMPAT: Final = "data_part_compat"

# ---------------------------------------------------------------- codecs shared by both directions


def normalize_base64(text: str) -> str:
    """``text`` as standard padded base64 (URL-safe, unpadded or line-broken input accepted).

    Raises ``ValueError`` when it is not base64. Canonical input is returned as it is.
    """
    if len(text) % 4 == 0 and _STD_BASE64.fullmatch(text):
        return text
    compact = "".join(text.split()).replace("-", "+").replace("_", "/")
    try:
        return base64.b64encode(base64.b64decode(compact + "=" * (-len(compact) % 4), validate=True)).decode()
    except binascii.Error as exc:
        raise ValueError(f"not base64 ({exc})") from None


_STD_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def parse_timestamp(text: str) -> datetime | None:
    """An ISO 8601 / RFC 3339 timestamp as an aware UTC datetime (naive = UTC); ``None`` if unreadable."""
    try:
        moment = datetime.fromisoformat(text)
        return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    except (ValueError, OverflowError):
        return None


def epoch_micros(moment: datetime) -> int:
    """An aware datetime as microseconds since the Unix epoch."""
    return (moment - _EPOCH) // _MICROSECOND


def timestamp_key(text: str | None) -> int | None:
    """A timestamp as microseconds since the epoch, for ordering (``None`` if absent or unreadable)."""
    moment = parse_timestamp(text) if text else None
    return None if moment is None else epoch_micros(moment)


def timestamp_v1(text: str | None) -> str | None:
    """An ISO 8601 timestamp as protobuf writes RFC 3339: UTC, ``Z``, 0, 3 or 6 fraction digits."""
    moment = parse_timestamp(text) if text else None
    if moment is None:
        return None
    m = moment
    out = f"{m.year:04d}-{m.month:02d}-{m.day:02d}T{m.hour:02d}:{m.minute:02d}:{m.second:02d}"
    if m.microsecond:
        out += f".{m.microsecond // 1000:03d}" if m.microsecond % 1000 == 0 else f".{m.microsecond:06d}"
    return out + "Z"


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = datetime.resolution


M = TypeVar("M", Task, Message, TaskStatusUpdateEvent, TaskArtifactUpdateEvent)
Event = Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent


def _read(value: Any, expected: type[M] | None = None) -> Any:
    if isinstance(value, expected or (Task, Message, TaskStatusUpdateEvent, TaskArtifactUpdateEvent)):
        return value
    return parse_result(value) if expected is None else parse_result(value, expected)


def _put(target: JSON, key: str, value: Any) -> None:
    # As protobuf writes JSON: no member for a default scalar or an empty list ({} stays: a
    # Struct has presence), so the output is byte-for-byte what a2a-sdk's server would send.
    if value is not None and value is not False and value != "" and value != []:
        target[key] = value


# ---------------------------------------------------------------- parts, messages, tasks


def _part_v1(part: Part, path: str) -> JSON:
    metadata = part.metadata
    out: JSON
    if isinstance(part, TextPart):
        out = {"text": part.text}
    elif isinstance(part, DataPart):
        data: Any = part.data
        if metadata and metadata.get(DATA_PART_COMPAT) is True and "value" in data:
            data = data["value"]
            metadata = {k: v for k, v in metadata.items() if k != DATA_PART_COMPAT} or None
        out = {"data": data}
    else:
        file = part.file
        if isinstance(file, FileWithBytes):
            try:
                out = {"raw": normalize_base64(file.bytes)}
            except ValueError as exc:
                where = f"{path}.file.bytes"
                raise InvalidAgentResponse(
                    f"{where}: {exc}", data={"errors": [{"path": where, "reason": str(exc), "type": "base64"}]}
                ) from None
        else:
            out = {"url": file.uri}
        _put(out, "mediaType", file.mime_type)
        _put(out, "filename", file.name)
    extra = part.model_extra or {}
    for key in ("mediaType", "filename"):  # a text or data part that came from 1.0 keeps them
        if key not in out and isinstance(extra.get(key), str):
            _put(out, key, extra[key])
    _put(out, "metadata", metadata)
    return out


def _parts_v1(parts: list[Part], path: str) -> list[JSON]:
    return [_part_v1(part, f"{path}.parts.{i}") for i, part in enumerate(parts)]


def _message_v1(msg: Message, path: str) -> JSON:
    out: JSON = {}
    _put(out, "messageId", msg.message_id)
    out["role"] = ROLE_TO_V1[msg.role]
    _put(out, "parts", _parts_v1(msg.parts, path))
    _put(out, "contextId", msg.context_id)
    _put(out, "taskId", msg.task_id)
    _put(out, "referenceTaskIds", msg.reference_task_ids)
    _put(out, "extensions", msg.extensions)
    _put(out, "metadata", msg.metadata)
    return out


def _status_v1(status: TaskStatus, path: str) -> JSON:
    out: JSON = {"state": STATE_TO_V1[status.state]}
    if status.message is not None:
        out["message"] = _message_v1(status.message, f"{path}.message")
    _put(out, "timestamp", timestamp_v1(status.timestamp))
    return out


def _artifact_v1(artifact: Artifact, path: str) -> JSON:
    out: JSON = {}
    _put(out, "artifactId", artifact.artifact_id)
    _put(out, "parts", _parts_v1(artifact.parts, path))
    _put(out, "name", artifact.name)
    _put(out, "description", artifact.description)
    _put(out, "extensions", artifact.extensions)
    _put(out, "metadata", artifact.metadata)
    return out


def _task_v1(task: Task, path: str = "result") -> JSON:
    out: JSON = {}
    _put(out, "id", task.id)
    _put(out, "contextId", task.context_id)
    out["status"] = _status_v1(task.status, f"{path}.status")
    _put(out, "artifacts", [_artifact_v1(a, f"{path}.artifacts.{i}") for i, a in enumerate(task.artifacts or ())])
    _put(out, "history", [_message_v1(m, f"{path}.history.{i}") for i, m in enumerate(task.history or ())])
    _put(out, "metadata", task.metadata)
    return out


def task_v1(task: Task | Mapping[str, Any]) -> JSON:
    """A 1.0 ``Task``: the result of ``GetTask`` and ``CancelTask``."""
    return _task_v1(_read(task, Task))


def message_v1(message: Message | Mapping[str, Any]) -> JSON:
    """A 1.0 ``Message``."""
    return _message_v1(_read(message, Message), "result")


def _event_v1(event: Event) -> tuple[str, JSON]:
    """The ``StreamResponse`` member name and body of an event."""
    if isinstance(event, Task):
        return "task", _task_v1(event)
    if isinstance(event, Message):
        return "message", _message_v1(event, "result")
    body: JSON = {}
    _put(body, "taskId", event.task_id)
    _put(body, "contextId", event.context_id)
    if isinstance(event, TaskStatusUpdateEvent):
        body["status"] = _status_v1(event.status, "result.status")
        name = "statusUpdate"
    else:
        body["artifact"] = _artifact_v1(event.artifact, "result.artifact")
        _put(body, "append", event.append)
        _put(body, "lastChunk", event.last_chunk)
        name = "artifactUpdate"
    _put(body, "metadata", event.metadata)
    return name, body


def send_message_result_v1(result: Task | Message | Mapping[str, Any]) -> JSON:
    """The 1.0 ``SendMessage`` result (``SendMessageResponse``): ``{"task": ...}`` or ``{"message": ...}``."""
    value = _read(result)
    if not isinstance(value, Task | Message):
        raise InvalidAgentResponse(
            f"result.kind: expected 'task' or 'message' for message/send, got {value.kind!r}",
            data={"errors": [{"path": "result.kind", "reason": "expected 'task' or 'message'", "type": "kind"}]},
        )
    name, body = _event_v1(value)
    return {name: body}


def stream_response_v1(event: Event | Mapping[str, Any]) -> JSON:
    """One 1.0 ``StreamResponse``: ``{"task"}``, ``{"message"}``, ``{"statusUpdate"}`` or ``{"artifactUpdate"}``.

    Stateless: use :class:`StreamToV1` for a whole stream (first item, end of stream).
    """
    name, body = _event_v1(_read(event))
    return {name: body}


# ---------------------------------------------------------------- streams


class StreamToV1:
    """Turns the mesh's 0.3 stream of one request into a 1.0 ``StreamResponse`` stream.

    Feed it every item the mesh delivers for a ``message/stream`` or ``tasks/resubscribe``,
    in order: events from the status topic, then the final result from the reply topic.
    It enforces the 1.0 stream rules (spec 3.1.2 / 3.1.6), which 0.3 spells differently:

    - a 1.0 task stream MUST begin with the Task. The mesh's ``message/stream`` begins with a
      status or artifact update, so a Task snapshot is made from it (id, contextId, status;
      WORKING for an artifact update) and sent first;
    - 1.0 has no ``final``: the stream ends after a status (or Task) in a terminal or
      interrupted state, after a ``final: true`` update, or after a Message. Later items, such
      as the mesh's closing Task on the reply topic, are dropped.

    Then :attr:`closed` is true and the gateway closes the SSE response. With
    ``until_terminal`` (``SubscribeToTask``) an interrupted state does not end it: a
    subscriber follows the task until it ends (spec 3.1.6).
    """

    def __init__(self, *, until_terminal: bool = False) -> None:
        self.started = False
        self.closed = False
        self.until_terminal = until_terminal

    def feed(self, item: Event | Mapping[str, Any]) -> list[JSON]:
        """The ``StreamResponse`` objects to send for one 0.3 item (none once closed)."""
        if self.closed:
            return []
        event = _read(item)
        out: list[JSON] = []
        if not self.started and not isinstance(event, Task | Message):
            if isinstance(event, TaskStatusUpdateEvent):
                status = _status_v1(event.status, "result.status")
            else:
                status = {"state": "TASK_STATE_WORKING"}
            task: JSON = {}
            _put(task, "id", event.task_id)
            _put(task, "contextId", event.context_id)
            out.append({"task": {**task, "status": status}})
        self.started = True
        if not (out and isinstance(event, TaskStatusUpdateEvent)):  # its status is in the snapshot
            out.append(stream_response_v1(event))
        if isinstance(event, Message):
            self.closed = True
        elif isinstance(event, Task | TaskStatusUpdateEvent):
            state = event.status.state
            final = isinstance(event, TaskStatusUpdateEvent) and event.final
            interrupted = state in INTERRUPTED_STATES and not self.until_terminal
            self.closed = final or state in TERMINAL_STATES or interrupted
        return out


# ---------------------------------------------------------------- push notification configs


def _push_config_v1(config: TaskPushNotificationConfig) -> JSON:
    push = config.push_notification_config
    out: JSON = {}
    _put(out, "taskId", config.task_id)
    _put(out, "id", push.id)
    _put(out, "url", push.url)
    _put(out, "token", push.token)
    if push.authentication is not None:
        auth: JSON = {}
        if push.authentication.schemes:
            auth["scheme"] = push.authentication.schemes[0]
        _put(auth, "credentials", push.authentication.credentials)
        out["authentication"] = auth
    return out


def _read_push_config(value: Any, path: str) -> TaskPushNotificationConfig:
    if isinstance(value, TaskPushNotificationConfig):
        return value
    try:
        return TaskPushNotificationConfig.model_validate(value)
    except ValidationError as exc:
        raise InvalidAgentResponse(
            f"invalid push notification config: {format_validation_error(exc, prefix=path)}",
            data={"errors": validation_error_details(exc, prefix=path)},
        ) from None


def push_config_v1(config: TaskPushNotificationConfig | Mapping[str, Any]) -> JSON:
    """The flat 1.0 ``TaskPushNotificationConfig``: result of Create/GetTaskPushNotificationConfig."""
    return _push_config_v1(_read_push_config(config, "result"))


def push_configs_v1(configs: Iterable[TaskPushNotificationConfig | Mapping[str, Any]]) -> JSON:
    """The 1.0 ``ListTaskPushNotificationConfigs`` result: ``{"configs": [...]}`` (one page: all)."""
    if isinstance(configs, Mapping | str) or not isinstance(configs, Iterable):
        kind = type(configs).__name__
        raise InvalidAgentResponse(f"result: expected an array of push notification configs, got {kind}")
    return {"configs": [_push_config_v1(_read_push_config(c, f"result.{i}")) for i, c in enumerate(configs)]}


# ---------------------------------------------------------------- one entry point per method


def result_v1(method: str, result: Any) -> Any:
    """The 1.0 ``result`` of a unary 1.0 method from the mesh's 0.3 ``result``.

    ``DeleteTaskPushNotificationConfig`` answers ``null`` (as a2a-sdk's server). Streaming
    methods go through :class:`StreamToV1`; ``ListTasks`` through :func:`list_tasks_result_v1`.
    """
    mesh_method = BY_V1_NAME.get(method)
    if mesh_method is Method.message_send:
        return send_message_result_v1(result)
    if mesh_method in TASK_ANSWER_METHODS:
        return task_v1(result)
    if mesh_method in (Method.push_config_set, Method.push_config_get):
        return push_config_v1(result)
    if mesh_method is Method.push_config_list:
        return push_configs_v1(result)
    if mesh_method is Method.push_config_delete:
        return None
    raise ValueError(f"{method!r} has no unary mesh result (streams: StreamToV1; ListTasks: list_tasks_result_v1)")


def push_payload_v1(task: Task) -> JSON:
    """The body of a push notification to a webhook a 1.0 client registered: a ``StreamResponse``
    holding the Task (as a2a-sdk's push sender writes one per event)."""
    return {"task": task_v1(task)}
