"""A2A 1.0 <-> mesh 0.3 translation, with a2a-sdk 1.3 as the oracle.

a2a-sdk writes and reads the 1.0 side as its client and server do (protobuf types,
``json_format.MessageToDict`` / ``ParseDict``; results are parsed strictly, so a stray member
such as ``kind`` or ``final`` fails); its own 0.3 compat conversions cross-check the mapping;
the mesh's models and ``parse_request`` check the 0.3 side. The last section runs a2a-sdk's
real client against a fake gateway made of these functions (httpx MockTransport, no network).
"""

from __future__ import annotations

import ast
import base64
import copy
import json
import sys
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.client.card_resolver import parse_agent_card
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.compat.v0_3 import conversions as compat
from a2a.compat.v0_3 import types as types_v03
from a2a.server.request_handlers.response_helpers import agent_card_to_dict, build_error_response
from a2a.types import a2a_pb2 as pb
from a2a.utils import errors as sdk_errors
from google.protobuf import struct_pb2
from google.protobuf.json_format import MessageToDict, ParseDict
from google.protobuf.timestamp_pb2 import Timestamp
from google.rpc import error_details_pb2
from hypothesis import given, settings
from hypothesis import strategies as st

from gateways.http import a2a_v1
from gateways.http.a2a_v1 import (
    V1_METHODS,
    V1_STREAMING_METHODS,
    ListTasksQuery,
    StreamToV1,
    error_response_v1,
    error_v1,
    list_tasks_query,
    list_tasks_result_v1,
    message_v1,
    negotiate_version,
    params_from_v1,
    push_config_v1,
    push_configs_v1,
    result_v1,
    send_message_result_v1,
    served_card,
    stream_response_v1,
    task_v1,
    timestamp_v1,
)
from mesh.a2a import (
    EXCEPTION_TYPES,
    METHOD_PARAMS,
    AgentCard,
    Artifact,
    DataPart,
    FilePart,
    FileWithBytes,
    FileWithUri,
    InvalidAgentResponse,
    InvalidParams,
    Message,
    MessageSendParams,
    Method,
    MethodNotFound,
    ParsedRequest,
    RpcError,
    Task,
    TaskArtifactUpdateEvent,
    TaskNotFound,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    TextPart,
    UnsupportedOperation,
    parse_request,
)

ROOT = Path(__file__).resolve().parent.parents[2]
URL_V1 = "https://gw.example/a2a/agents/echo"
URL_V03 = "https://gw.example/a2a/agents/echo/v0.3"


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    return ParseDict(value, struct_pb2.Struct())


def value(data: Any) -> struct_pb2.Value:
    return ParseDict(data, struct_pb2.Value())


def mesh_request(method: Method, params: dict[str, Any]) -> ParsedRequest:
    """The request as an agent on the mesh parses it."""
    return parse_request(json.dumps({"jsonrpc": "2.0", "id": 7, "method": str(method), "params": params}))


def compat_params(converted: Any) -> dict[str, Any]:
    """a2a-sdk's own 0.3 conversion of a request, as the mesh's wire dict."""
    return converted.params.model_dump(mode="json", by_alias=True, exclude_none=True)


# ================================================================ production imports


