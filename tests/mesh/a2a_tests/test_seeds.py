"""The JSON examples of the seeds (jaf-a2a-spec, sam-a2a-protocol), parsed and dumped back.

Examples that are valid A2A 0.3 must round-trip to the same JSON. SAM's examples use
snake_case keys and leave out ``kind``: they must parse and dump in canonical camelCase with
``kind``. Examples that are not valid A2A 0.3 must fail with an error naming the bad field;
each such deviation is explained where it is tested.

Placeholders such as ``{ /* A2AMessage */ }`` and ``[ ... ]`` are not JSON; they are filled
with the seed's own example of that object. Alternatives such as ``"user" | "agent"`` are
tested one by one.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from mesh.a2a import (
    AgentCard,
    InvalidAgentResponse,
    InvalidParams,
    JSONRPCErrorObject,
    JSONRPCErrorResponse,
    JSONRPCSuccessResponse,
    Message,
    MessageSendParams,
    Method,
    Part,
    SendMessageRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskIdParams,
    TaskQueryParams,
    TaskStatusUpdateEvent,
    format_validation_error,
    parse_request,
    parse_response,
    parse_result,
)

PART = TypeAdapter(Part)


def wire(model: Any) -> Any:
    """What a model puts on the wire, decoded again."""
    return json.loads(model.to_json_bytes())


# --------------------------------------------------------------------------- JAF (A2A 0.3)

JAF_MESSAGE = """
{
"role": "user",
"parts": [
{
"kind": "text",
"text": "Hello, how can you help me?"
}
],
"messageId": "unique-message-identifier",
"contextId": "conversation-context-identifier",
"kind": "message",
"timestamp": "2024-03-15T14:30:00Z"
}
"""


@pytest.mark.parametrize("role", ["user", "agent"])
def test_jaf_message_round_trips(role: str) -> None:
    source = json.loads(JAF_MESSAGE.replace('"user"', json.dumps(role)))
    message = Message.model_validate(source)
    # "timestamp" is not an A2A 0.3 Message member; it is kept as an unknown key.
    assert message.model_extra == {"timestamp": "2024-03-15T14:30:00Z"}
    assert wire(message) == source


def test_jaf_message_system_role_is_not_a2a() -> None:
    # Deviation: JAF lists role "system"; A2A 0.3 roles are only "user" and "agent".
    source = json.loads(JAF_MESSAGE.replace('"user"', '"system"'))
    with pytest.raises(ValidationError) as info:
        Message.model_validate(source)
    assert format_validation_error(info.value).startswith("role: Input should be 'user' or 'agent'")


JAF_TASK = """
{
"id": "task-unique-identifier",
"contextId": "conversation-context-identifier",
"kind": "task",
"status": {
"state": "STATE",
"message": MESSAGE,
"timestamp": "2024-03-15T14:30:00Z",
"error": {
"code": -32000,
"message": "Human-readable error description",
"data": {
"additional": "error context",
"errorType": "AgentNotFound",
"timestamp": "2024-03-15T14:30:00Z"
}
}
}
}
"""


def jaf_task(state: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(JAF_TASK.replace('"STATE"', json.dumps(state)).replace("MESSAGE", JAF_MESSAGE))
    return doc


@pytest.mark.parametrize("state", ["submitted", "working", "completed", "failed"])
def test_jaf_task_round_trips(state: str) -> None:
    source = jaf_task(state)
    task = Task.model_validate(source)
    # status.error is JAF's own member: kept verbatim as an unknown key.
    assert task.status.model_extra is not None and "error" in task.status.model_extra
    assert wire(task) == source


def test_jaf_task_cancelled_spelling_is_not_a2a() -> None:
    # Deviation: JAF spells the state "cancelled"; A2A 0.3 spells it "canceled".
    with pytest.raises(ValidationError) as info:
        Task.model_validate(jaf_task("cancelled"))
    text = format_validation_error(info.value)
    assert text.startswith("status.state: Input should be 'submitted', 'working'")
    assert "(got 'cancelled')" in text
    # And as an agent's answer to tasks/get, the path starts at the result.
    with pytest.raises(InvalidAgentResponse) as rpc:
        parse_result(jaf_task("cancelled"))
    assert "result.status.state:" in str(rpc.value)
    assert rpc.value.data["errors"][0]["path"] == "result.status.state"


JAF_ERROR = """
{
"code": -32000,
"message": "Human-readable error description",
"data": {
"additional": "error context",
"errorType": "AgentNotFound",
"timestamp": "2024-03-15T14:30:00Z"
}
}
"""


def test_jaf_error_object_round_trips() -> None:
    source = json.loads(JAF_ERROR)
    error = JSONRPCErrorObject.model_validate(source)
    assert wire(error) == source


JAF_SEND_REQUEST = """
{
"jsonrpc": "2.0",
"id": "request-identifier",
"method": "message/send",
"params": {
"message": MESSAGE,
"configuration": {
"maxTurns": 10,
"timeout": 30000,
"priority": "normal"
}
}
}
""".replace("MESSAGE", JAF_MESSAGE)


def test_jaf_message_send_request_round_trips() -> None:
    source = json.loads(JAF_SEND_REQUEST)
    parsed = parse_request(JAF_SEND_REQUEST)
    assert parsed.method is Method.message_send and parsed.id == "request-identifier"
    assert isinstance(parsed.params, MessageSendParams)
    # maxTurns / timeout / priority are JAF's; A2A's configuration members are all optional,
    # so they ride along as unknown keys.
    assert wire(parsed.params) == source["params"]
    assert wire(SendMessageRequest.model_validate(source)) == source


JAF_SEND_SUCCESS = """
{
"jsonrpc": "2.0",
"id": "request-identifier",
"result": {
"kind": "completion",
"taskId": "generated-task-id",
"contextId": "conversation-context",
"message": MESSAGE,
"final": true
}
}
""".replace("MESSAGE", JAF_MESSAGE)


def test_jaf_message_send_completion_result_is_not_a2a() -> None:
    # Deviation: JAF answers with kind "completion"; an A2A 0.3 result is a Task, Message,
    # status-update or artifact-update. The envelope itself is valid JSON-RPC.
    response = parse_response(JAF_SEND_SUCCESS)
    assert isinstance(response, JSONRPCSuccessResponse)
    assert wire(response) == json.loads(JAF_SEND_SUCCESS)
    with pytest.raises(InvalidAgentResponse) as info:
        parse_result(response.result)
    assert "result.kind: unknown kind 'completion'" in str(info.value)


JAF_SEND_ERROR = """
{
"jsonrpc": "2.0",
"id": "request-identifier",
"error": {
"code": -32000,
"message": "Agent not found",
"data": {
"agentName": "RequestedAgent",
"availableAgents": ["Agent1", "Agent2"]
}
}
}
"""

JAF_ERROR_RESPONSE = """
{
"jsonrpc": "2.0",
"id": "request-id",
"error": {
"code": -32000,
"message": "Agent not found",
"data": {
"agentName": "NonExistentAgent",
"availableAgents": ["MathTutor", "ChatBot"],
"timestamp": "2024-03-15T14:30:00Z",
"requestId": "request-id",
"traceId": "trace-12345"
}
}
}
"""


@pytest.mark.parametrize("text", [JAF_SEND_ERROR, JAF_ERROR_RESPONSE])
def test_jaf_error_responses_round_trip(text: str) -> None:
    response = parse_response(text)
    assert isinstance(response, JSONRPCErrorResponse)
    assert type(response.error) is JSONRPCErrorObject  # -32000 is JAF's, not an A2A code
    assert wire(response) == json.loads(text)


JAF_STREAM_EVENTS = [
    '{"jsonrpc":"2.0","id":"req-1","result":{"kind":"status-update","taskId":"task-123","status":{"state":"working","timestamp":"2024-03-15T14:30:01Z"},"final":false}}',
    '{"jsonrpc":"2.0","id":"req-1","result":{"kind":"partial-completion","taskId":"task-123","message":{"role":"agent","parts":[{"kind":"text","text":"I\'m thinking about"}],"messageId":"resp-1","contextId":"ctx-1","kind":"message"},"final":false}}',  # noqa: E501
    '{"jsonrpc":"2.0","id":"req-1","result":{"kind":"completion","taskId":"task-123","message":{"role":"agent","parts":[{"kind":"text","text":"I\'m thinking about your question. Here\'s my response..."}],"messageId":"resp-1","contextId":"ctx-1","kind":"message"},"final":true}}',  # noqa: E501
]


def test_jaf_stream_status_update_lacks_context_id() -> None:
    # Deviation: A2A 0.3 status-update events require contextId; JAF's example has none.
    response = parse_response(JAF_STREAM_EVENTS[0])
    with pytest.raises(InvalidAgentResponse) as info:
        parse_result(response.result)  # type: ignore[union-attr]
    assert info.value.data["errors"] == [{"path": "result.contextId", "reason": "Field required", "type": "missing"}]


@pytest.mark.parametrize("text", JAF_STREAM_EVENTS[1:])
def test_jaf_stream_completion_kinds_are_not_a2a(text: str) -> None:
    # Deviation: "partial-completion" / "completion" are JAF event kinds, not A2A 0.3 ones.
    response = parse_response(text)
    assert wire(response) == json.loads(text)  # the envelope relays unchanged
    with pytest.raises(InvalidAgentResponse) as info:
        parse_result(response.result)  # type: ignore[union-attr]
    assert info.value.data["errors"][0]["path"] == "result.kind"


JAF_GET_REQUEST = """
{
"jsonrpc": "2.0",
"id": "query-identifier",
"method": "tasks/get",
"params": {
"id": "task-identifier"
}
}
"""

JAF_GET_RESPONSE = """
{
"jsonrpc": "2.0",
"id": "query-identifier",
"result": {
"id": "task-identifier",
"contextId": "conversation-context",
"kind": "task",
"status": {
"state": "completed",
"message": MESSAGE,
"timestamp": "2024-03-15T14:30:05Z"
}
}
}
""".replace("MESSAGE", JAF_MESSAGE.replace('"user"', '"agent"'))


def test_jaf_tasks_get_request_round_trips() -> None:
    parsed = parse_request(JAF_GET_REQUEST.encode())
    assert parsed.method is Method.tasks_get and parsed.id == "query-identifier"
    assert isinstance(parsed.params, TaskQueryParams)
    assert wire(parsed.params) == json.loads(JAF_GET_REQUEST)["params"]


def test_jaf_tasks_get_response_round_trips() -> None:
    source = json.loads(JAF_GET_RESPONSE)
    response = parse_response(JAF_GET_RESPONSE)
    assert isinstance(response, JSONRPCSuccessResponse)
    task = parse_result(response.result, Task)
    assert task.status.message is not None and task.status.message.role == "agent"
    assert wire(task) == source["result"]
    assert wire(JSONRPCSuccessResponse(id=response.id, result=task)) == source


JAF_CANCEL_REQUEST = """
{
"jsonrpc": "2.0",
"id": "cancel-identifier",
"method": "tasks/cancel",
"params": {
"id": "task-identifier",
"reason": "User requested cancellation"
}
}
"""

JAF_CANCEL_RESPONSE = """
{
"jsonrpc": "2.0",
"id": "cancel-identifier",
"result": {
"id": "task-identifier",
"cancelled": true,
"timestamp": "2024-03-15T14:30:02Z"
}
}
"""


def test_jaf_tasks_cancel_request_round_trips() -> None:
    parsed = parse_request(JAF_CANCEL_REQUEST)
    assert parsed.method is Method.tasks_cancel
    assert isinstance(parsed.params, TaskIdParams)
    # "reason" is not an A2A 0.3 TaskIdParams member; it is kept.
    assert wire(parsed.params) == {"id": "task-identifier", "reason": "User requested cancellation"}


def test_jaf_tasks_cancel_response_is_not_a_task() -> None:
    # Deviation: A2A 0.3 answers tasks/cancel with the Task; JAF returns {id, cancelled}.
    response = parse_response(JAF_CANCEL_RESPONSE)
    with pytest.raises(InvalidAgentResponse) as info:
        parse_result(response.result, Task)  # type: ignore[union-attr]
    assert "result.kind: missing" in str(info.value)


JAF_AGENT_CARD = """
{
"name": "MathTutor",
"description": "Specialized mathematical assistant",
"version": "1.0.0",
"protocolVersion": "0.3.0",
"url": "https://api.example.com/agents/mathtutor",
"capabilities": {
"streaming": true,
"pushNotifications": false,
"stateTransitionHistory": true,
"contextAccumulation": true
},
"skills": [
{
"id": "calculate",
"name": "Mathematical Calculation",
"description": "Perform arithmetic and algebraic calculations",
"tags": ["math", "calculation", "arithmetic"],
"examples": [
{
"input": "What is 15 * 7?",
"output": "15 * 7 = 105"
}
]
}
],
"inputModes": ["text", "data"],
"outputModes": ["text", "data"],
"authentication": {
"required": false,
"schemes": ["bearer", "apikey"]
},
"rateLimit": {
"requests": 100,
"window": 60,
"burst": 20
}
}
"""


def test_jaf_agent_card_is_not_a2a() -> None:
    # Deviations: skill examples are objects (A2A 0.3: strings), and the card has JAF's
    # inputModes/outputModes instead of the required defaultInputModes/defaultOutputModes.
    with pytest.raises(ValidationError) as info:
        AgentCard.model_validate_json(JAF_AGENT_CARD)
    text = format_validation_error(info.value)
    assert "skills.0.examples.0: Input should be a valid string" in text
    assert "defaultInputModes: Field required" in text
    assert "defaultOutputModes: Field required" in text


def test_jaf_agent_card_with_string_examples_keeps_jaf_members() -> None:
    source = json.loads(JAF_AGENT_CARD)
    source["skills"][0]["examples"] = ["What is 15 * 7?"]
    source["defaultInputModes"] = source["defaultOutputModes"] = ["text/plain"]
    card = AgentCard.model_validate(source)
    # authentication / rateLimit / inputModes / contextAccumulation are kept verbatim.
    assert wire(card) == {**source, "preferredTransport": "JSONRPC"}


JAF_CONTEXT = """
{
"contextId": "user-123-session-456",
"messages": [
{
"messageId": "msg-1",
"contextId": "user-123-session-456",
"role": "user",
"parts": [{"kind": "text", "text": "Hello"}]
},
{
"messageId": "msg-2",
"contextId": "user-123-session-456",
"role": "agent",
"parts": [{"kind": "text", "text": "Hi there!"}]
}
]
}
"""


def test_jaf_context_messages_gain_kind() -> None:
    for source in json.loads(JAF_CONTEXT)["messages"]:
        assert wire(Message.model_validate(source)) == {**source, "kind": "message"}


JAF_METADATA_MESSAGE = """
{
"role": "user",
"parts": [{"kind": "text", "text": "Hello"}],
"messageId": "msg-1",
"contextId": "ctx-1",
"kind": "message",
"metadata": {
"priority": "high",
"tags": ["urgent", "customer-facing"],
"userId": "user-123",
"sessionInfo": {
"userAgent": "Mozilla/5.0...",
"ipAddress": "192.168.1.1"
}
}
}
"""


def test_jaf_metadata_message_round_trips() -> None:
    source = json.loads(JAF_METADATA_MESSAGE)
    assert wire(Message.model_validate_json(JAF_METADATA_MESSAGE)) == source


# --------------------------------------------------------------------------- SAM

SAM_STREAMING_REQUEST = """
{
"jsonrpc" : "2.0" ,
"id" : "task-123" ,
"method" : "agent/sendStreamingMessage" ,
"params" : {
"message" : {
"role" : "user" ,
"parts" : [
{
"text" : "Analyze the quarterly sales data"
}
],
"context_id" : "session-abc" ,
"metadata" : {
"agent_name" : "analysis_agent" ,
"priority" : "high"
}
}
}
}
"""

SAM_SEND_REQUEST = """
{
"jsonrpc" : "2.0" ,
"id" : "task-456" ,
"method" : "agent/sendMessage" ,
"params" : {
"message" : {
"role" : "user" ,
"parts" : [
{ "text" : "What is 2+2?" }
]
}
}
}
"""

SAM_CANCEL_REQUEST = """
{
"jsonrpc" : "2.0" ,
"id" : "cancel-req-789" ,
"method" : "agent/cancelTask" ,
"params" : {
"id" : "task-123"
}
}
"""


@pytest.mark.parametrize("text", [SAM_STREAMING_REQUEST, SAM_SEND_REQUEST])
def test_sam_message_requests_lack_message_id(text: str) -> None:
    # Deviation: SAM's documentation examples leave out messageId, which A2A 0.3 requires
    # (SAM's own create_user_message always sets one). The error names the field.
    with pytest.raises(InvalidParams) as info:
        parse_request(text)
    assert info.value.data["errors"] == [
        {"path": "params.message.messageId", "reason": "Field required", "type": "missing"}
    ]
    assert info.value.request_id == json.loads(text)["id"]


def test_sam_streaming_request_parses_and_dumps_canonically() -> None:
    source = json.loads(SAM_STREAMING_REQUEST)
    source["params"]["message"]["message_id"] = "msg-1"  # what SAM's helpers add
    parsed = parse_request(json.dumps(source))
    assert parsed.method is Method.message_stream
    assert parsed.requested_method == "agent/sendStreamingMessage"
    assert parsed.id == "task-123"
    assert wire(parsed.params) == {
        "message": {
            "messageId": "msg-1",
            "role": "user",
            "parts": [{"kind": "text", "text": "Analyze the quarterly sales data"}],
            "kind": "message",
            "contextId": "session-abc",
            # metadata is user data: its keys are never renamed
            "metadata": {"agent_name": "analysis_agent", "priority": "high"},
        }
    }


def test_sam_send_request_parses_and_dumps_canonically() -> None:
    source = json.loads(SAM_SEND_REQUEST)
    source["params"]["message"]["message_id"] = "msg-2"
    parsed = parse_request(json.dumps(source).encode())
    assert parsed.method is Method.message_send and parsed.id == "task-456"
    assert wire(parsed.params) == {
        "message": {
            "messageId": "msg-2",
            "role": "user",
            "parts": [{"kind": "text", "text": "What is 2+2?"}],
            "kind": "message",
        }
    }


def test_sam_cancel_request_round_trips() -> None:
    parsed = parse_request(SAM_CANCEL_REQUEST)
    assert parsed.method is Method.tasks_cancel and parsed.id == "cancel-req-789"
    assert wire(parsed.params) == json.loads(SAM_CANCEL_REQUEST)["params"]


SAM_STATUS_UPDATE = """
{
"jsonrpc" : "2.0" ,
"id" : "task-123" ,
"result" : {
"type" : "task.status.update" ,
"task_id" : "task-123" ,
"context_id" : "session-abc" ,
"status" : {
"state" : "working" ,
"message" : {
"role" : "agent" ,
"parts" : [
{
"text" : "Analyzing data... Found 1,234 records."
}
]
},
"is_final" : false
}
}
}
"""

SAM_ARTIFACT_UPDATE = """
{
"jsonrpc" : "2.0" ,
"id" : "task-123" ,
"result" : {
"type" : "task.artifact.update" ,
"task_id" : "task-123" ,
"context_id" : "session-abc" ,
"artifact" : {
"artifact_id" : "artifact-xyz" ,
"name" : "sales_chart.png" ,
"description" : "Q4 sales visualization" ,
"parts" : [
{
"file" : {
"name" : "sales_chart.png" ,
"mime_type" : "image/png" ,
"uri" : "artifact://session-abc/sales_chart.png"
}
}
]
}
}
}
"""

SAM_FINAL_TASK = """
{
"jsonrpc" : "2.0" ,
"id" : "task-123" ,
"result" : {
"id" : "task-123" ,
"context_id" : "session-abc" ,
"status" : {
"state" : "completed" ,
"message" : {
"role" : "agent" ,
"parts" : [
{
"text" : "Analysis complete. See attached report."
}
]
},
"is_final" : true
},
"artifacts" : [
{
"artifact_id" : "report-123" ,
"name" : "analysis_report.pdf" ,
"parts" : [ PARTS ]
}
]
}
}
""".replace("PARTS", '{"text": "report"}')


def test_sam_status_update_pseudo_shape_is_not_a2a() -> None:
    # Deviation: SAM documents a "type": "task.status.update" shape with is_final inside the
    # status; A2A 0.3 has "kind": "status-update", a top-level "final" and message ids.
    response = parse_response(SAM_STATUS_UPDATE)
    with pytest.raises(InvalidAgentResponse) as info:
        parse_result(response.result)  # type: ignore[union-attr]
    assert info.value.data["errors"][0]["path"] == "result.kind"
    with pytest.raises(ValidationError) as direct:
        TaskStatusUpdateEvent.model_validate(response.result)  # type: ignore[union-attr]
    text = format_validation_error(direct.value)
    assert "status.message.messageId: Field required" in text
    assert "final: Field required" in text


def test_sam_artifact_update_pseudo_shape_is_not_a2a() -> None:
    # Deviation: "type": "task.artifact.update" instead of "kind": "artifact-update".
    response = parse_response(SAM_ARTIFACT_UPDATE)
    with pytest.raises(InvalidAgentResponse) as info:
        parse_result(response.result)  # type: ignore[union-attr]
    assert "result.kind: missing" in str(info.value)
    # Read as the event type it means, everything else is A2A: it dumps canonically.
    event = TaskArtifactUpdateEvent.model_validate(response.result)  # type: ignore[union-attr]
    assert wire(event) == {
        "type": "task.artifact.update",
        "taskId": "task-123",
        "contextId": "session-abc",
        "kind": "artifact-update",
        "artifact": {
            "artifactId": "artifact-xyz",
            "name": "sales_chart.png",
            "description": "Q4 sales visualization",
            "parts": [
                {
                    "kind": "file",
                    "file": {
                        "name": "sales_chart.png",
                        "mimeType": "image/png",
                        "uri": "artifact://session-abc/sales_chart.png",
                    },
                }
            ],
        },
    }


def test_sam_final_task_is_not_a2a() -> None:
    # Deviation: no "kind": "task", is_final inside the status, status message without id.
    response = parse_response(SAM_FINAL_TASK)
    with pytest.raises(InvalidAgentResponse) as info:
        parse_result(response.result, Task)  # type: ignore[union-attr]
    assert "result.kind: missing" in str(info.value)
    with pytest.raises(ValidationError) as direct:
        Task.model_validate(response.result)  # type: ignore[union-attr]
    assert format_validation_error(direct.value) == "status.message.messageId: Field required"


SAM_ERROR = """
{
"jsonrpc" : "2.0" ,
"id" : "task-123" ,
"error" : {
"code" : -32000 ,
"message" : "Agent execution failed" ,
"data" : {
"error_type" : "timeout" ,
"details" : "Task exceeded 5 minute timeout"
}
}
}
"""


def test_sam_error_response_round_trips() -> None:
    response = parse_response(SAM_ERROR.encode())
    assert isinstance(response, JSONRPCErrorResponse) and response.error.code == -32000
    assert wire(response) == json.loads(SAM_ERROR)  # data keys are never renamed


SAM_TEXT_PART = """
{
"text" : "The analysis shows a 15% increase in sales." ,
"metadata" : {
"language" : "en" ,
"confidence" : 0.95
}
}
"""

SAM_DATA_PART = """
{
"data" : {
"type" : "tool_call" ,
"function_name" : "web_search" ,
"arguments" : {
"query" : "latest AI news"
}
},
"metadata" : {
"tool_call_id" : "call_xyz"
}
}
"""

SAM_FILE_URI_PART = """
{
"file" : {
"name" : "report.pdf" ,
"mime_type" : "application/pdf" ,
"uri" : "artifact://session-abc/report.pdf"
},
"metadata" : {
"size_bytes" : 1048576 ,
"version" : 2
}
}
"""

SAM_FILE_BYTES_PART = """
{
"file" : {
"name" : "config.json" ,
"mime_type" : "application/json" ,
"bytes" : "eyJrZXkiOiJ2YWx1ZSJ9"
}
}
"""


@pytest.mark.parametrize(
    ("text", "kind"),
    [(SAM_TEXT_PART, "text"), (SAM_DATA_PART, "data")],
)
def test_sam_text_and_data_parts_gain_kind(text: str, kind: str) -> None:
    source = json.loads(text)
    part = PART.validate_json(text)
    assert part.kind == kind
    assert wire(part) == {"kind": kind, **source}


@pytest.mark.parametrize("text", [SAM_FILE_URI_PART, SAM_FILE_BYTES_PART])
def test_sam_file_parts_parse_and_dump_camel_case(text: str) -> None:
    source = json.loads(text)
    part = PART.validate_python(source)
    assert part.kind == "file"
    expected_file = {k: v for k, v in source["file"].items() if k != "mime_type"}
    expected_file["mimeType"] = source["file"]["mime_type"]
    assert wire(part) == {**source, "kind": "file", "file": expected_file}
