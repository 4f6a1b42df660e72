"""JSON-RPC errors as exceptions.

Runtime code raises the exception of the error it means and the layer that answers the
request turns it into the reply::

    raise TaskNotFound(f"no task {task_id!r}", data={"taskId": task_id})
    ...
    except RpcError as exc:
        reply(exc.to_response(request_id))

Every exception carries its error object in ``.error`` (see :mod:`mesh.a2a.errors`) and, when
it was known where the error arose, the JSON-RPC ``request_id``. Going the other way, a client
holding an error response raises ``RpcError.from_error(response.error)``, which picks the
matching subclass::

    ProtocolError (mesh.errors)
    └── RpcError                           any code (e.g. -32000), error object JSONRPCErrorObject
        ├── InvalidJSON                    -32700
        ├── InvalidRequest                 -32600
        ├── MethodNotFound                 -32601
        ├── InvalidParams                  -32602
        ├── InternalFailure                -32603
        ├── TaskNotFound                   -32001
        ├── TaskNotCancelable              -32002
        ├── PushNotificationNotSupported   -32003
        ├── UnsupportedOperation           -32004
        ├── ContentTypeNotSupported        -32005
        ├── InvalidAgentResponse           -32006
        ├── AuthenticatedExtendedCardNotConfigured  -32007
        ├── AgentGone                      -32010 (mesh: the agent is not there)
        ├── Unauthenticated                -32020 (mesh: require_user_token and no valid token)
        ├── RequestTimedOut                -32030 (mesh: a gateway's deadline or idle timeout)
        ├── AgentBusy                      -32050 (mesh: at its max_concurrent_tasks)
        └── ResourceExhausted              -32051 (mesh: a gateway's concurrency limit)

Each subclass names its error object model, which holds its code (:class:`ErrorCode`) and
default message; a subclass registers itself in :data:`EXCEPTION_TYPES` by that code.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Self

from ..errors import ProtocolError
from . import errors as e
from .jsonrpc import JSONRPCErrorResponse, RequestId

_UNSET: Any = object()

# The exception class of each code, filled as the subclasses below are declared.
_BY_CODE: dict[int, type[RpcError]] = {}


class RpcError(ProtocolError):
    """A JSON-RPC error as an exception; ``.error`` is the error object sent on the wire."""

    error_type: ClassVar[type[e.JSONRPCErrorObject]] = e.JSONRPCErrorObject

    error: e.JSONRPCErrorObject
    request_id: RequestId

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.fixed_code()
        if "error_type" in cls.__dict__ and isinstance(code, e.ErrorCode):
            if code in _BY_CODE:
                raise TypeError(f"{cls.__name__}: code {code} already has {_BY_CODE[code].__name__}; subclass that")
            _BY_CODE[code] = cls

    def __init__(
        self,
        message: str | None = None,
        *,
        data: Any = None,
        request_id: RequestId = None,
        code: int | None = None,
    ) -> None:
        """Build the error object; ``code`` is only for the generic :class:`RpcError`."""
        if self.error_type is e.JSONRPCErrorObject:
            if code is None or message is None:
                raise TypeError(
                    "RpcError needs code= and a message; for an A2A code raise its subclass (e.g. TaskNotFound) instead"
                )
            error: e.JSONRPCErrorObject = e.JSONRPCErrorObject(code=code, message=message, data=data)
        else:
            if code is not None:
                raise TypeError(f"{type(self).__name__} always has code {self.fixed_code()}")
            fields: dict[str, Any] = {"data": data}
            if message is not None:
                fields["message"] = message
            error = self.error_type(**fields)
        self._set(error, request_id)

    def _set(self, error: e.JSONRPCErrorObject, request_id: RequestId) -> None:
        super().__init__(f"{error.message} (JSON-RPC error {error.code})")
        self.error = error
        self.request_id = request_id

    @classmethod
    def fixed_code(cls) -> int | None:
        """The fixed code of this exception class (``None`` for the generic one)."""
        default = cls.error_type.model_fields["code"].default
        return default if isinstance(default, int) else None

    @property
    def code(self) -> int:
        """The JSON-RPC error code."""
        return self.error.code

    @property
    def data(self) -> Any:
        """The error's ``data`` member (``None`` when absent)."""
        return self.error.data

    @staticmethod
    def from_error(error: e.JSONRPCErrorObject, *, request_id: RequestId = None) -> RpcError:
        """The exception for an error object, as the subclass matching its code."""
        cls = EXCEPTION_TYPES.get(error.code, RpcError)
        if not isinstance(error, cls.error_type):  # a generic object with a known code
            error = cls.error_type.model_validate(error.model_dump(by_alias=True))
        return cls.of_object(error, request_id)

    @classmethod
    def of_object(cls, error: e.JSONRPCErrorObject, request_id: RequestId = None) -> Self:
        """An exception of this class holding ``error`` as it is (no new message or data)."""
        exc = cls.__new__(cls)
        exc._set(error, request_id)
        return exc

    @classmethod
    def from_response(cls, response: JSONRPCErrorResponse) -> RpcError:
        """The exception for a received error response."""
        return cls.from_error(response.error, request_id=response.id)

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickle (process pools) by error object, not by the formatted message.
        return (_restore, (self.error.to_wire_dict(), self.request_id))

    def to_response(self, request_id: RequestId = _UNSET) -> JSONRPCErrorResponse:
        """The error response answering the request (default: the id this error carries)."""
        rid = self.request_id if request_id is _UNSET else request_id
        return JSONRPCErrorResponse(id=rid, error=self.error)