def test_translation_modules_import_only_stdlib_and_mesh_a2a() -> None:
    for path in sorted((ROOT / "gateways" / "http").glob("a2a_v1*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                root = name.split(".")[0]
                # mesh.e2a.reader: the gateways' one reader of typed dicts, itself stdlib only;
                # pydantic: the ValidationError of mesh.a2a's models; mesh.profile.v1*: the one A2A
                # 1.0 translation, shared with the EMQX dialect
                allowed = name.startswith(("mesh.a2a", "mesh.profile.v1")) or name in ("mesh.e2a.reader", "pydantic")
                assert root in sys.stdlib_module_names or allowed, f"{path.name}: {name}"


def test_public_api_is_exported() -> None:
    assert sorted(a2a_v1.__all__) == sorted(set(a2a_v1.__all__))
    for name in a2a_v1.__all__:
        assert hasattr(a2a_v1, name), name


# ================================================================ methods and versions


def test_every_method_a2a_sdk_serves_is_known() -> None:
    services = pb.DESCRIPTOR.services_by_name["A2AService"].methods
    assert set(V1_METHODS) == {m.name for m in services}
    assert {m.name for m in services if m.output_type.name == "StreamResponse"} == V1_STREAMING_METHODS
    forwarded = {name: target for name, target in V1_METHODS.items() if target is not None}
    # tasks/list, the mesh's per-agent list, is not forwarded: the gateway lists the caller's tasks.
    assert set(forwarded.values()) == set(Method) - {Method.tasks_list}
    assert [name for name, target in V1_METHODS.items() if target is None] == ["ListTasks", "GetExtendedAgentCard"]


def test_unknown_method_names_the_supported_ones() -> None:
    with pytest.raises(MethodNotFound) as info:
        params_from_v1("SendMesage", {})
    assert "SendMessage" in info.value.error.message and "SendMesage" in info.value.error.message
    assert info.value.data["supported"] == list(V1_METHODS)
    with pytest.raises(MethodNotFound, match=r"an A2A 0\.3 method"):
        params_from_v1("message/send", {})
    with pytest.raises(ValueError, match="gateway answers it"):
        params_from_v1("ListTasks", {})


@pytest.mark.parametrize(
    ("method", "header", "expected"),
    [
        ("message/send", None, "0.3"),
        ("message/send", "", "0.3"),
        ("tasks/get", "0.3", "0.3"),
        ("tasks/get", "0.3.0", "0.3"),
        ("agent/sendMessage", None, "0.3"),
        ("SendMessage", "1.0", "1.0"),
        ("SendMessage", " 1.0.1 ", "1.0"),
        ("GetTask", "1.2", "1.0"),  # a2a-sdk matches the major version only
        ("NoSuchMethod", "1.0", "1.0"),  # left to params_from_v1: MethodNotFound
    ],
)
def test_negotiate_version(method: str, header: str | None, expected: str) -> None:
    assert negotiate_version(method, header) == expected


@pytest.mark.parametrize(
    ("method", "header", "hint"),
    [
        ("SendMessage", None, "A2A-Version: 1.0"),  # a 1.0 client that forgot the header
        ("message/send", "1.0", "0.3 method"),
        ("SendMessage", "2.0", "not supported"),
        ("SendMessage", "latest", "not supported"),
    ],
)
def test_version_mismatch_is_version_not_supported(method: str, header: str | None, hint: str) -> None:
    with pytest.raises(RpcError, match=hint) as info:
        negotiate_version(method, header)
    assert info.value.code == -32009
    assert error_v1(info.value.code, "x")["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"


# ================================================================ requests 1.0 -> 0.3


def full_send_request() -> pb.SendMessageRequest:
    return pb.SendMessageRequest(
        message=pb.Message(
            message_id="m-1",
            context_id="ctx-1",
            task_id="task-1",
            role=pb.Role.ROLE_USER,
            reference_task_ids=["old-1", "old-2"],
            extensions=["urn:ext:a"],
            metadata=struct({"k": "v"}),
            parts=[
                pb.Part(text="hello", metadata=struct({"lang": "en"})),
                pb.Part(raw=b"\x00\x01\xfe\xff", media_type="application/octet-stream", filename="blob.bin"),
                pb.Part(url="https://files.example/r.pdf", media_type="application/pdf", filename="r.pdf"),
                pb.Part(data=value({"city": "Paris", "n": 3})),
                pb.Part(data=value([1, "two"])),
            ],
        ),
        configuration=pb.SendMessageConfiguration(
            accepted_output_modes=["text/plain", "application/json"],
            history_length=5,
            return_immediately=True,
            task_push_notification_config=pb.TaskPushNotificationConfig(
                id="cfg-1",
                url="https://hooks.example/a2a",
                token="tok",
                authentication=pb.AuthenticationInfo(scheme="Bearer", credentials="secret"),
            ),
        ),
        metadata=struct({"trace": "abc"}),
    )


def test_send_message_carries_every_part_kind_and_setting() -> None:
    method, params = params_from_v1("SendMessage", MessageToDict(full_send_request()))
    assert method is Method.message_send
    assert params == {
        "message": {
            "kind": "message",
            "messageId": "m-1",
            "role": "user",
            "parts": [
                {"kind": "text", "text": "hello", "metadata": {"lang": "en"}},
                {
                    "kind": "file",
                    "file": {"bytes": "AAH+/w==", "mimeType": "application/octet-stream", "name": "blob.bin"},
                },
                {
                    "kind": "file",
                    "file": {"uri": "https://files.example/r.pdf", "mimeType": "application/pdf", "name": "r.pdf"},
                },
                {"kind": "data", "data": {"city": "Paris", "n": 3}},
                {"kind": "data", "data": {"value": [1, "two"]}, "metadata": {"data_part_compat": True}},
            ],
            "contextId": "ctx-1",
            "taskId": "task-1",
            "referenceTaskIds": ["old-1", "old-2"],
            "extensions": ["urn:ext:a"],
            "metadata": {"k": "v"},
        },
        "configuration": {
            "blocking": False,
            "acceptedOutputModes": ["text/plain", "application/json"],
            "historyLength": 5,
            "pushNotificationConfig": {
                "url": "https://hooks.example/a2a",
                "a2aVersion": "1.0",  # the mesh's mark: the agent POSTs 1.0 StreamResponses to it
                "id": "cfg-1",
                "token": "tok",
                "authentication": {"schemes": ["Bearer"], "credentials": "secret"},
            },
        },
        "metadata": {"trace": "abc"},
    }
    parsed = mesh_request(method, params).params
    assert isinstance(parsed, MessageSendParams)
    assert parsed.message.parts[1].file.bytes == base64.b64encode(b"\x00\x01\xfe\xff").decode()  # type: ignore[union-attr]


def test_send_message_matches_a2a_sdk_compat_conversion() -> None:
    request = full_send_request()
    for streaming in ("SendMessage", "SendStreamingMessage"):
        method, params = params_from_v1(streaming, MessageToDict(request))
        theirs = compat_params(compat.to_compat_send_message_request(request, 1))
        theirs["configuration"]["pushNotificationConfig"]["a2aVersion"] = "1.0"  # the mesh's mark
        assert MessageSendParams.model_validate(params) == MessageSendParams.model_validate(theirs)
        assert method is (Method.message_send if streaming == "SendMessage" else Method.message_stream)


@pytest.mark.parametrize(
    ("configuration", "blocking"),
    [
        (None, True),
        (pb.SendMessageConfiguration(), True),
        (pb.SendMessageConfiguration(return_immediately=True), False),
    ],
)
def test_return_immediately_becomes_blocking(configuration: pb.SendMessageConfiguration | None, blocking: bool) -> None:
    request = pb.SendMessageRequest(
        message=pb.Message(message_id="m", role=pb.Role.ROLE_AGENT, parts=[pb.Part(text="x")])
    )
    if configuration is not None:
        request.configuration.CopyFrom(configuration)
        request.configuration.SetInParent()
    _, params = params_from_v1("SendMessage", MessageToDict(request))
    assert params["configuration"] == {"blocking": blocking}  # 1.0 defaults to blocking; said explicitly
    assert params["message"]["role"] == "agent"


def test_text_and_data_parts_keep_media_type_and_filename_for_the_way_back() -> None:
    request = pb.SendMessageRequest(
        message=pb.Message(
            message_id="m",
            role=pb.Role.ROLE_USER,
            parts=[
                pb.Part(text="# hi", media_type="text/markdown", filename="note.md"),
                pb.Part(data=value({"a": 1}), media_type="application/vnd.x+json"),
            ],
        )
    )
    _, params = params_from_v1("SendMessage", MessageToDict(request))
    message = MessageSendParams.model_validate(params).message
    assert message.parts[0].model_extra == {"mediaType": "text/markdown", "filename": "note.md"}
    assert ParseDict(message_v1(message), pb.Message()) == request.message


PUSH = pb.TaskPushNotificationConfig(
    task_id="t-1", id="c-1", url="https://h.example/x", token="tk", authentication=pb.AuthenticationInfo(scheme="Basic")
)
PUSH_0_3 = {"url": "https://h.example/x", "id": "c-1", "token": "tk", "authentication": {"schemes": ["Basic"]}}
c = compat
ID_REQUESTS = [  # (1.0 request, expected 0.3 params, a2a-sdk's own conversion)
    (pb.GetTaskRequest(id="t-1", history_length=0), {"id": "t-1", "historyLength": 0}, c.to_compat_get_task_request),
    (pb.GetTaskRequest(id="t-1"), {"id": "t-1"}, c.to_compat_get_task_request),
    (
        pb.CancelTaskRequest(id="t-1", metadata=struct({"a": "b"})),
        {"id": "t-1", "metadata": {"a": "b"}},
        c.to_compat_cancel_task_request,
    ),
    (pb.SubscribeToTaskRequest(id="t-1"), {"id": "t-1"}, c.to_compat_subscribe_to_task_request),
    (
        PUSH,
        {"taskId": "t-1", "pushNotificationConfig": {**PUSH_0_3, "a2aVersion": "1.0"}},
        c.to_compat_create_task_push_notification_config_request,
    ),
    (
        pb.GetTaskPushNotificationConfigRequest(task_id="t-1", id="c-1"),
        {"id": "t-1", "pushNotificationConfigId": "c-1"},
        c.to_compat_get_task_push_notification_config_request,
    ),
    (
        pb.ListTaskPushNotificationConfigsRequest(task_id="t-1", page_size=5),
        {"id": "t-1"},
        c.to_compat_list_task_push_notification_config_request,
    ),
    (
        pb.DeleteTaskPushNotificationConfigRequest(task_id="t-1", id="c-1"),
        {"id": "t-1", "pushNotificationConfigId": "c-1"},
        c.to_compat_delete_task_push_notification_config_request,
    ),
]
V1_NAMES = {  # the 1.0 method taking each request type
    "GetTaskRequest": "GetTask", "CancelTaskRequest": "CancelTask", "SubscribeToTaskRequest": "SubscribeToTask",
    "TaskPushNotificationConfig": "CreateTaskPushNotificationConfig",
    "GetTaskPushNotificationConfigRequest": "GetTaskPushNotificationConfig",
    "ListTaskPushNotificationConfigsRequest": "ListTaskPushNotificationConfigs",
    "DeleteTaskPushNotificationConfigRequest": "DeleteTaskPushNotificationConfig",
}  # fmt: skip


@pytest.mark.parametrize(("request_", "expected", "sdk_conversion"), ID_REQUESTS)
def test_task_and_push_config_requests(request_: Any, expected: dict[str, Any], sdk_conversion: Any) -> None:
    v1_method = V1_NAMES[request_.DESCRIPTOR.name]
    method = V1_METHODS[v1_method]
    assert method is not None
    assert params_from_v1(v1_method, MessageToDict(request_)) == (method, expected)
    ours = mesh_request(method, expected).params
    theirs = METHOD_PARAMS[method].model_validate(compat_params(sdk_conversion(request_, 1)))
    if v1_method == "GetTask" and request_.HasField("history_length"):
        theirs.history_length = 0  # a2a-sdk drops 0 ("0.3 reads 0 as unlimited"); the mesh reads 0 as none, like 1.0
    if v1_method == "CreateTaskPushNotificationConfig":
        theirs.push_notification_config.a2a_version = "1.0"  # the mesh's mark: the webhook reads 1.0
    assert ours == theirs


def test_proto_json_spellings_a2a_sdk_accepts() -> None:
    """snake_case names, enum numbers, integers as strings, null and unknown members: as ParseDict."""
    raw = {
        "tenant": "acme",
        "message": {
            "message_id": "m",
            "role": 1,
            "parts": [{"text": "hi", "url": None}, {"raw": "-_8"}],
            "context_id": None,
            "futureField": {"x": 1},
        },
        "configuration": {"history_length": "3", "return_immediately": False, "accepted_output_modes": []},
    }
    canonical = MessageToDict(ParseDict(raw, pb.SendMessageRequest(), ignore_unknown_fields=True))
    assert params_from_v1("SendMessage", raw) == params_from_v1("SendMessage", canonical)
    assert params_from_v1("SendMessage", raw)[1]["message"]["parts"][1]["file"] == {"bytes": "+/8="}


DROP: Any = object()


def send(parts: Any = None, configuration: Any = None, **message: Any) -> dict[str, Any]:
    """Valid SendMessage params but for the given message members (``DROP``: left out)."""
    msg = {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}] if parts is None else parts, **message}
    params: dict[str, Any] = {"message": {k: v for k, v in msg.items() if v is not DROP}}
    if configuration is not None:
        params["configuration"] = configuration
    return params


BAD_PARAMS = [
    ("SendMessage", [], "params"),
    ("SendMessage", {}, "params.message"),
    ("SendMessage", {"message": "hi"}, "params.message"),
    ("SendMessage", send(messageId=DROP), "params.message.messageId"),
    ("SendMessage", send(role=DROP), "params.message.role"),
    ("SendMessage", send(role="user"), "params.message.role"),
    ("SendMessage", send(parts=[]), "params.message.parts"),
    ("SendMessage", send(parts=[{"text": "a"}, {}]), "params.message.parts.1"),
    ("SendMessage", send(parts=[{"text": "a", "data": 1}]), "params.message.parts.0"),
    ("SendMessage", send(parts=[{"raw": "%%%"}]), "params.message.parts.0.raw"),
    ("SendMessage", send(parts=[{"text": 5}]), "params.message.parts.0.text"),
    ("SendMessage", send(parts=["a"]), "params.message.parts.0"),
    ("SendMessage", send(referenceTaskIds=["t", 3]), "params.message.referenceTaskIds.1"),
    ("SendMessage", send(metadata=[1]), "params.message.metadata"),
    ("SendMessage", send(configuration={"historyLength": -1}), "params.configuration.historyLength"),
    ("SendMessage", send(configuration={"returnImmediately": "true"}), "params.configuration.returnImmediately"),
    ("SendMessage", send(configuration={"taskPushNotificationConfig": {"token": "t"}}),
     "params.configuration.taskPushNotificationConfig.url"),
    ("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "https://h", "authentication": {"credentials": "c"}},
     "params.authentication.scheme"),
    ("CreateTaskPushNotificationConfig", {"url": "https://h"}, "params.taskId"),
    ("GetTask", {"historyLength": 2}, "params.id"),
    ("GetTask", {"id": "t", "historyLength": "two"}, "params.historyLength"),
    ("GetTask", {"id": "t", "historyLength": 2**31}, "params.historyLength"),
    ("CancelTask", {"id": 5}, "params.id"),
    ("GetTaskPushNotificationConfig", {"taskId": "t"}, "params.id"),
    ("DeleteTaskPushNotificationConfig", {"id": "c"}, "params.taskId"),
    ("ListTaskPushNotificationConfigs", {}, "params.taskId"),
]  # fmt: skip


@pytest.mark.parametrize(("method", "params", "path"), BAD_PARAMS)
def test_bad_params_name_the_member(method: str, params: Any, path: str) -> None:
    with pytest.raises(InvalidParams) as info:
        params_from_v1(method, params)
    error = info.value.data["errors"][0]
    assert error["path"] == path
    assert info.value.error.message.startswith(f"invalid params for {method}: {path}: ")
    assert info.value.data["method"] == method


def test_missing_params_read_as_empty_like_a2a_sdk() -> None:
    with pytest.raises(InvalidParams, match=r"params\.id: required"):
        params_from_v1("GetTask", None)


# -- property: 1.0 message -> 0.3 -> 1.0 is the identity

_keys = st.text(alphabet="abcxyz", min_size=1, max_size=4)  # never a2a-sdk's data_part_compat key
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=8,
)
_objects = st.dictionaries(_keys, _json, min_size=1, max_size=3)
_ids = st.text(alphabet="abc-123", min_size=1, max_size=8)
_maybe = st.none() | st.text(min_size=1, max_size=10)


