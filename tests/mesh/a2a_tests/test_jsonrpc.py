"""JSON-RPC: error objects and exceptions, request parsing, response and result parsing."""

from __future__ import annotations

import json
import pickle
from typing import Any, Literal

import pytest
from pydantic import ValidationError

from mesh.a2a import (
    ERROR_TYPES,
    EXCEPTION_TYPES,
    METHOD_ALIASES,
    METHOD_PARAMS,
    AgentGoneErrorObject,
    AuthenticatedExtendedCardNotConfigured,
    AuthenticatedExtendedCardNotConfiguredErrorObject,
    CancelTaskRequest,
    ContentTypeNotSupportedErrorObject,
    DeleteTaskPushNotificationConfigParams,
    ErrorCode,
    GetTaskPushNotificationConfigParams,
    InternalErrorObject,
    InternalFailure,
    InvalidAgentResponse,
    InvalidAgentResponseErrorObject,
    InvalidJSON,
    InvalidParams,
    InvalidParamsErrorObject,
    InvalidRequest,
    InvalidRequestErrorObject,
    JSONParseErrorObject,
    JSONRPCErrorObject,
    JSONRPCErrorResponse,
    JSONRPCRequest,
    JSONRPCSuccessResponse,
    ListTaskPushNotificationConfigParams,
    Message,
    MessageSendParams,
    Method,
    MethodNotFound,
    MethodNotFoundErrorObject,
    PushNotificationNotSupportedErrorObject,
    RpcError,
    SendMessageRequest,
    SendStreamingMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskNotCancelableErrorObject,
    TaskNotFound,
    TaskNotFoundErrorObject,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskStatusUpdateEvent,
    UnsupportedOperationErrorObject,
    parse_request,
    parse_response,
    parse_result,
)
from mesh.errors import MeshError, ProtocolError

MESSAGE = {"messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}


def request(method: str = "message/send", params: Any = None, **members: Any) -> bytes:
    doc: dict[str, Any] = {"jsonrpc": "2.0", "id": "r1", "method": method, **members}
    doc["params"] = {"message": MESSAGE} if params is None else params
    return json.dumps(doc).encode()


# --------------------------------------------------------------------------- error objects


@pytest.mark.parametrize(
    ("cls", "code", "message"),
    [
        (JSONParseErrorObject, -32700, "Invalid JSON payload"),
        (InvalidRequestErrorObject, -32600, "Request payload validation error"),
        (MethodNotFoundErrorObject, -32601, "Method not found"),
        (InvalidParamsErrorObject, -32602, "Invalid parameters"),
        (InternalErrorObject, -32603, "Internal error"),
        (TaskNotFoundErrorObject, -32001, "Task not found"),
        (TaskNotCancelableErrorObject, -32002, "Task cannot be canceled"),
        (PushNotificationNotSupportedErrorObject, -32003, "Push Notification is not supported"),
        (UnsupportedOperationErrorObject, -32004, "This operation is not supported"),
        (ContentTypeNotSupportedErrorObject, -32005, "Incompatible content types"),
        (InvalidAgentResponseErrorObject, -32006, "Invalid agent response"),
        (
            AuthenticatedExtendedCardNotConfiguredErrorObject,
            -32007,
            "Authenticated Extended Card is not configured",
        ),
        (AgentGoneErrorObject, -32010, "The agent is gone"),
    ],
)
def test_error_objects_have_fixed_codes(cls: type[JSONRPCErrorObject], code: int, message: str) -> None:
    error = cls.model_validate({})  # code and message come from the class
    assert (error.code, error.message) == (code, message)
    assert isinstance(error, JSONRPCErrorObject)
    assert ERROR_TYPES[code] is cls
    assert error.to_wire_dict() == {"code": code, "message": message}
    assert EXCEPTION_TYPES[code].error_type is cls
    with pytest.raises(ValidationError):
        cls.model_validate({"code": -1})


def test_error_response_parses_the_error_by_code() -> None:
    response = JSONRPCErrorResponse.model_validate(
        {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {"code": -32001, "message": "no task t9", "data": {"id": "t9"}},
        }
    )
    assert type(response.error) is TaskNotFoundErrorObject
    assert response.error.message == "no task t9"
    other = JSONRPCErrorResponse.model_validate({"id": 3, "error": {"code": 42, "message": "x"}})
    assert type(other.error) is JSONRPCErrorObject


def test_error_response_keeps_a_null_id() -> None:
    response = JSONRPCErrorResponse(error=JSONParseErrorObject())
    assert response.to_wire_dict() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Invalid JSON payload"},
    }
    assert json.loads(response.to_json_bytes())["id"] is None


