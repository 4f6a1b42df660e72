"""JSON-RPC 2.0 envelopes, the A2A method table and typed requests.

The method table is what :func:`mesh.a2a.parse.parse_request` dispatches on: the nine A2A
0.3 methods an agent serves, plus SAM's names as aliases that are canonicalised on parse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from pydantic import (
    SerializerFunctionWrapHandler,
    StrictInt,
    StrictStr,
    model_serializer,
)

from .base import A2AModel
from .errors import AnyError
from .params import (
    DeleteTaskPushNotificationConfigParams,
    GetTaskPushNotificationConfigParams,
    ListTaskPushNotificationConfigParams,
    MessageSendParams,
    TaskIdParams,
    TaskQueryParams,
)
from .push import TaskPushNotificationConfig

#: A JSON-RPC id: a string, an integer or null (never a bool or a float).
RequestId: TypeAlias = StrictStr | StrictInt | None


class Method(StrEnum):
    """The canonical names of the methods an agent serves."""

    message_send = "message/send"
    message_stream = "message/stream"
    tasks_get = "tasks/get"
    tasks_cancel = "tasks/cancel"
    tasks_resubscribe = "tasks/resubscribe"
    push_config_set = "tasks/pushNotificationConfig/set"
    push_config_get = "tasks/pushNotificationConfig/get"
    push_config_list = "tasks/pushNotificationConfig/list"
    push_config_delete = "tasks/pushNotificationConfig/delete"


#: The params of any method.
RequestParams: TypeAlias = (
    MessageSendParams
    | TaskQueryParams
    | TaskIdParams
    | TaskPushNotificationConfig
    | GetTaskPushNotificationConfigParams
    | ListTaskPushNotificationConfigParams
    | DeleteTaskPushNotificationConfigParams
)

#: The params model of every method.
METHOD_PARAMS: Mapping[Method, type[RequestParams]] = MappingProxyType(
    {
        Method.message_send: MessageSendParams,
        Method.message_stream: MessageSendParams,
        Method.tasks_get: TaskQueryParams,
        Method.tasks_cancel: TaskIdParams,
        Method.tasks_resubscribe: TaskIdParams,
        Method.push_config_set: TaskPushNotificationConfig,
        Method.push_config_get: GetTaskPushNotificationConfigParams,
        Method.push_config_list: ListTaskPushNotificationConfigParams,
        Method.push_config_delete: DeleteTaskPushNotificationConfigParams,
    }
)

#: SAM's method names and the canonical method each stands for.
METHOD_ALIASES: Mapping[str, Method] = MappingProxyType(
    {
        "agent/sendMessage": Method.message_send,
        "agent/sendStreamingMessage": Method.message_stream,
        "agent/cancelTask": Method.tasks_cancel,
    }
)


class JSONRPCRequest(A2AModel):
    """A JSON-RPC 2.0 request with untyped params."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId = None
    method: str
    params: dict[str, Any] | None = None