@st.composite
def v1_parts(draw: st.DrawFn) -> pb.Part:
    kind = draw(st.sampled_from(["text", "raw", "url", "data"]))
    content: Any = {
        "text": st.text(max_size=20),
        "raw": st.binary(max_size=20),
        "url": st.text(min_size=1, max_size=20),
        "data": _json,
    }[kind]
    part = pb.Part(**{kind: draw(content)}) if kind != "data" else pb.Part(data=value(draw(content)))
    if media_type := draw(_maybe):
        part.media_type = media_type
    if filename := draw(_maybe):
        part.filename = filename
    if metadata := draw(st.none() | _objects):
        part.metadata.CopyFrom(struct(metadata))
    return part


@st.composite
def v1_messages(draw: st.DrawFn) -> pb.Message:
    message = pb.Message(
        message_id=draw(_ids),
        role=draw(st.sampled_from([pb.Role.ROLE_USER, pb.Role.ROLE_AGENT])),
        parts=draw(st.lists(v1_parts(), min_size=1, max_size=4)),
        context_id=draw(st.just("") | _ids),
        task_id=draw(st.just("") | _ids),
        reference_task_ids=draw(st.lists(_ids, max_size=2)),
        extensions=draw(st.lists(_ids, max_size=2)),
    )
    if metadata := draw(st.none() | _objects):
        message.metadata.CopyFrom(struct(metadata))
    return message


@settings(max_examples=150, deadline=None)
@given(message=v1_messages())
def test_v1_message_survives_the_mesh(message: pb.Message) -> None:
    method, params = params_from_v1("SendStreamingMessage", MessageToDict(pb.SendMessageRequest(message=message)))
    parsed = mesh_request(method, params).params
    assert isinstance(parsed, MessageSendParams)
    assert ParseDict(message_v1(parsed.message), pb.Message()) == message


# ================================================================ results 0.3 -> 1.0


def agent_message(text: str = "done", **fields: Any) -> Message:
    return Message(message_id="a-1", role="agent", parts=[TextPart(text=text)], **fields)


def mesh_task(state: TaskState = TaskState.completed, task_id: str = "t-1", **fields: Any) -> Task:
    fields.setdefault("status", TaskStatus(state=state))
    return Task(id=task_id, context_id="ctx-1", **fields)


def every_part_kind() -> list[Any]:
    return [
        TextPart(text="plain", metadata={"m": 1}),
        FilePart(file=FileWithBytes(bytes=base64.b64encode(b"\x00\xff").decode(), mime_type="x/y", name="b.bin")),
        FilePart(file=FileWithUri(uri="https://f.example/a.png", mime_type="image/png", name="a.png")),
        FilePart(file=FileWithUri(uri="https://f.example/b")),
        DataPart(data={"a": [1, 2]}),
        DataPart(data={"value": "scalar"}, metadata={"data_part_compat": True, "keep": "me"}),
    ]