def _restore(error: dict[str, Any], request_id: RequestId) -> RpcError:
    return RpcError.from_error(e.JSONRPCErrorObject.model_validate(error), request_id=request_id)


class InvalidJSON(RpcError):
    """The payload is not valid UTF-8 JSON."""

    error_type = e.JSONParseErrorObject


class InvalidRequest(RpcError):
    """The payload is not a valid JSON-RPC 2.0 request."""

    error_type = e.InvalidRequestErrorObject


class MethodNotFound(RpcError):
    """The method is not served."""

    error_type = e.MethodNotFoundErrorObject


class InvalidParams(RpcError):
    """The params do not validate; ``data["errors"]`` lists every bad field."""

    error_type = e.InvalidParamsErrorObject


class InternalFailure(RpcError):
    """The server failed while handling a valid request."""

    error_type = e.InternalErrorObject


class TaskNotFound(RpcError):
    """No task with that id."""

    error_type = e.TaskNotFoundErrorObject


class TaskNotCancelable(RpcError):
    """The task cannot be canceled in its current state."""

    error_type = e.TaskNotCancelableErrorObject


class PushNotificationNotSupported(RpcError):
    """The agent does not do push notifications."""

    error_type = e.PushNotificationNotSupportedErrorObject


class UnsupportedOperation(RpcError):
    """The agent does not support the operation."""

    error_type = e.UnsupportedOperationErrorObject


class ContentTypeNotSupported(RpcError):
    """Incompatible content types."""

    error_type = e.ContentTypeNotSupportedErrorObject


class InvalidAgentResponse(RpcError):
    """An agent's answer is not a valid A2A response."""

    error_type = e.InvalidAgentResponseErrorObject


class AuthenticatedExtendedCardNotConfigured(RpcError):
    """The agent has no authenticated extended card."""

    error_type = e.AuthenticatedExtendedCardNotConfiguredErrorObject


class AgentGone(RpcError):
    """The agent is gone: nobody listens on its request topic, or its card was removed."""

    error_type = e.AgentGoneErrorObject


class Unauthenticated(RpcError):
    """The agent requires a valid user token (``require_user_token``) and the request has none."""

    error_type = e.UnauthenticatedErrorObject


class AgentBusy(RpcError):
    """The agent runs as many tasks as it may (``max_concurrent_tasks``); try again later."""

    error_type = e.AgentBusyErrorObject


class RequestTimedOut(RpcError):
    """A gateway's request ran past its deadline or idle timeout; the task was canceled."""

    error_type = e.RequestTimeoutErrorObject


class ResourceExhausted(RpcError):
    """A gateway's concurrency limit is full; send again once a request of yours ended."""

    error_type = e.ResourceExhaustedErrorObject


if missing := [code.name for code in e.ErrorCode if code not in _BY_CODE]:  # pragma: no cover - a developer's slip
    raise TypeError(f"mesh.a2a.exceptions: no exception class for {', '.join(missing)}")

#: The exception class of every code the protocol defines, in :class:`ErrorCode` order.
EXCEPTION_TYPES: Mapping[int, type[RpcError]] = MappingProxyType({int(code): _BY_CODE[code] for code in e.ErrorCode})