def test_success_response_keeps_a_null_result() -> None:
    # tasks/pushNotificationConfig/delete answers with result null.
    assert JSONRPCSuccessResponse(id=1, result=None).to_wire_dict() == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": None,
    }


def test_error_code_must_be_an_integer() -> None:
    with pytest.raises(InvalidAgentResponse) as info:
        parse_response(b'{"jsonrpc": "2.0", "id": 1, "error": {"code": "oops", "message": "m"}}')
    assert info.value.data["errors"][0]["path"] == "error.code"


# --------------------------------------------------------------------------- exceptions


def test_raise_and_answer() -> None:
    with pytest.raises(RpcError) as info:
        raise TaskNotFound("no task 't9'", data={"taskId": "t9"})
    exc = info.value
    assert isinstance(exc, ProtocolError) and isinstance(exc, MeshError)
    assert exc.code == -32001 and exc.data == {"taskId": "t9"}
    assert str(exc) == "no task 't9' (JSON-RPC error -32001)"
    assert exc.to_response("req-7").to_wire_dict() == {
        "jsonrpc": "2.0",
        "id": "req-7",
        "error": {"code": -32001, "message": "no task 't9'", "data": {"taskId": "t9"}},
    }


def test_exception_defaults_and_request_id() -> None:
    exc = InternalFailure(request_id=5)
    assert exc.error == InternalErrorObject()
    assert exc.to_response().id == 5
    assert exc.to_response(None).id is None


def test_generic_rpc_error_needs_a_code() -> None:
    exc = RpcError("Agent not found", code=-32000, data={"availableAgents": ["a"]})
    assert exc.error.to_wire_dict() == {
        "code": -32000,
        "message": "Agent not found",
        "data": {"availableAgents": ["a"]},
    }
    with pytest.raises(TypeError):
        RpcError("no code")
    with pytest.raises(TypeError):
        TaskNotFound(code=-32000)


def test_from_error_picks_the_subclass() -> None:
    exc = RpcError.from_error(JSONRPCErrorObject(code=-32001, message="gone"), request_id="r")
    assert type(exc) is TaskNotFound
    assert type(exc.error) is TaskNotFoundErrorObject and exc.error.message == "gone"
    assert type(RpcError.from_error(JSONRPCErrorObject(code=-32000, message="x"))) is RpcError
    response = parse_response(b'{"jsonrpc":"2.0","id":"r","error":{"code":-32007,"message":"m"}}')
    assert isinstance(response, JSONRPCErrorResponse)
    from_response = RpcError.from_response(response)
    assert type(from_response) is AuthenticatedExtendedCardNotConfigured
    assert from_response.request_id == "r"


def test_error_code_table_drives_objects_and_exceptions() -> None:
    assert list(ERROR_TYPES) == list(EXCEPTION_TYPES) == [int(code) for code in ErrorCode]
    for code in ErrorCode:
        model, exc_type = ERROR_TYPES[code], EXCEPTION_TYPES[code]
        assert model().to_wire_dict() == {"code": code.value, "message": code.message}
        assert exc_type.error_type is model and exc_type.fixed_code() == code
        assert exc_type().error == model() and str(exc_type()) == f"{code.message} (JSON-RPC error {code.value})"
        # error objects are wire data, named so; raising one is not possible
        assert model.__name__.endswith("ErrorObject") and not issubclass(model, BaseException)


def test_a_code_has_one_error_object_and_one_exception() -> None:
    with pytest.raises(TypeError, match="code -32001 already has TaskNotFoundErrorObject"):

        class _Again(JSONRPCErrorObject):
            code: Literal[ErrorCode.TASK_NOT_FOUND] = ErrorCode.TASK_NOT_FOUND

    with pytest.raises(TypeError, match="code -32001 already has TaskNotFound; subclass that"):

        class _AgainToo(RpcError):
            error_type = TaskNotFoundErrorObject

    class Narrower(TaskNotFound):  # a subclass of an existing exception is fine
        pass

    assert EXCEPTION_TYPES[-32001] is TaskNotFound and Narrower("gone").code == -32001
    assert ERROR_TYPES[-32001] is TaskNotFoundErrorObject