def check_parts(parts: Any) -> None:
    text, raw, url, bare_url, data, scalar = parts
    assert (text.text, MessageToDict(text.metadata)) == ("plain", {"m": 1.0})
    assert (raw.raw, raw.media_type, raw.filename) == (b"\x00\xff", "x/y", "b.bin")
    assert (url.url, url.media_type, url.filename) == ("https://f.example/a.png", "image/png", "a.png")
    assert (bare_url.url, bare_url.media_type, bare_url.filename) == ("https://f.example/b", "", "")
    assert MessageToDict(data.data) == {"a": [1.0, 2.0]}
    assert (MessageToDict(scalar.data), MessageToDict(scalar.metadata)) == ("scalar", {"keep": "me"})


@pytest.mark.parametrize("state", list(TaskState))
def test_every_state_parses_as_the_1_0_enum(state: TaskState) -> None:
    parsed = ParseDict(task_v1(mesh_task(state)), pb.Task())
    expected = "TASK_STATE_UNSPECIFIED" if state is TaskState.unknown else f"TASK_STATE_{state.name.upper()}"
    assert pb.TaskState.Name(parsed.status.state) == expected


def test_task_with_every_part_kind_history_and_artifacts() -> None:
    task = mesh_task(
        TaskState.input_required,
        history=[Message(message_id="u-1", role="user", parts=every_part_kind(), task_id="t-1", context_id="ctx-1")],
        artifacts=[
            Artifact(
                artifact_id="art-1",
                name="out",
                description="d",
                parts=every_part_kind(),
                extensions=["urn:e"],
                metadata={"x": "y"},
            )
        ],
        metadata={"origin": "mesh"},
    )
    task.status = TaskStatus(
        state=TaskState.input_required,
        message=agent_message("which one?"),
        timestamp="2026-11-01T12:00:00.120000+00:00",
    )
    out = task_v1(task.to_wire_dict())  # decoded JSON as it comes off the wire
    assert "kind" not in json.dumps(out)
    parsed = ParseDict(out, pb.Task())
    assert (parsed.id, parsed.context_id, MessageToDict(parsed.metadata)) == ("t-1", "ctx-1", {"origin": "mesh"})
    assert parsed.status.state == pb.TaskState.TASK_STATE_INPUT_REQUIRED
    assert parsed.status.timestamp.ToJsonString() == "2026-11-01T12:00:00.120Z" == out["status"]["timestamp"]
    assert parsed.status.message.role == pb.Role.ROLE_AGENT and parsed.status.message.parts[0].text == "which one?"
    assert parsed.history[0].role == pb.Role.ROLE_USER
    check_parts(parsed.history[0].parts)
    artifact = parsed.artifacts[0]
    assert (artifact.artifact_id, artifact.name, artifact.description, list(artifact.extensions)) == (
        "art-1",
        "out",
        "d",
        ["urn:e"],
    )
    check_parts(artifact.parts)


def test_send_message_result_is_task_or_message() -> None:
    task = ParseDict(send_message_result_v1(mesh_task()), pb.SendMessageResponse())
    assert task.WhichOneof("payload") == "task" and task.task.id == "t-1"
    message = ParseDict(send_message_result_v1(agent_message().to_wire_dict()), pb.SendMessageResponse())
    assert message.WhichOneof("payload") == "message" and message.message.parts[0].text == "done"
    event = TaskStatusUpdateEvent(task_id="t", context_id="c", status=TaskStatus(state="working"), final=False)
    with pytest.raises(InvalidAgentResponse, match="expected 'task' or 'message'"):
        send_message_result_v1(event)


def test_stream_responses_of_every_kind() -> None:
    status = TaskStatusUpdateEvent(
        task_id="t-1",
        context_id="ctx-1",
        final=True,
        metadata={"seq": 3},
        status=TaskStatus(state="completed", timestamp="2026-11-01T12:00:00Z"),
    )
    chunk = TaskArtifactUpdateEvent(
        task_id="t-1",
        context_id="ctx-1",
        append=True,
        last_chunk=False,
        artifact=Artifact(artifact_id="a", parts=[TextPart(text="more")]),
    )
    for event, member in [
        (mesh_task(), "task"),
        (agent_message(), "message"),
        (status, "statusUpdate"),
        (chunk, "artifactUpdate"),
    ]:
        out = stream_response_v1(event.to_wire_dict())
        assert list(out) == [member] and "final" not in out[member] and "kind" not in out[member]
        parsed = ParseDict(out, pb.StreamResponse())
        assert MessageToDict(parsed) == out
    parsed_chunk = ParseDict(stream_response_v1(chunk), pb.StreamResponse()).artifact_update
    assert (parsed_chunk.append, parsed_chunk.last_chunk, parsed_chunk.artifact.parts[0].text) == (True, False, "more")


@pytest.mark.parametrize(
    ("given_", "expected"),
    [
        ("2026-11-01T12:00:00+00:00", "2026-11-01T12:00:00Z"),
        ("2026-11-01T12:00:00.123456+00:00", "2026-11-01T12:00:00.123456Z"),
        ("2026-11-01T12:00:00.5Z", "2026-11-01T12:00:00.500Z"),
        ("2026-11-01T14:00:00.000001+02:00", "2026-11-01T12:00:00.000001Z"),
        ("2026-11-01T12:00:00.123456789Z", "2026-11-01T12:00:00.123456Z"),
        ("2026-11-01T12:00:00", "2026-11-01T12:00:00Z"),  # naive: the mesh writes UTC
        ("yesterday", None),
        ("", None),
    ],
)
def test_timestamps_become_rfc_3339_utc(given_: str, expected: str | None) -> None:
    assert timestamp_v1(given_) == expected
    if expected is not None:
        stamp = Timestamp()
        stamp.FromJsonString(expected)
        assert stamp.ToJsonString() == expected  # exactly protobuf's own spelling
    status = TaskStatus(state="working", timestamp=given_ or None)
    assert ("timestamp" in task_v1(mesh_task(status=status))["status"]) is (expected is not None)


@pytest.mark.parametrize(
    ("given_", "expected"), [("_-8", "/+8="), ("AP8", "AP8="), ("AP\n8=", "AP8="), ("AP8=", "AP8=")]
)
def test_file_bytes_become_standard_base64(given_: str, expected: str) -> None:
    part = FilePart(file=FileWithBytes(bytes=given_))
    out = task_v1(mesh_task(artifacts=[Artifact(artifact_id="a", parts=[part])]))
    assert out["artifacts"][0]["parts"][0]["raw"] == expected


def test_invalid_agent_answers_raise_invalid_agent_response() -> None:
    bad_bytes = mesh_task(
        history=[Message(message_id="m", role="agent", parts=[FilePart(file=FileWithBytes(bytes="%%"))])]
    )
    with pytest.raises(InvalidAgentResponse, match=r"result\.history\.0\.parts\.0\.file\.bytes"):
        task_v1(bad_bytes)
    with pytest.raises(InvalidAgentResponse, match=r"result\.status"):
        task_v1({"kind": "task", "id": "t", "contextId": "c"})
    with pytest.raises(InvalidAgentResponse, match=r"result\.0\.pushNotificationConfig"):
        push_configs_v1([{"taskId": "t"}])


# -- StreamToV1: the 1.0 stream rules over the mesh's 0.3 stream


def status_event(state: str, final: bool = False) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(task_id="t-1", context_id="ctx-1", status=TaskStatus(state=state), final=final)


