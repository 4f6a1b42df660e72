"""JSON-RPC error objects: the generic one and one model per JSON-RPC / A2A 0.3 code.

Each specific model fixes ``code`` and defaults ``message``, so ``TaskNotFoundError()`` is a
complete error object and ``TaskNotFoundError(message=f"no task {tid!r}")`` a precise one.
All of them are :class:`JSONRPCError` subclasses. To raise one, use the matching exception in
:mod:`mesh.a2a.exceptions`.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any, Literal

from .base import A2AModel
from .validation import discriminator, tag


class JSONRPCError(A2AModel):
    """A JSON-RPC error object with any code (e.g. JAF's -32000 "Agent not found")."""

    code: int
    message: str
    data: Any | None = None


class JSONParseError(JSONRPCError):
    """-32700: the payload is not valid JSON (or not UTF-8)."""

    code: Literal[-32700] = -32700
    message: str = "Invalid JSON payload"


class InvalidRequestError(JSONRPCError):
    """-32600: the payload is JSON but not a valid JSON-RPC request."""

    code: Literal[-32600] = -32600
    message: str = "Request payload validation error"


class MethodNotFoundError(JSONRPCError):
    """-32601: the method is not served."""

    code: Literal[-32601] = -32601
    message: str = "Method not found"


class InvalidParamsError(JSONRPCError):
    """-32602: the params do not match the method."""

    code: Literal[-32602] = -32602
    message: str = "Invalid parameters"


class InternalError(JSONRPCError):
    """-32603: the server failed while handling a valid request."""

    code: Literal[-32603] = -32603
    message: str = "Internal error"


class TaskNotFoundError(JSONRPCError):
    """-32001: no task with that id (or it expired)."""

    code: Literal[-32001] = -32001
    message: str = "Task not found"


class TaskNotCancelableError(JSONRPCError):
    """-32002: the task is in a state that cannot be canceled."""

    code: Literal[-32002] = -32002
    message: str = "Task cannot be canceled"


class PushNotificationNotSupportedError(JSONRPCError):
    """-32003: the agent does not do push notifications."""

    code: Literal[-32003] = -32003
    message: str = "Push Notification is not supported"


class UnsupportedOperationError(JSONRPCError):
    """-32004: the agent does not support this operation."""

    code: Literal[-32004] = -32004
    message: str = "This operation is not supported"


class ContentTypeNotSupportedError(JSONRPCError):
    """-32005: the requested content types do not match the agent's."""

    code: Literal[-32005] = -32005
    message: str = "Incompatible content types"


class InvalidAgentResponseError(JSONRPCError):
    """-32006: the agent answered with something that is not a valid A2A response."""

    code: Literal[-32006] = -32006
    message: str = "Invalid agent response"


class AuthenticatedExtendedCardNotConfiguredError(JSONRPCError):
    """-32007: the agent has no authenticated extended card (A2A 0.3)."""

    code: Literal[-32007] = -32007
    message: str = "Authenticated Extended Card is not configured"


_SPECIFIC: tuple[type[JSONRPCError], ...] = (
    JSONParseError,
    InvalidRequestError,
    MethodNotFoundError,
    InvalidParamsError,
    InternalError,
    TaskNotFoundError,
    TaskNotCancelableError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
    ContentTypeNotSupportedError,
    InvalidAgentResponseError,
    AuthenticatedExtendedCardNotConfiguredError,
)

#: The error model of every code the protocol defines.
ERROR_TYPES: Mapping[int, type[JSONRPCError]] = MappingProxyType(
    {cls.model_fields["code"].default: cls for cls in _SPECIFIC}
)

_OTHER_CODE = "other"


def _error_key(value: dict[str, Any]) -> Any:
    code = value.get("code")
    if type(code) is not int:  # bool is an int subclass; JSON has no such code
        return None
    return code if code in ERROR_TYPES else _OTHER_CODE


#: Any error object: the specific model for a known code, :class:`JSONRPCError` otherwise.
AnyError = Annotated[
    Annotated[JSONParseError, tag(JSONParseError)]
    | Annotated[InvalidRequestError, tag(InvalidRequestError)]
    | Annotated[MethodNotFoundError, tag(MethodNotFoundError)]
    | Annotated[InvalidParamsError, tag(InvalidParamsError)]
    | Annotated[InternalError, tag(InternalError)]
    | Annotated[TaskNotFoundError, tag(TaskNotFoundError)]
    | Annotated[TaskNotCancelableError, tag(TaskNotCancelableError)]
    | Annotated[PushNotificationNotSupportedError, tag(PushNotificationNotSupportedError)]
    | Annotated[UnsupportedOperationError, tag(UnsupportedOperationError)]
    | Annotated[ContentTypeNotSupportedError, tag(ContentTypeNotSupportedError)]
    | Annotated[InvalidAgentResponseError, tag(InvalidAgentResponseError)]
    | Annotated[
        AuthenticatedExtendedCardNotConfiguredError,
        tag(AuthenticatedExtendedCardNotConfiguredError),
    ]
    | Annotated[JSONRPCError, tag(JSONRPCError)],
    discriminator(
        {**ERROR_TYPES, _OTHER_CODE: JSONRPCError},
        read=_error_key,
        field="code",
        expected="an integer",
    ),
]