# --------------------------------------------------------------------------- parse_request


def test_method_table_covers_design_methods() -> None:
    assert {str(m) for m in METHOD_PARAMS} == {
        "message/send",
        "message/stream",
        "tasks/get",
        "tasks/cancel",
        "tasks/resubscribe",
        "tasks/pushNotificationConfig/set",
        "tasks/pushNotificationConfig/get",
        "tasks/pushNotificationConfig/list",
        "tasks/pushNotificationConfig/delete",
        "tasks/list",  # the mesh's extension
    }
    assert list(METHOD_PARAMS) == list(Method)
    assert all(METHOD_PARAMS[m] is m.params for m in Method)
    assert dict(METHOD_ALIASES) == {
        "agent/sendMessage": Method.message_send,
        "agent/sendStreamingMessage": Method.message_stream,
        "agent/cancelTask": Method.tasks_cancel,
    }
    assert {m for m in Method if m.streaming} == {Method.message_stream, Method.tasks_resubscribe}
    for cls in (SendMessageRequest, SendStreamingMessageRequest, CancelTaskRequest):  # SAM's helpers build these
        method = Method(cls.model_fields["method"].default)
        assert cls.model_fields["params"].annotation is METHOD_PARAMS[method]


@pytest.mark.parametrize(
    ("method", "params", "model"),
    [
        ("message/send", {"message": MESSAGE}, MessageSendParams),
        (
            "message/stream",
            {"message": MESSAGE, "configuration": {"blocking": False}},
            MessageSendParams,
        ),
        ("tasks/get", {"id": "t", "historyLength": 2}, TaskQueryParams),
        ("tasks/cancel", {"id": "t"}, TaskIdParams),
        ("tasks/resubscribe", {"id": "t"}, TaskIdParams),
        (
            "tasks/pushNotificationConfig/set",
            {"taskId": "t", "pushNotificationConfig": {"url": "https://h"}},
            TaskPushNotificationConfig,
        ),
        ("tasks/pushNotificationConfig/get", {"id": "t"}, GetTaskPushNotificationConfigParams),
        ("tasks/pushNotificationConfig/list", {"id": "t"}, ListTaskPushNotificationConfigParams),
        (
            "tasks/pushNotificationConfig/delete",
            {"id": "t", "pushNotificationConfigId": "c"},
            DeleteTaskPushNotificationConfigParams,
        ),
    ],
)
def test_every_method_parses_to_its_params(method: str, params: dict[str, Any], model: type) -> None:
    parsed = parse_request(request(method, params))
    assert parsed.method == method and parsed.requested_method == method
    assert type(parsed.params) is model
    assert parsed.params.to_wire_dict() == model.model_validate(params).to_wire_dict()


@pytest.mark.parametrize(("alias", "canonical"), sorted(METHOD_ALIASES.items()))
def test_sam_aliases_are_canonicalised(alias: str, canonical: Method) -> None:
    params = {"id": "t"} if canonical is Method.tasks_cancel else {"message": MESSAGE}
    parsed = parse_request(request(alias, params))
    assert parsed.method is canonical
    assert parsed.requested_method == alias


def test_request_id_may_be_an_int_or_absent() -> None:
    assert parse_request(request(id=7)).id == 7
    doc = json.loads(request())
    del doc["id"]
    assert parse_request(json.dumps(doc)).id is None


@pytest.mark.parametrize(
    ("payload", "text"),
    [
        (b"{not json", "Invalid JSON payload: Expecting property name"),
        (b"\xff\xfe{}", "'utf-8' codec can't decode"),
        (b'{"jsonrpc": "2.0", "id": 1, "x": NaN}', "NaN is not valid JSON"),
        (b"", "Expecting value"),
        (b"[" * 100_000, "Invalid JSON payload"),
    ],
)
def test_malformed_json_is_32700(payload: bytes, text: str) -> None:
    with pytest.raises(InvalidJSON) as info:
        parse_request(payload)
    assert info.value.code == -32700 and text in info.value.error.message
    assert info.value.to_response().id is None