def artifact_event(text: str) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent(
        task_id="t-1", context_id="ctx-1", artifact=Artifact(artifact_id="a", parts=[TextPart(text=text)])
    )


def run_stream(items: list[Any]) -> list[tuple[str, str | None]]:
    """Feed items; (member, state or text) of every StreamResponse, ``|`` where it closed."""
    stream, out = StreamToV1(), []
    for item in items:
        for response in stream.feed(item):
            member, body = next(iter(response.items()))
            ParseDict(response, pb.StreamResponse())
            state = body.get("status", {}).get("state") or (body.get("artifact") or body)["parts"][0].get("text")
            out.append((member, state))
        if stream.closed and ("|", None) not in out:
            out.append(("|", None))
    return out


def test_stream_begins_with_a_task_made_from_the_first_status() -> None:
    items = [
        status_event("submitted"),
        status_event("working"),
        artifact_event("hi"),
        status_event("completed", final=True),
        mesh_task(TaskState.completed),
    ]
    assert run_stream(items) == [
        ("task", "TASK_STATE_SUBMITTED"),
        ("statusUpdate", "TASK_STATE_WORKING"),
        ("artifactUpdate", "hi"),
        ("statusUpdate", "TASK_STATE_COMPLETED"),
        ("|", None),  # the mesh's closing Task on the reply topic is not sent
    ]


def test_stream_beginning_with_an_artifact_gets_a_working_task_first() -> None:
    assert run_stream([artifact_event("x"), status_event("failed", final=True)]) == [
        ("task", "TASK_STATE_WORKING"),
        ("artifactUpdate", "x"),
        ("statusUpdate", "TASK_STATE_FAILED"),
        ("|", None),
    ]


def test_stream_ends_at_an_interrupted_state() -> None:
    assert run_stream(
        [status_event("working"), status_event("input-required", final=True), status_event("working")]
    ) == [("task", "TASK_STATE_WORKING"), ("statusUpdate", "TASK_STATE_INPUT_REQUIRED"), ("|", None)]


def test_resubscribe_stream_passes_the_task_snapshot_first() -> None:
    assert run_stream([mesh_task(TaskState.working), status_event("completed", final=True), mesh_task()]) == [
        ("task", "TASK_STATE_WORKING"),
        ("statusUpdate", "TASK_STATE_COMPLETED"),
        ("|", None),
    ]
    assert run_stream([mesh_task(TaskState.auth_required), mesh_task(TaskState.auth_required)]) == [
        ("task", "TASK_STATE_AUTH_REQUIRED"),
        ("|", None),
    ]


def test_message_only_stream_is_one_message() -> None:
    assert run_stream([agent_message("hi"), status_event("working")]) == [("message", "hi"), ("|", None)]


# -- push notification configs


def test_push_config_results_are_flat() -> None:
    config = TaskPushNotificationConfig.model_validate(
        {
            "taskId": "t-1",
            "pushNotificationConfig": {
                "url": "https://h.example",
                "id": "c-1",
                "token": "tk",
                "authentication": {"schemes": ["Bearer", "Basic"], "credentials": "s"},
            },
        }
    )
    out = push_config_v1(config.to_wire_dict())
    assert out == {
        "taskId": "t-1",
        "id": "c-1",
        "url": "https://h.example",
        "token": "tk",
        "authentication": {"scheme": "Bearer", "credentials": "s"},
    }
    assert ParseDict(out, pb.TaskPushNotificationConfig()) == compat.to_core_task_push_notification_config(
        types_v03.TaskPushNotificationConfig.model_validate(config.to_wire_dict())
    )
    listed = ParseDict(push_configs_v1([config, config.to_wire_dict()]), pb.ListTaskPushNotificationConfigsResponse())
    assert [c.id for c in listed.configs] == ["c-1", "c-1"]
    assert (
        result_v1("CreateTaskPushNotificationConfig", config)
        == out
        == result_v1("GetTaskPushNotificationConfig", config)
    )
    assert result_v1("ListTaskPushNotificationConfigs", []) == {"configs": []}
    assert result_v1("DeleteTaskPushNotificationConfig", None) is None
    with pytest.raises(ValueError, match="StreamToV1"):
        result_v1("SendStreamingMessage", mesh_task())


# -- property: our 0.3 -> 1.0 equals a2a-sdk's own compat conversion

_stamps = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC))
_meta = st.none() | _objects


@st.composite
def v03_parts(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["text", "bytes", "uri", "data", "scalar"]))
    metadata = draw(_meta)
    if kind == "text":
        return TextPart(text=draw(st.text(max_size=10)), metadata=metadata)
    if kind == "data":
        return DataPart(data=draw(_objects), metadata=metadata)
    if kind == "scalar":  # a 1.0 non-object data, wrapped by a2a-sdk's rule
        return DataPart(data={"value": draw(_json)}, metadata={**(metadata or {}), "data_part_compat": True})
    names = {"mime_type": draw(_maybe), "name": draw(_maybe)}
    if kind == "bytes":
        return FilePart(
            file=FileWithBytes(bytes=base64.b64encode(draw(st.binary(max_size=12))).decode(), **names),
            metadata=metadata,
        )
    return FilePart(file=FileWithUri(uri=draw(st.text(min_size=1, max_size=10)), **names), metadata=metadata)


@st.composite
def v03_messages(draw: st.DrawFn) -> Message:
    return Message(
        message_id=draw(_ids),
        role=draw(st.sampled_from(["user", "agent"])),
        parts=draw(st.lists(v03_parts(), min_size=1, max_size=3)),
        context_id=draw(st.none() | _ids),
        task_id=draw(st.none() | _ids),
        reference_task_ids=draw(st.none() | st.lists(_ids, min_size=1, max_size=2)),
        extensions=draw(st.none() | st.lists(_ids, min_size=1, max_size=2)),
        metadata=draw(_meta),
    )


@st.composite
def v03_statuses(draw: st.DrawFn) -> TaskStatus:
    stamp = draw(st.none() | _stamps)
    return TaskStatus(
        state=draw(st.sampled_from(list(TaskState))),
        message=draw(st.none() | v03_messages()),
        timestamp=None if stamp is None else stamp.isoformat(),
    )


@st.composite
def v03_artifacts(draw: st.DrawFn) -> Artifact:
    return Artifact(
        artifact_id=draw(_ids),
        parts=draw(st.lists(v03_parts(), max_size=3)),
        name=draw(_maybe),
        description=draw(_maybe),
        metadata=draw(_meta),
        extensions=draw(st.none() | st.lists(_ids, min_size=1, max_size=2)),
    )


@st.composite
def v03_results(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["task", "message", "status-update", "artifact-update"]))
    if kind == "message":
        return draw(v03_messages())
    if kind == "task":
        return Task(
            id=draw(_ids),
            context_id=draw(_ids),
            status=draw(v03_statuses()),
            history=draw(st.none() | st.lists(v03_messages(), max_size=2)),
            artifacts=draw(st.none() | st.lists(v03_artifacts(), max_size=2)),
            metadata=draw(_meta),
        )
    if kind == "status-update":
        return TaskStatusUpdateEvent(
            task_id=draw(_ids),
            context_id=draw(_ids),
            status=draw(v03_statuses()),
            final=draw(st.booleans()),
            metadata=draw(_meta),
        )
    return TaskArtifactUpdateEvent(
        task_id=draw(_ids),
        context_id=draw(_ids),
        artifact=draw(v03_artifacts()),
        append=draw(st.none() | st.booleans()),
        last_chunk=draw(st.none() | st.booleans()),
        metadata=draw(_meta),
    )


