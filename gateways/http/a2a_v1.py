"""A2A 1.0 at the HTTP edge: pure translation between A2A 1.0 JSON and the mesh's A2A 0.3 JSON.

The mesh speaks 0.3 (``message/send``, ``kind``); a 1.0 client (``A2A-Version: 1.0``,
``SendMessage``, no ``kind``) is served by translating at the gateway. a2a-sdk 1.3 is the
reference for the 1.0 JSON (ProtoJSON of its ``lf.a2a.v1`` types) but is not imported here.

Per JSON-RPC request (``params`` / ``result`` are the decoded members)::

    version = negotiate_version(method, headers.get("A2A-Version"))   # "0.3" | "1.0"
    # 1.0, forwarded to the agent:
    mesh_method, params_0_3 = params_from_v1(method, params)
    ... mesh answers result_0_3 ...
    result = result_v1(method, result_0_3)              # unary methods
    stream = StreamToV1(); for item in mesh_items: stream.feed(item) ... until stream.closed
    # 1.0, answered by the gateway (V1_METHODS[method] is None):
    ListTasks             -> list_tasks_result_v1(list_tasks_query(params), callers_tasks)
    GetExtendedAgentCard  -> raise AuthenticatedExtendedCardNotConfigured (-32007), as a2a-sdk
                             does without one: the mesh has no extended cards
    # any error, 1.0 shape:
    error_response_v1(request_id, exc)                  # RpcError, or the agent's error object

The modules: :mod:`mesh.profile.v1_requests` (1.0 requests -> 0.3, method and version tables) and
:mod:`mesh.profile.v1` (0.3 results -> 1.0, streams; enum names and codecs; in ``mesh``
because agents write 1.0 push payloads with it); both are in ``mesh`` because agents serving
the EMQX profile (:mod:`mesh.profile.emqx`) translate with them too, as does :mod:`mesh.profile.v1_card`
(the served card). This one holds what the gateway answers itself (ListTasks), the 1.0 errors,
and re-exports the public API.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, Final

from mesh.a2a import (
    JSONRPCErrorObject,
    RequestId,
    RpcError,
    Task,
    TaskState,
    parse_result,
)
from mesh.a2a.validation import short_repr
from mesh.profile.v1 import (
    JSON,
    STATE_FROM_V1,
    TASK_STATE_NAMES,
    StreamToV1,
    epoch_micros,
    message_v1,
    parse_timestamp,
    push_config_v1,
    push_configs_v1,
    result_v1,
    send_message_result_v1,
    stream_response_v1,
    task_v1,
    timestamp_key,
    timestamp_v1,
)
from mesh.profile.v1_card import served_card
from mesh.profile.v1_requests import (
    EXTENSION_SUPPORT_REQUIRED,
    V1_METHODS,
    V1_STREAMING_METHODS,
    VERSION_NOT_SUPPORTED,
    BadMember,
    ProtoObject,
    mesh_method,
    negotiate_version,
    params_from_v1,
    read_params,
)

__all__ = [
    "A2A_ERROR_DOMAIN",
    "DEFAULT_PAGE_SIZE",
    "ERROR_REASONS",
    "EXTENSION_SUPPORT_REQUIRED",
    "MAX_PAGE_SIZE",
    "V1_METHODS",
    "V1_STREAMING_METHODS",
    "VERSION_NOT_SUPPORTED",
    "Cursor",
    "ListTasksQuery",
    "StreamToV1",
    "error_response_v1",
    "error_v1",
    "list_tasks_query",
    "list_tasks_result_v1",
    "mesh_method",
    "message_v1",
    "negotiate_version",
    "params_from_v1",
    "push_config_v1",
    "push_configs_v1",
    "result_v1",
    "send_message_result_v1",
    "served_card",
    "stream_response_v1",
    "task_v1",
    "timestamp_v1",
]

# ---------------------------------------------------------------- ListTasks

#: a2a-sdk's default and maximum ``ListTasks`` page size.
DEFAULT_PAGE_SIZE: Final = 50
MAX_PAGE_SIZE: Final = 100

#: A position in the ListTasks order: (status timestamp in µs or None, task id).
Cursor = tuple[int | None, str]


@dataclass(frozen=True, slots=True)
class ListTasksQuery:
    """The params of ``ListTasks``, which has no mesh method: the gateway answers from its records.

    Pass it with the caller's tasks to :func:`list_tasks_result_v1`.
    """

    context_id: str | None = None
    #: Only tasks in this state (``None``: any).
    status: TaskState | None = None
    page_size: int = DEFAULT_PAGE_SIZE
    #: Where the page starts: just after this position of the previous page (``None``: first page).
    after: Cursor | None = None
    #: Keep the last N history messages of each task (0: none; ``None``: all).
    history_length: int | None = None
    #: Only tasks whose status timestamp is at or after this instant.
    status_timestamp_after: datetime | None = None
    include_artifacts: bool = False


def encode_cursor(cursor: Cursor) -> str:
    """The opaque ``nextPageToken`` of a position."""
    return base64.urlsafe_b64encode(json.dumps(cursor, separators=(",", ":")).encode()).decode()


def _decode_cursor(token: str, path: str) -> Cursor:
    try:
        stamp, task_id = json.loads(base64.urlsafe_b64decode(token.encode()))
        if (stamp is None or type(stamp) is int) and type(task_id) is str:
            return stamp, task_id
    except (ValueError, TypeError):
        pass
    raise BadMember(path, "not a page token this gateway issued", "page_token")


def _list_tasks(params: ProtoObject) -> ListTasksQuery:
    status = params.enum("status", TASK_STATE_NAMES)
    token = params.string("pageToken")
    after = params.string("statusTimestampAfter")
    moment = parse_timestamp(after) if after else None
    if after and (moment is None or not re.search(r"([zZ]|[+-]\d\d:\d\d)$", after)):
        raise BadMember(params.at("statusTimestampAfter"), f"must be an RFC 3339 timestamp, got {short_repr(after)}")
    page_size = params.integer("pageSize", minimum=1, maximum=MAX_PAGE_SIZE)
    return ListTasksQuery(
        context_id=params.string("contextId"),
        status=STATE_FROM_V1.get(status),
        page_size=DEFAULT_PAGE_SIZE if page_size is None else page_size,
        after=None if token is None else _decode_cursor(token, params.at("pageToken")),
        history_length=params.integer("historyLength", minimum=0),
        status_timestamp_after=moment,
        include_artifacts=bool(params.boolean("includeArtifacts")),
    )


def list_tasks_query(params: Any) -> ListTasksQuery:
    """Read ``ListTasks`` params; raises :class:`InvalidParams` naming the bad member."""
    return read_params("ListTasks", params, _list_tasks)


def list_tasks_result_v1(query: ListTasksQuery, tasks: Iterable[Task | Mapping[str, Any]]) -> JSON:
    """The 1.0 ``ListTasks`` result, answered from the gateway's own records.

    ``tasks`` are the caller's tasks (1.0 scopes the list to the caller: filter by owner
    first). As a2a-sdk's stores: filtered by context, state and status timestamp, newest status
    first (then by id), paged after ``query.after``; each task trimmed to ``historyLength`` and
    without artifacts unless ``includeArtifacts``. All four members are always present
    (``nextPageToken`` is ``""`` on the last page).
    """
    after = query.status_timestamp_after
    after_us = None if after is None else epoch_micros(after)
    rows: list[tuple[tuple[bool, int, str], Task]] = []
    for item in tasks:
        task = item if isinstance(item, Task) else parse_result(item, Task)
        if query.context_id is not None and task.context_id != query.context_id:
            continue
        if query.status is not None and task.status.state != query.status:
            continue
        stamp = timestamp_key(task.status.timestamp)
        if after_us is not None and (stamp is None or stamp < after_us):
            continue
        rows.append(((stamp is not None, stamp or 0, task.id), task))
    rows.sort(key=lambda row: row[0], reverse=True)
    total = len(rows)
    if query.after is not None:
        stamp, task_id = query.after
        cursor = (stamp is not None, stamp or 0, task_id)
        rows = [row for row in rows if row[0] < cursor]
    page = rows[: query.page_size]
    token = ""
    if len(rows) > query.page_size:
        has_stamp, stamp, task_id = page[-1][0]
        token = encode_cursor((stamp if has_stamp else None, task_id))
    return {
        "tasks": [_listed(task, query) for _, task in page],
        "nextPageToken": token,
        "pageSize": query.page_size,
        "totalSize": total,
    }


def _listed(task: Task, query: ListTasksQuery) -> JSON:
    out = task_v1(task)
    if not query.include_artifacts:
        out.pop("artifacts", None)
    if query.history_length is not None and "history" in out:
        kept = out["history"][-query.history_length :] if query.history_length else []
        if kept:
            out["history"] = kept
        else:
            del out["history"]
    return out


# ---------------------------------------------------------------- errors

ERROR_INFO_TYPE: Final = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST_TYPE: Final = "type.googleapis.com/google.rpc.BadRequest"
A2A_ERROR_DOMAIN: Final = "a2a-protocol.org"

#: The ``google.rpc.ErrorInfo`` reason of each code (a2a-sdk 1.3 ``A2A_ERROR_MAPPING``).
ERROR_REASONS: Mapping[int, str] = MappingProxyType(
    {
        -32001: "TASK_NOT_FOUND",
        -32002: "TASK_NOT_CANCELABLE",
        -32003: "PUSH_NOTIFICATION_NOT_SUPPORTED",
        -32004: "UNSUPPORTED_OPERATION",
        -32005: "CONTENT_TYPE_NOT_SUPPORTED",
        -32006: "INVALID_AGENT_RESPONSE",
        -32007: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
        -32008: "EXTENSION_SUPPORT_REQUIRED",
        -32009: "VERSION_NOT_SUPPORTED",
        -32010: "AGENT_GONE",  # the mesh's own (mesh.a2a.ErrorCode.AGENT_GONE)
        -32020: "UNAUTHENTICATED",  # the mesh's own (mesh.a2a.ErrorCode.UNAUTHENTICATED)
        -32030: "TIMEOUT",  # the mesh's own (mesh.a2a.ErrorCode.TIMEOUT)
        -32050: "AGENT_BUSY",  # the mesh's own (mesh.a2a.ErrorCode.AGENT_BUSY)
        -32051: "RESOURCE_EXHAUSTED",  # the mesh's own (mesh.a2a.ErrorCode.RESOURCE_EXHAUSTED)
        -32600: "INVALID_REQUEST",
        -32601: "METHOD_NOT_FOUND",
        -32602: "INVALID_PARAMS",
        -32603: "INTERNAL_ERROR",
    }
)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _violations(data: Any) -> list[JSON]:
    errors = data.get("errors") if isinstance(data, dict) else None
    if not isinstance(errors, list):
        return []
    out = []
    for error in errors:
        if isinstance(error, dict):
            field = str(error.get("path", error.get("field", "")))
            field = field.removeprefix("params.") if field != "params" else ""
            out.append({"field": field, "description": str(error.get("reason", error.get("message", "")))})
    return out


def error_v1(
    code: int, message: str, data: Any = None, *, reason: str | None = None, domain: str = A2A_ERROR_DOMAIN
) -> JSON:
    """The A2A 1.0 JSON-RPC error object for a (0.3) code, message and data.

    ``data`` becomes an array of typed details, as a2a-sdk 1.3 writes it: a
    ``google.rpc.ErrorInfo`` with the code's reason (:data:`ERROR_REASONS`; ``reason`` for other
    codes, such as the gateway's own) and the old ``data`` as its ``metadata`` -- a string map,
    so non-string values are JSON-encoded -- plus, for -32602 with ``data["errors"]``, a
    ``google.rpc.BadRequest`` with one field violation per bad member. A code with no reason
    and no data (e.g. -32700) keeps no ``data``. 0.3 clients get the 0.3 object unchanged.
    """
    error: JSON = {"code": code, "message": message}
    reason = reason or ERROR_REASONS.get(code)
    if reason is None and data is None:
        return error
    if isinstance(data, dict):
        metadata = {str(key): _text(value) for key, value in data.items() if value is not None}
    else:
        metadata = {} if data is None else {"data": _text(data)}
    details: list[JSON] = [
        {"@type": ERROR_INFO_TYPE, "reason": reason or "UNKNOWN_ERROR", "domain": domain, "metadata": metadata}
    ]
    violations = _violations(data) if code == -32602 else []
    if violations:
        details.append({"@type": BAD_REQUEST_TYPE, "fieldViolations": violations})
    error["data"] = details
    return error


def error_response_v1(request_id: RequestId, error: RpcError | JSONRPCErrorObject) -> JSON:
    """A whole 1.0 JSON-RPC error response, for an exception or an agent's error object."""
    obj = error.error if isinstance(error, RpcError) else error
    return {"jsonrpc": "2.0", "id": request_id, "error": error_v1(obj.code, obj.message, obj.data)}