class JSONRPCSuccessResponse(A2AModel):
    """A JSON-RPC 2.0 success response; ``result`` is any JSON value or A2A model."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId = None
    result: Any

    @model_serializer(mode="wrap")
    def _keep_null_members(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # JSON-RPC requires both members even when null (an unknown id; the null result of
        # tasks/pushNotificationConfig/delete), which exclude_none would drop.
        data: dict[str, Any] = handler(self)
        data.setdefault("id", None)
        data.setdefault("result", None)
        return data


class JSONRPCErrorResponse(A2AModel):
    """A JSON-RPC 2.0 error response; ``error`` is parsed into the model of its code."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId = None
    error: AnyError

    @model_serializer(mode="wrap")
    def _keep_null_id(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # An error answering an unreadable request still carries "id": null (JSON-RPC 2.0).
        data: dict[str, Any] = handler(self)
        data.setdefault("id", None)
        return data


#: Either kind of response.
JSONRPCResponse: TypeAlias = JSONRPCSuccessResponse | JSONRPCErrorResponse


def success_response_bytes(request_id: RequestId, result_json: bytes) -> bytes:
    """``{"jsonrpc":"2.0","id":...,"result":...}`` around an already serialized result.

    One event goes to every stream of a task, each under its own request id: the result is
    serialized once and only the envelope differs.
    """
    return b'{"jsonrpc":"2.0","id":%s,"result":%s}' % (json.dumps(request_id).encode(), result_json)


def request_bytes(method: str, request_id: RequestId, params: A2AModel | Mapping[str, Any]) -> bytes:
    """A JSON-RPC request payload; model params are serialized once by their model."""
    params_json = (
        params.to_json_bytes() if isinstance(params, A2AModel) else json.dumps(params, separators=(",", ":")).encode()
    )
    return b'{"jsonrpc":"2.0","id":%s,"method":%s,"params":%s}' % (
        json.dumps(request_id).encode(),
        json.dumps(method).encode(),
        params_json,
    )


class TypedRequest(A2AModel):
    """Base of the per-method requests: ``id`` is required, ``method`` fixed, ``params`` typed."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: StrictStr | StrictInt


class SendMessageRequest(TypedRequest):
    """``message/send``: send a message, get the final Task or Message."""

    method: Literal["message/send"] = "message/send"
    params: MessageSendParams


class SendStreamingMessageRequest(TypedRequest):
    """``message/stream``: send a message, get status and artifact events as they happen."""

    method: Literal["message/stream"] = "message/stream"
    params: MessageSendParams


class GetTaskRequest(TypedRequest):
    """``tasks/get``: read a task."""

    method: Literal["tasks/get"] = "tasks/get"
    params: TaskQueryParams


class CancelTaskRequest(TypedRequest):
    """``tasks/cancel``: cancel a task."""

    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskIdParams


class TaskResubscriptionRequest(TypedRequest):
    """``tasks/resubscribe``: resume the event stream of a task."""

    method: Literal["tasks/resubscribe"] = "tasks/resubscribe"
    params: TaskIdParams


class SetTaskPushNotificationConfigRequest(TypedRequest):
    """``tasks/pushNotificationConfig/set``."""

    method: Literal["tasks/pushNotificationConfig/set"] = "tasks/pushNotificationConfig/set"
    params: TaskPushNotificationConfig


class GetTaskPushNotificationConfigRequest(TypedRequest):
    """``tasks/pushNotificationConfig/get``."""

    method: Literal["tasks/pushNotificationConfig/get"] = "tasks/pushNotificationConfig/get"
    params: GetTaskPushNotificationConfigParams


class ListTaskPushNotificationConfigRequest(TypedRequest):
    """``tasks/pushNotificationConfig/list``."""

    method: Literal["tasks/pushNotificationConfig/list"] = "tasks/pushNotificationConfig/list"
    params: ListTaskPushNotificationConfigParams


class DeleteTaskPushNotificationConfigRequest(TypedRequest):
    """``tasks/pushNotificationConfig/delete``."""

    method: Literal["tasks/pushNotificationConfig/delete"] = "tasks/pushNotificationConfig/delete"
    params: DeleteTaskPushNotificationConfigParams


#: The typed request class of every method.
REQUEST_TYPES: Mapping[Method, type[TypedRequest]] = MappingProxyType(
    {
        Method.message_send: SendMessageRequest,
        Method.message_stream: SendStreamingMessageRequest,
        Method.tasks_get: GetTaskRequest,
        Method.tasks_cancel: CancelTaskRequest,
        Method.tasks_resubscribe: TaskResubscriptionRequest,
        Method.push_config_set: SetTaskPushNotificationConfigRequest,
        Method.push_config_get: GetTaskPushNotificationConfigRequest,
        Method.push_config_list: ListTaskPushNotificationConfigRequest,
        Method.push_config_delete: DeleteTaskPushNotificationConfigRequest,
    }
)