@settings(max_examples=150, deadline=None)
@given(result=v03_results())
def test_results_match_a2a_sdk_compat_conversion(result: Any) -> None:
    out = stream_response_v1(result.to_wire_dict())
    ours = ParseDict(out, pb.StreamResponse())
    sdk_result = types_v03.SendStreamingMessageSuccessResponse.model_validate(
        {"id": 1, "result": result.to_wire_dict()}
    )
    assert ours == compat.to_core_stream_response(sdk_result)
    # and it is the very JSON a2a-sdk's server writes (but for an explicit TASK_STATE_UNSPECIFIED)
    if "TASK_STATE_UNSPECIFIED" not in json.dumps(out):
        assert MessageToDict(ours) == out


# ================================================================ ListTasks


def test_list_tasks_query_reads_every_member() -> None:
    request = pb.ListTasksRequest(
        context_id="ctx", status=pb.TaskState.TASK_STATE_WORKING, page_size=10, history_length=2, include_artifacts=True
    )
    request.status_timestamp_after.FromJsonString("2026-11-01T12:00:00Z")
    assert list_tasks_query(MessageToDict(request)) == ListTasksQuery(
        context_id="ctx",
        status=TaskState.working,
        page_size=10,
        history_length=2,
        include_artifacts=True,
        status_timestamp_after=datetime(2026, 11, 1, 12, tzinfo=UTC),
    )
    assert list_tasks_query({}) == ListTasksQuery() == list_tasks_query(None)
    assert ListTasksQuery().page_size == 50


@pytest.mark.parametrize(
    ("params", "path"),
    [
        ({"pageSize": 0}, "params.pageSize"),
        ({"pageSize": 101}, "params.pageSize"),
        ({"status": "completed"}, "params.status"),
        ({"pageToken": "garbage"}, "params.pageToken"),
        ({"statusTimestampAfter": "2026-11-01T12:00:00"}, "params.statusTimestampAfter"),
        ({"historyLength": -1}, "params.historyLength"),
    ],
)
def test_list_tasks_bad_params(params: dict[str, Any], path: str) -> None:
    with pytest.raises(InvalidParams) as info:
        list_tasks_query(params)
    assert info.value.data["errors"][0]["path"] == path


def records() -> list[Task]:
    start = datetime(2026, 11, 1, 12, tzinfo=UTC)
    tasks = []
    for i in range(7):
        state = [TaskState.working, TaskState.completed][i % 2]
        history = [agent_message(f"m{j}") for j in range(3)]
        artifacts = [Artifact(artifact_id="a", parts=[TextPart(text="x")])]
        stamp = None if i == 6 else (start + timedelta(minutes=i)).isoformat()
        tasks.append(
            Task(
                id=f"t-{i}",
                context_id="ctx-a" if i < 4 else "ctx-b",
                history=history,
                artifacts=artifacts,
                status=TaskStatus(state=state, timestamp=stamp),
            )
        )
    return tasks


def test_list_tasks_pages_newest_first_and_trims() -> None:
    tasks, seen, token = records(), [], None
    while True:
        params: dict[str, Any] = {"pageSize": 3, "historyLength": 1}
        if token:
            params["pageToken"] = token
        out = list_tasks_result_v1(list_tasks_query(params), [t.to_wire_dict() for t in tasks])
        page = ParseDict(out, pb.ListTasksResponse())
        assert (page.total_size, page.page_size) == (7, 3)
        assert all(len(t.history) == 1 and not t.artifacts for t in page.tasks)
        seen += [t.id for t in page.tasks]
        token = out["nextPageToken"]
        if not token:
            break
    assert seen == ["t-5", "t-4", "t-3", "t-2", "t-1", "t-0", "t-6"]  # no timestamp: last


def test_list_tasks_filters() -> None:
    def ids(**params: Any) -> list[str]:
        return [t["id"] for t in list_tasks_result_v1(list_tasks_query(params), records())["tasks"]]

    assert ids(contextId="ctx-b") == ["t-5", "t-4", "t-6"]
    assert ids(status="TASK_STATE_COMPLETED") == ["t-5", "t-3", "t-1"]
    assert ids(statusTimestampAfter="2026-11-01T12:04:00Z") == ["t-5", "t-4"]
    full = list_tasks_result_v1(list_tasks_query({"includeArtifacts": True, "historyLength": 0}), records())
    assert all("artifacts" in t and "history" not in t for t in full["tasks"])
    empty = list_tasks_result_v1(ListTasksQuery(context_id="none"), records())
    assert empty == {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}


# ================================================================ agent card


def card_0_3(*, sdk_comparable: bool = False) -> dict[str, Any]:
    flows: dict[str, Any] = {"clientCredentials": {"tokenUrl": "https://auth.example/token", "scopes": {"a2a": "use"}}}
    if not sdk_comparable:  # 1.0 allows one flow; a2a-sdk would keep the last, we keep the preferred one
        flows["authorizationCode"] = {
            "authorizationUrl": "https://auth.example/authorize",
            "tokenUrl": "https://auth.example/token",
            "scopes": {"a2a": "use"},
        }
    card: dict[str, Any] = {
        "name": "echo",
        "description": "Echoes",
        "version": "1.2.0",
        "url": "mqtt://mesh/acme/a2a/v1/agent/request/echo",
        "preferredTransport": "MQTT",
        "protocolVersion": "0.3.0",
        "additionalInterfaces": [{"url": "mqtt://elsewhere", "transport": "MQTT"}],
        "provider": {"organization": "Acme", "url": "https://acme.example"},
        "documentationUrl": "https://acme.example/docs",
        "iconUrl": "https://acme.example/icon.png",
        "capabilities": {
            "streaming": True,
            "pushNotifications": True,
            "stateTransitionHistory": True,
            "extensions": [{"uri": "urn:ext:x", "description": "x", "required": False, "params": {"p": 1}}],
        },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [
            {
                "id": "echo",
                "name": "Echo",
                "description": "echo back",
                "tags": ["echo"],
                "examples": ["hi"],
                "inputModes": ["text/plain"],
                "outputModes": ["text/plain"],
                "security": [{"oauth": ["a2a"]}],
            }
        ],
        "securitySchemes": {
            "key": {"type": "apiKey", "name": "X-API-Key", "in": "header", "description": "key"},
            "bearer": {"type": "http", "scheme": "bearer", "bearerFormat": "JWT"},
            "oauth": {"type": "oauth2", "flows": flows, "oauth2MetadataUrl": "https://auth.example/.well-known"},
            "oidc": {"type": "openIdConnect", "openIdConnectUrl": "https://auth.example/.well-known/openid"},
            "mtls": {"type": "mutualTLS"},
        },
        "security": [{"bearer": []}, {"oauth": ["a2a"]}],
    }
    if not sdk_comparable:
        card["supportsAuthenticatedExtendedCard"] = True
        card["signatures"] = [{"protected": "e30", "signature": "c2ln"}]
    return card