@pytest.mark.parametrize(
    ("payload", "request_id", "text"),
    [
        (b"[]", None, "a request must be a JSON object, got array"),
        (b'"message/send"', None, "got string"),
        (
            b'{"jsonrpc": "2.0", "id": true, "method": "tasks/get"}',
            None,
            "id must be a string, an integer or null, got boolean",
        ),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "tasks/get"}', None, "got number 1.5"),
        (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tasks/get"}', None, "got object"),
        (
            b'{"id": 4, "method": "tasks/get", "params": {"id": "t"}}',
            4,
            'jsonrpc must be "2.0", got nothing',
        ),
        (b'{"jsonrpc": "1.0", "id": "x", "method": "tasks/get"}', "x", "got '1.0'"),
        (b'{"jsonrpc": 2.0, "id": "x", "method": "tasks/get"}', "x", "got 2.0"),
        (b'{"jsonrpc": "2.0", "id": 9}', 9, "method must be a string, got nothing"),
        (b'{"jsonrpc": "2.0", "id": 9, "method": 12}', 9, "method must be a string, got number"),
        (
            b'{"jsonrpc": "2.0", "id": 9, "method": "tasks/get", "params": "t1"}',
            9,
            "params must be an object, got string",
        ),
    ],
)
def test_invalid_requests_are_32600(payload: bytes, request_id: Any, text: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        parse_request(payload)
    assert info.value.code == -32600
    assert info.value.request_id == request_id
    assert text in info.value.error.message


def test_unknown_method_is_32601_and_lists_the_supported_ones() -> None:
    with pytest.raises(MethodNotFound) as info:
        parse_request(request("tasks/lst", {}, id=12))
    exc = info.value
    assert exc.code == -32601 and exc.request_id == 12
    assert exc.error.message.startswith("method 'tasks/lst' is not supported; supported methods: message/send,")
    assert "agent/sendMessage (= message/send)" in exc.error.message
    assert exc.data["method"] == "tasks/lst"
    assert exc.data["supported"] == [*METHOD_PARAMS, *METHOD_ALIASES]


def test_bad_params_are_32602_with_every_path() -> None:
    params = {
        "message": {"role": "robot", "parts": [{"kind": "text", "text": "ok"}, {"kind": "img"}]},
        "configuration": {"historyLength": "many"},
    }
    with pytest.raises(InvalidParams) as info:
        parse_request(request("message/send", params))
    exc = info.value
    assert exc.code == -32602 and exc.request_id == "r1"
    assert exc.data["method"] == "message/send"
    assert [e["path"] for e in exc.data["errors"]] == [
        "params.message.messageId",
        "params.message.role",
        "params.message.parts.1.kind",
        "params.configuration.historyLength",
    ]
    message = exc.error.message
    assert message.startswith("invalid params for message/send: params.message.messageId: Field required; ")
    assert "params.message.role: Input should be 'user' or 'agent' (got 'robot')" in message
    assert "params.message.parts.1.kind: unknown kind 'img'" in message
    wire = exc.to_response().to_wire_dict()
    assert wire["id"] == "r1" and wire["error"]["data"] == exc.data


@pytest.mark.parametrize(
    ("members", "reason"),
    [
        ({"params": None}, "must be an object of named params, got null"),
        ({"params": ["t1"]}, "must be an object of named params, got array"),
    ],
)
def test_missing_or_positional_params_are_32602(members: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidParams) as info:
        parse_request(json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", **members}))
    assert info.value.data["errors"][0] == {"path": "params", "reason": reason, "type": "params"}
    assert info.value.request_id == 2
    with pytest.raises(InvalidParams, match="params: required"):
        parse_request(b'{"jsonrpc": "2.0", "id": 2, "method": "tasks/get"}')


def test_parse_request_accepts_str_bytes_bytearray_and_memoryview() -> None:
    payload = request("tasks/get", {"id": "t"})
    for form in (payload, payload.decode(), bytearray(payload), memoryview(payload)):
        assert parse_request(form).params == TaskQueryParams(id="t")


def test_request_unknown_keys_are_kept_in_params() -> None:
    parsed = parse_request(request("tasks/get", {"id": "t", "tenant": "acme"}))
    assert parsed.params.to_wire_dict() == {"id": "t", "tenant": "acme"}


def test_typed_and_untyped_requests_dump() -> None:
    typed = CancelTaskRequest(id="r", params=TaskIdParams(id="t"))
    assert typed.to_wire_dict() == {
        "jsonrpc": "2.0",
        "id": "r",
        "method": "tasks/cancel",
        "params": {"id": "t"},
    }
    assert parse_request(typed.to_json_bytes()).params == TaskIdParams(id="t")
    untyped = JSONRPCRequest(id=1, method="x/y", params={"a": 1})
    assert untyped.to_wire_dict() == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "x/y",
        "params": {"a": 1},
    }
    send = SendMessageRequest.model_validate(json.loads(request()))
    assert isinstance(send.params.message, Message)


# --------------------------------------------------------------------------- responses


def test_parse_response_success_and_result_by_kind() -> None:
    task = {"id": "t", "contextId": "c", "kind": "task", "status": {"state": "completed"}}
    response = parse_response(json.dumps({"jsonrpc": "2.0", "id": "r1", "result": task}))
    assert isinstance(response, JSONRPCSuccessResponse) and response.id == "r1"
    parsed = parse_result(response.result)
    assert isinstance(parsed, Task) and parsed.status.state == "completed"
    assert parse_result(response.result, Task) == parsed


@pytest.mark.parametrize(
    ("result", "cls"),
    [
        ({"kind": "message", **MESSAGE}, Message),
        (
            {
                "kind": "status-update",
                "taskId": "t",
                "contextId": "c",
                "status": {"state": "working"},
                "final": False,
            },
            TaskStatusUpdateEvent,
        ),
        (
            {
                "kind": "artifact-update",
                "taskId": "t",
                "contextId": "c",
                "artifact": {"artifactId": "a", "parts": [{"text": "x"}]},
            },
            TaskArtifactUpdateEvent,
        ),
    ],
)
def test_parse_result_reads_each_kind(result: dict[str, Any], cls: type) -> None:
    value = parse_result(result)
    assert type(value) is cls
    assert parse_result(value) is value  # an already-parsed result passes through


def test_parse_result_with_the_wrong_expected_kind() -> None:
    with pytest.raises(InvalidAgentResponse, match=r"result\.kind: expected 'task', got 'message'"):
        parse_result({"kind": "message", **MESSAGE}, Task)


@pytest.mark.parametrize(
    ("payload", "text"),
    [
        (b"nope", "the response is not valid JSON"),
        (b"[1]", "a response must be a JSON object, got array"),
        (b'{"jsonrpc": "2.0", "id": 1}', "exactly one of result or error"),
        (
            b'{"jsonrpc": "2.0", "id": 1, "result": 1, "error": {"code": 1, "message": "m"}}',
            "exactly one of",
        ),
        (
            b'{"jsonrpc": "2.1", "id": 1, "result": 1}',
            "invalid response: jsonrpc: Input should be '2.0' (got '2.1')",
        ),
        (b'{"jsonrpc": "2.0", "id": 1, "error": {"code": -32001}}', None),
        (
            b'{"jsonrpc": "2.0", "id": 1, "error": {"message": "m"}}',
            "invalid response: error.code: missing",
        ),
    ],
)
def test_malformed_responses_are_invalid_agent_responses(payload: bytes, text: str | None) -> None:
    if text is None:  # a known code without message gets the default message
        response = parse_response(payload)
        assert isinstance(response, JSONRPCErrorResponse) and response.error.message == "Task not found"
        return
    with pytest.raises(InvalidAgentResponse) as info:
        parse_response(payload)
    assert info.value.code == -32006
    assert text in info.value.error.message


def test_success_response_dumps_a_model_result() -> None:
    task = Task.model_validate({"id": "t", "context_id": "c", "status": {"state": "working"}})
    wire = JSONRPCSuccessResponse(id="r", result=task).to_wire_dict()
    assert wire == {
        "jsonrpc": "2.0",
        "id": "r",
        "result": {"id": "t", "contextId": "c", "status": {"state": "working"}, "kind": "task"},
    }


def test_exceptions_pickle_with_their_error() -> None:
    exc = TaskNotFound("gone", data={"taskId": "t"}, request_id=4)
    copy = pickle.loads(pickle.dumps(exc))
    assert type(copy) is TaskNotFound
    assert (copy.error, copy.request_id, str(copy)) == (exc.error, 4, str(exc))
