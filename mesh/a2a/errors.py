"""JSON-RPC error codes and error objects (the ``error`` member of an error response).

:class:`ErrorCode` is the one table of the codes JSON-RPC 2.0 and A2A 0.3 define, each with
its default message. Every code has an error object model here, which fixes ``code`` and
defaults ``message``, so ``TaskNotFoundErrorObject()`` is a complete error object and
``TaskNotFoundErrorObject(message=f"no task {tid!r}")`` a precise one. These are pydantic
models of wire data, not exceptions: to raise an error, raise its exception from
:mod:`mesh.a2a.exceptions` (``TaskNotFound``), whose ``.error`` is the object.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, Union

from .base import A2AModel
from .validation import discriminator, tag

__all__ = [
    "ERROR_TYPES",
    "AgentBusyErrorObject",
    "AgentGoneErrorObject",
    "AnyErrorObject",
    "AuthenticatedExtendedCardNotConfiguredErrorObject",
    "ContentTypeNotSupportedErrorObject",
    "ErrorCode",
    "InternalErrorObject",
    "InvalidAgentResponseErrorObject",
    "InvalidParamsErrorObject",
    "InvalidRequestErrorObject",
    "JSONParseErrorObject",
    "JSONRPCErrorObject",
    "MethodNotFoundErrorObject",
    "PushNotificationNotSupportedErrorObject",
    "RequestTimeoutErrorObject",
    "ResourceExhaustedErrorObject",
    "TaskNotCancelableErrorObject",
    "TaskNotFoundErrorObject",
    "UnauthenticatedErrorObject",
    "UnsupportedOperationErrorObject",
]


class ErrorCode(IntEnum):
    """The error codes of JSON-RPC 2.0, A2A 0.3 and the mesh, with their default messages.

    Member names are the reasons A2A 1.0 gives them (``TASK_NOT_FOUND``...). The mesh's own
    codes (in -32000..-32099, the README's error table) follow the A2A ones; other codes (the
    HTTP gateway's JAF codes) are carried by the generic :class:`JSONRPCErrorObject`.
    """

    #: The message an error with this code carries unless a more precise one is given.
    message: str

    def __new__(cls, code: int, message: str) -> ErrorCode:
        member = int.__new__(cls, code)
        member._value_ = code
        member.message = message
        return member

    # JSON-RPC 2.0
    PARSE_ERROR = -32700, "Invalid JSON payload"  # not UTF-8 JSON
    INVALID_REQUEST = -32600, "Request payload validation error"  # JSON, not a JSON-RPC request
    METHOD_NOT_FOUND = -32601, "Method not found"
    INVALID_PARAMS = -32602, "Invalid parameters"
    INTERNAL_ERROR = -32603, "Internal error"  # the server failed on a valid request
    # A2A 0.3
    TASK_NOT_FOUND = -32001, "Task not found"  # or it expired
    TASK_NOT_CANCELABLE = -32002, "Task cannot be canceled"
    PUSH_NOTIFICATION_NOT_SUPPORTED = -32003, "Push Notification is not supported"
    UNSUPPORTED_OPERATION = -32004, "This operation is not supported"
    CONTENT_TYPE_NOT_SUPPORTED = -32005, "Incompatible content types"
    INVALID_AGENT_RESPONSE = -32006, "Invalid agent response"
    EXTENDED_AGENT_CARD_NOT_CONFIGURED = -32007, "Authenticated Extended Card is not configured"
    # The mesh's own, in the server range (-32008/-32009 are A2A 1.0's; the README's table)
    AGENT_GONE = -32010, "The agent is gone"  # nobody listens on its request topic, or its card was removed
    TIMEOUT = -32030, "The request timed out"  # its deadline or idle timeout ran out; the task was canceled
    UNAUTHENTICATED = -32020, "A valid user token is required"  # require_user_token: no trusted authToken
    AGENT_BUSY = -32050, "Agent busy"  # at its max_concurrent_tasks: try again later
    RESOURCE_EXHAUSTED = -32051, "Resource exhausted"  # a gateway's concurrency limit is full


# The error object model of each code, filled as the models below are declared.
_BY_CODE: dict[int, type[JSONRPCErrorObject]] = {}


class JSONRPCErrorObject(A2AModel):
    """A JSON-RPC error object with any code (e.g. JAF's -32000 "Agent not found")."""

    code: int
    message: str
    data: Any | None = None

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        code = cls.model_fields["code"].default
        if isinstance(code, ErrorCode) and "code" in cls.__annotations__:
            if code in _BY_CODE:
                raise TypeError(f"{cls.__name__}: code {code} already has {_BY_CODE[code].__name__}; subclass that")
            _BY_CODE[code] = cls


class JSONParseErrorObject(JSONRPCErrorObject):
    """The payload is not valid JSON (or not UTF-8)."""

    code: Literal[ErrorCode.PARSE_ERROR] = ErrorCode.PARSE_ERROR
    message: str = ErrorCode.PARSE_ERROR.message


class InvalidRequestErrorObject(JSONRPCErrorObject):
    """The payload is JSON but not a valid JSON-RPC request."""

    code: Literal[ErrorCode.INVALID_REQUEST] = ErrorCode.INVALID_REQUEST
    message: str = ErrorCode.INVALID_REQUEST.message


class MethodNotFoundErrorObject(JSONRPCErrorObject):
    """The method is not served."""

    code: Literal[ErrorCode.METHOD_NOT_FOUND] = ErrorCode.METHOD_NOT_FOUND
    message: str = ErrorCode.METHOD_NOT_FOUND.message


class InvalidParamsErrorObject(JSONRPCErrorObject):
    """The params do not match the method."""

    code: Literal[ErrorCode.INVALID_PARAMS] = ErrorCode.INVALID_PARAMS
    message: str = ErrorCode.INVALID_PARAMS.message


class InternalErrorObject(JSONRPCErrorObject):
    """The server failed while handling a valid request."""

    code: Literal[ErrorCode.INTERNAL_ERROR] = ErrorCode.INTERNAL_ERROR
    message: str = ErrorCode.INTERNAL_ERROR.message


class TaskNotFoundErrorObject(JSONRPCErrorObject):
    """No task with that id (or it expired)."""

    code: Literal[ErrorCode.TASK_NOT_FOUND] = ErrorCode.TASK_NOT_FOUND
    message: str = ErrorCode.TASK_NOT_FOUND.message


class TaskNotCancelableErrorObject(JSONRPCErrorObject):
    """The task is in a state that cannot be canceled."""

    code: Literal[ErrorCode.TASK_NOT_CANCELABLE] = ErrorCode.TASK_NOT_CANCELABLE
    message: str = ErrorCode.TASK_NOT_CANCELABLE.message


class PushNotificationNotSupportedErrorObject(JSONRPCErrorObject):
    """The agent does not do push notifications."""

    code: Literal[ErrorCode.PUSH_NOTIFICATION_NOT_SUPPORTED] = ErrorCode.PUSH_NOTIFICATION_NOT_SUPPORTED
    message: str = ErrorCode.PUSH_NOTIFICATION_NOT_SUPPORTED.message


class UnsupportedOperationErrorObject(JSONRPCErrorObject):
    """The agent does not support this operation."""

    code: Literal[ErrorCode.UNSUPPORTED_OPERATION] = ErrorCode.UNSUPPORTED_OPERATION
    message: str = ErrorCode.UNSUPPORTED_OPERATION.message


class ContentTypeNotSupportedErrorObject(JSONRPCErrorObject):
    """The requested content types do not match the agent's."""

    code: Literal[ErrorCode.CONTENT_TYPE_NOT_SUPPORTED] = ErrorCode.CONTENT_TYPE_NOT_SUPPORTED
    message: str = ErrorCode.CONTENT_TYPE_NOT_SUPPORTED.message


class InvalidAgentResponseErrorObject(JSONRPCErrorObject):
    """The agent answered with something that is not a valid A2A response."""

    code: Literal[ErrorCode.INVALID_AGENT_RESPONSE] = ErrorCode.INVALID_AGENT_RESPONSE
    message: str = ErrorCode.INVALID_AGENT_RESPONSE.message


class AuthenticatedExtendedCardNotConfiguredErrorObject(JSONRPCErrorObject):
    """The agent has no authenticated extended card (A2A 0.3)."""

    code: Literal[ErrorCode.EXTENDED_AGENT_CARD_NOT_CONFIGURED] = ErrorCode.EXTENDED_AGENT_CARD_NOT_CONFIGURED
    message: str = ErrorCode.EXTENDED_AGENT_CARD_NOT_CONFIGURED.message


class AgentGoneErrorObject(JSONRPCErrorObject):
    """The agent that had the request is not there: nobody listens on its request topic, or its
    card was removed (its will, or its shutdown) while the caller waited."""

    code: Literal[ErrorCode.AGENT_GONE] = ErrorCode.AGENT_GONE
    message: str = ErrorCode.AGENT_GONE.message


class UnauthenticatedErrorObject(JSONRPCErrorObject):
    """The agent requires a user token (``require_user_token``) and the request has no valid one."""

    code: Literal[ErrorCode.UNAUTHENTICATED] = ErrorCode.UNAUTHENTICATED
    message: str = ErrorCode.UNAUTHENTICATED.message


class AgentBusyErrorObject(JSONRPCErrorObject):
    """The agent runs as many tasks as it may (mesh-specific); send the request again later."""

    code: Literal[ErrorCode.AGENT_BUSY] = ErrorCode.AGENT_BUSY
    message: str = ErrorCode.AGENT_BUSY.message


class RequestTimeoutErrorObject(JSONRPCErrorObject):
    """A gateway's request ran past its deadline or idle timeout; the task was canceled."""

    code: Literal[ErrorCode.TIMEOUT] = ErrorCode.TIMEOUT
    message: str = ErrorCode.TIMEOUT.message


class ResourceExhaustedErrorObject(JSONRPCErrorObject):
    """A gateway's concurrency limit is full (per caller, per context or its own)."""

    code: Literal[ErrorCode.RESOURCE_EXHAUSTED] = ErrorCode.RESOURCE_EXHAUSTED
    message: str = ErrorCode.RESOURCE_EXHAUSTED.message


if missing := [code.name for code in ErrorCode if code not in _BY_CODE]:  # pragma: no cover - a developer's slip
    raise TypeError(f"mesh.a2a.errors: no error object model for {', '.join(missing)}")

#: The error object model of every code the protocol defines, in :class:`ErrorCode` order.
ERROR_TYPES: Mapping[int, type[JSONRPCErrorObject]] = MappingProxyType(
    {int(code): _BY_CODE[code] for code in ErrorCode}
)

_OTHER_CODE = "other"


def _error_key(value: dict[str, Any]) -> Any:
    code = value.get("code")
    if type(code) is not int:  # bool is an int subclass; JSON has no such code
        return None
    return code if code in ERROR_TYPES else _OTHER_CODE


if TYPE_CHECKING:
    AnyErrorObject: TypeAlias = JSONRPCErrorObject
else:
    #: Any error object: the model of its code for a known code, :class:`JSONRPCErrorObject`
    #: otherwise (a tagged union built from :data:`ERROR_TYPES`).
    AnyErrorObject = Annotated[
        Union[tuple(Annotated[cls, tag(cls)] for cls in (*ERROR_TYPES.values(), JSONRPCErrorObject))],  # noqa: UP007
        discriminator(
            {**ERROR_TYPES, _OTHER_CODE: JSONRPCErrorObject},
            read=_error_key,
            field="code",
            expected="an integer",
        ),
    ]