def test_served_card_reads_as_1_0_in_a2a_sdk() -> None:
    served = served_card(card_0_3(), url_v1=URL_V1, url_v0_3=URL_V03)
    card = parse_agent_card(copy.deepcopy(served))  # what A2ACardResolver does with the JSON
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in card.supported_interfaces] == [
        (URL_V1, "JSONRPC", "1.0"),
        (URL_V03, "JSONRPC", "0.3"),
    ]
    best = ClientFactory._find_best_interface(list(card.supported_interfaces), protocol_bindings=["JSONRPC"])
    assert best is not None and best.url == URL_V1
    assert (card.name, card.version, card.provider.organization, card.icon_url) == (
        "echo",
        "1.2.0",
        "Acme",
        "https://acme.example/icon.png",
    )
    assert card.capabilities.streaming and card.capabilities.push_notifications
    assert not card.capabilities.extended_agent_card and not card.signatures
    schemes = {name: s.WhichOneof("scheme") for name, s in card.security_schemes.items()}
    assert schemes == {
        "key": "api_key_security_scheme",
        "bearer": "http_auth_security_scheme",
        "oauth": "oauth2_security_scheme",
        "oidc": "open_id_connect_security_scheme",
        "mtls": "mtls_security_scheme",
    }
    assert card.security_schemes["key"].api_key_security_scheme.location == "header"
    assert card.security_schemes["oauth"].oauth2_security_scheme.flows.WhichOneof("flow") == "authorization_code"
    assert [list(r.schemes["oauth"].list) for r in card.skills[0].security_requirements] == [["a2a"]]
    assert [sorted(r.schemes) for r in card.security_requirements] == [["bearer"], ["oauth"]]
    # Also as a 1.0 server reads it (no compat mapping): the 1.0 members alone are complete.
    plain = ParseDict(served, pb.AgentCard(), ignore_unknown_fields=True)
    assert plain.supported_interfaces == card.supported_interfaces
    assert plain.security_schemes == card.security_schemes


def test_served_card_reads_as_0_3() -> None:
    served = served_card(card_0_3(), url_v1=None, url_v0_3=URL_V03)
    mesh_card = AgentCard.model_validate(served)
    assert (mesh_card.url, mesh_card.preferred_transport, mesh_card.protocol_version) == (URL_V03, "JSONRPC", "0.3.0")
    assert [(i.url, i.transport) for i in mesh_card.additional_interfaces or []] == [(URL_V03, "JSONRPC")]
    assert mesh_card.security == [{"bearer": []}, {"oauth": ["a2a"]}]
    sdk_03 = types_v03.AgentCard.model_validate(served)  # a2a-sdk's 0.3 client model
    assert sdk_03.url == URL_V03 and sdk_03.capabilities.streaming
    assert sdk_03.security_schemes is not None and set(sdk_03.security_schemes) == set(card_0_3()["securitySchemes"])


def test_served_card_equals_what_a2a_sdk_serves() -> None:
    source = card_0_3(sdk_comparable=True)
    ours = served_card(AgentCard.model_validate(source), url_v1=URL_V1, url_v0_3=URL_V03)
    core = compat.to_core_agent_card(types_v03.AgentCard.model_validate(source))
    del core.supported_interfaces[:]
    core.supported_interfaces.extend(
        [
            pb.AgentInterface(url=URL_V1, protocol_binding="JSONRPC", protocol_version="1.0"),
            pb.AgentInterface(url=URL_V03, protocol_binding="JSONRPC", protocol_version="0.3"),
        ]
    )
    theirs = agent_card_to_dict(core)
    assert parse_agent_card(copy.deepcopy(ours)) == parse_agent_card(copy.deepcopy(theirs))
    # a2a-sdk adds the legacy 0.3 members to its 1.0 card; ours is strict and 0.3 clients get
    # the 0.3 card, with the same security schemes
    assert set(ours) == set(theirs) - {
        "url",
        "preferredTransport",
        "protocolVersion",
        "additionalInterfaces",
        "security",
    }
    ours_0_3 = served_card(AgentCard.model_validate(source), url_v1=None, url_v0_3=URL_V03)
    assert (
        types_v03.AgentCard.model_validate(ours_0_3).security_schemes
        == types_v03.AgentCard.model_validate(theirs).security_schemes
    )


def test_served_card_with_one_url_for_both_versions() -> None:
    card = parse_agent_card(served_card(card_0_3(), url_v1=URL_V1, url_v0_3=URL_V1))
    best = ClientFactory._find_best_interface(list(card.supported_interfaces), ["JSONRPC"], url=URL_V1)
    assert best is not None and best.protocol_version == "1.0"


def test_bad_card_is_invalid_agent_response() -> None:
    with pytest.raises(InvalidAgentResponse, match="invalid agent card"):
        served_card({"name": "x"}, url_v1=URL_V1, url_v0_3=URL_V03)


# ================================================================ errors

SDK_CODES = [
    (cls, code) for cls, code in sdk_errors.JSON_RPC_ERROR_CODE_MAP.items() if cls in sdk_errors.A2A_ERROR_MAPPING
]


@pytest.mark.parametrize(("cls", "code"), SDK_CODES, ids=[cls.__name__ for cls, _ in SDK_CODES])
def test_every_error_code_has_a2a_sdks_reason(cls: type[sdk_errors.A2AError], code: int) -> None:
    ours = error_v1(code, "it broke", {"taskId": "t-1"})
    assert ours == build_error_response(1, cls("it broke", data={"taskId": "t-1"}))["error"]
    info = ours["data"][0]
    assert info["reason"] == sdk_errors.A2A_ERROR_MAPPING[cls].reason
    ParseDict({k: v for k, v in info.items() if k != "@type"}, error_details_pb2.ErrorInfo())  # strict proto shape
    # a2a-sdk's client raises its own exception class for it, with the metadata as data
    raised = JsonRpcTransport._create_jsonrpc_error(object.__new__(JsonRpcTransport), ours)
    assert type(raised) is cls and raised.data == {"taskId": "t-1"}


@pytest.mark.parametrize("code", sorted(EXCEPTION_TYPES))
def test_every_mesh_exception_translates(code: int) -> None:
    exc = EXCEPTION_TYPES[code](data={"taskId": "t-1", "n": 2, "list": ["a"]})
    response = error_response_v1("req-1", exc)
    assert response["id"] == "req-1" and response["error"]["code"] == code
    assert response["error"]["message"] == exc.error.message
    if code == -32700:
        assert response["error"]["data"][0]["reason"] == "UNKNOWN_ERROR"
        assert error_v1(code, "bad JSON") == {"code": -32700, "message": "bad JSON"}  # as a2a-sdk: no data
    else:
        assert response["error"]["data"][0]["reason"] == a2a_v1.ERROR_REASONS[code]
    metadata = response["error"]["data"][0]["metadata"]
    assert metadata == {"taskId": "t-1", "n": "2", "list": '["a"]'}  # ErrorInfo.metadata is map<string, string>
    error_response_v1(None, exc.error)  # the agent's error object works the same


def test_invalid_params_also_carry_a_bad_request() -> None:
    with pytest.raises(InvalidParams) as info:
        params_from_v1("SendMessage", {"message": {"messageId": "m", "parts": [{"text": "a"}]}})
    error = error_response_v1(1, info.value)["error"]
    violations = error["data"][1]
    assert violations["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    parsed = ParseDict({"fieldViolations": violations["fieldViolations"]}, error_details_pb2.BadRequest())
    assert [(v.field, v.description) for v in parsed.field_violations] == [
        ("message.role", "required: ROLE_USER or ROLE_AGENT")
    ]


def test_other_codes_get_a_reason_only_when_given() -> None:
    assert error_v1(-32000, "Agent not found") == {"code": -32000, "message": "Agent not found"}
    error = error_v1(-32000, "Agent not found", {"availableAgents": ["a"]}, reason="AGENT_NOT_FOUND", domain="mesh")
    assert error["data"] == [
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "AGENT_NOT_FOUND",
            "domain": "mesh",
            "metadata": {"availableAgents": '["a"]'},
        }
    ]


# ================================================================ a2a-sdk's client against a fake gateway


