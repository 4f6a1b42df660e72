"""JSON-RPC 2.0 envelopes, and the typed requests SAM's helpers build.

The methods themselves (names, params models, aliases) are declared in :mod:`mesh.a2a.methods`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from pydantic import (
    SerializerFunctionWrapHandler,
    StrictInt,
    StrictStr,
    model_serializer,
)

from .base import A2AModel
from .errors import AnyErrorObject
from .methods import Method
from .params import MessageSendParams, TaskIdParams

__all__ = [
    "CancelTaskRequest",
    "JSONRPCErrorResponse",
    "JSONRPCRequest",
    "JSONRPCResponse",
    "JSONRPCSuccessResponse",
    "RequestId",
    "SendMessageRequest",
    "SendStreamingMessageRequest",
    "TypedRequest",
    "request_bytes",
    "success_response_bytes",
]

#: A JSON-RPC id: a string, an integer or null (never a bool or a float).
RequestId: TypeAlias = StrictStr | StrictInt | None


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
    error: AnyErrorObject

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
    """Base of the typed requests: ``id`` is required, ``method`` fixed, ``params`` typed.

    Only the requests SAM's helpers build have a class (``create_send_message_request``...);
    an agent reads any request with :func:`mesh.a2a.parse_request`.
    """

    jsonrpc: Literal["2.0"] = "2.0"
    id: StrictStr | StrictInt


class SendMessageRequest(TypedRequest):
    """``message/send``: send a message, get the final Task or Message."""

    method: Literal[Method.message_send] = Method.message_send
    params: MessageSendParams


class SendStreamingMessageRequest(TypedRequest):
    """``message/stream``: send a message, get status and artifact events as they happen."""

    method: Literal[Method.message_stream] = Method.message_stream
    params: MessageSendParams


class CancelTaskRequest(TypedRequest):
    """``tasks/cancel``: cancel a task."""

    method: Literal[Method.tasks_cancel] = Method.tasks_cancel
    params: TaskIdParams