class FakeGateway:
    """What the HTTP gateway does with a 1.0 JSON-RPC request, built from the functions under test.

    ``agent`` plays the mesh: it gets the 0.3 request as an agent parses it and returns the 0.3
    result (for streams: the list of items, events first, then the final result) or raises.
    """

    def __init__(self, agent: Callable[[ParsedRequest], Any], tasks: list[Task] | None = None) -> None:
        self.agent, self.tasks = agent, tasks or []
        self.bodies: list[dict[str, Any]] = []
        self.versions: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        method, rid = body["method"], body["id"]
        try:
            self.versions.append(negotiate_version(method, request.headers.get("A2A-Version")))
            if method == "ListTasks":
                return self.reply(rid, list_tasks_result_v1(list_tasks_query(body.get("params")), self.tasks))
            target, params = params_from_v1(method, body.get("params"))
            answer = self.agent(mesh_request(target, params))
            if method not in V1_STREAMING_METHODS:
                return self.reply(rid, result_v1(method, answer))
            stream, events = StreamToV1(), []
            for item in answer:
                events += [json.dumps({"jsonrpc": "2.0", "id": rid, "result": out}) for out in stream.feed(item)]
            sse = "".join(f"data: {event}\n\n" for event in events)
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=sse.encode())
        except RpcError as exc:
            return httpx.Response(200, json=error_response_v1(rid, exc))

    @staticmethod
    def reply(rid: Any, result: Any) -> httpx.Response:
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": rid, "result": result})


def echo_agent(request: ParsedRequest) -> Any:
    params = request.params
    done = Task(
        id="t-1",
        context_id="ctx-1",
        status=TaskStatus(state="completed", timestamp="2026-11-01T12:00:00Z"),
        artifacts=[Artifact(artifact_id="echo", parts=[TextPart(text="echo")])],
    )
    if request.method is Method.message_send:
        assert isinstance(params, MessageSendParams)
        if params.message.metadata == {"reply": "message"}:
            return agent_message("direct answer")
        return done
    if request.method is Method.message_stream:
        return [status_event("working"), artifact_event("echo"), status_event("completed", final=True), done]
    if request.method is Method.tasks_resubscribe:
        if params.id == "t-done":  # type: ignore[union-attr]
            raise UnsupportedOperation("task 't-done' is completed", data={"taskId": "t-done"})
        return [mesh_task(TaskState.working), status_event("completed", final=True), done]
    if request.method in (Method.tasks_get, Method.tasks_cancel):
        if params.id != "t-1":  # type: ignore[union-attr]
            raise TaskNotFound(f"no task {params.id!r}", data={"taskId": params.id})  # type: ignore[union-attr]
        return (
            done.model_copy(update={"status": TaskStatus(state="canceled")})
            if request.method is Method.tasks_cancel
            else done
        )
    if request.method in (Method.push_config_set, Method.push_config_get):
        config = (
            params
            if request.method is Method.push_config_set
            else TaskPushNotificationConfig(
                task_id="t-1", push_notification_config={"url": "https://h.example", "id": "c-1"}
            )
        )
        return config.to_wire_dict()  # type: ignore[union-attr]
    if request.method is Method.push_config_list:
        return [{"taskId": "t-1", "pushNotificationConfig": {"url": "https://h.example", "id": "c-1"}}]
    return None  # delete


@pytest.fixture
async def sdk_client() -> AsyncIterator[Callable[..., Client]]:
    clients: list[httpx.AsyncClient] = []

    def make(gateway: FakeGateway, *, streaming: bool = False) -> Client:
        http = httpx.AsyncClient(transport=httpx.MockTransport(gateway))
        clients.append(http)
        card = parse_agent_card(served_card(card_0_3(), url_v1=URL_V1, url_v0_3=URL_V03))
        return ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card)

    yield make
    for http in clients:
        await http.aclose()


def user_message(text: str, **fields: Any) -> pb.Message:
    return pb.Message(message_id="m-1", role=pb.Role.ROLE_USER, parts=[pb.Part(text=text)], **fields)


async def test_sdk_client_unary_methods(sdk_client: Callable[..., Client]) -> None:
    gateway = FakeGateway(echo_agent)
    client = sdk_client(gateway)
    events = [e async for e in client.send_message(pb.SendMessageRequest(message=user_message("hi")))]
    assert [e.task.artifacts[0].parts[0].text for e in events] == ["echo"]
    assert gateway.bodies[0]["method"] == "SendMessage" and gateway.versions == ["1.0"]
    direct = pb.SendMessageRequest(message=user_message("hi", metadata=struct({"reply": "message"})))
    assert [e.message.parts[0].text async for e in client.send_message(direct)] == ["direct answer"]
    task = await client.get_task(pb.GetTaskRequest(id="t-1", history_length=3))
    assert task.status.state == pb.TaskState.TASK_STATE_COMPLETED
    assert task.status.timestamp.ToJsonString() == "2026-11-01T12:00:00Z"
    canceled = await client.cancel_task(pb.CancelTaskRequest(id="t-1"))
    assert canceled.status.state == pb.TaskState.TASK_STATE_CANCELED
    push = pb.TaskPushNotificationConfig(
        task_id="t-1",
        url="https://h.example",
        token="tk",
        authentication=pb.AuthenticationInfo(scheme="Bearer", credentials="s"),
    )
    assert await client.create_task_push_notification_config(push) == push
    got = await client.get_task_push_notification_config(
        pb.GetTaskPushNotificationConfigRequest(task_id="t-1", id="c-1")
    )
    assert (got.task_id, got.id, got.url) == ("t-1", "c-1", "https://h.example")
    listed = await client.list_task_push_notification_configs(pb.ListTaskPushNotificationConfigsRequest(task_id="t-1"))
    assert [c.id for c in listed.configs] == ["c-1"]
    await client.delete_task_push_notification_config(
        pb.DeleteTaskPushNotificationConfigRequest(task_id="t-1", id="c-1")
    )
    assert [b["method"] for b in gateway.bodies][-4:] == [
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ]


async def test_sdk_client_streams(sdk_client: Callable[..., Client]) -> None:
    client = sdk_client(FakeGateway(echo_agent), streaming=True)
    events = [e async for e in client.send_message(pb.SendMessageRequest(message=user_message("hi")))]
    assert [e.WhichOneof("payload") for e in events] == ["task", "artifact_update", "status_update"]
    assert events[0].task.status.state == pb.TaskState.TASK_STATE_WORKING
    assert events[-1].status_update.status.state == pb.TaskState.TASK_STATE_COMPLETED
    resumed = [e async for e in client.subscribe(pb.SubscribeToTaskRequest(id="t-1"))]
    assert [e.WhichOneof("payload") for e in resumed] == ["task", "status_update"]
    with pytest.raises(sdk_errors.UnsupportedOperationError) as info:
        [e async for e in client.subscribe(pb.SubscribeToTaskRequest(id="t-done"))]
    assert info.value.data == {"taskId": "t-done"}


async def test_sdk_client_errors_and_list_tasks(sdk_client: Callable[..., Client]) -> None:
    client = sdk_client(FakeGateway(echo_agent, tasks=records()))
    with pytest.raises(sdk_errors.TaskNotFoundError) as info:
        await client.get_task(pb.GetTaskRequest(id="nope"))
    assert info.value.data == {"taskId": "nope"}
    with pytest.raises(sdk_errors.InvalidParamsError):
        await client.get_task(pb.GetTaskRequest())
    page = await client.list_tasks(pb.ListTasksRequest(context_id="ctx-a", page_size=2))
    assert ([t.id for t in page.tasks], page.total_size, bool(page.next_page_token)) == (["t-3", "t-2"], 4, True)
    rest = await client.list_tasks(pb.ListTasksRequest(context_id="ctx-a", page_token=page.next_page_token))
    assert [t.id for t in rest.tasks] == ["t-1", "t-0"] and not rest.next_page_token
