"""SAM's helper functions."""

from __future__ import annotations

import base64
from datetime import datetime

from mesh.a2a import (
    Artifact,
    FilePart,
    FileWithBytes,
    FileWithUri,
    Role,
    TaskState,
    create_agent_data_message,
    create_agent_message,
    create_artifact_update,
    create_cancel_task_request,
    create_data_part,
    create_file_part_from_bytes,
    create_file_part_from_uri,
    create_internal_error_response,
    create_send_message_request,
    create_send_streaming_message_request,
    create_status_update,
    create_text_part,
    create_user_message,
    get_message_from_status_update,
    get_parts_from_message,
    get_text_from_message,
    parse_request,
)


def test_parts() -> None:
    assert create_text_part("hi", metadata={"lang": "en"}).to_wire_dict() == {
        "kind": "text",
        "text": "hi",
        "metadata": {"lang": "en"},
    }
    uri = create_file_part_from_uri("artifact://s/data.csv", name="data.csv", mime_type="text/csv")
    assert isinstance(uri.file, FileWithUri)
    assert uri.to_wire_dict() == {
        "kind": "file",
        "file": {"uri": "artifact://s/data.csv", "name": "data.csv", "mimeType": "text/csv"},
    }
    raw = create_file_part_from_bytes(b'{"key":"value"}', name="config.json", mime_type="application/json")
    assert isinstance(raw.file, FileWithBytes)
    assert raw.file.bytes == "eyJrZXkiOiJ2YWx1ZSJ9"  # SAM's example
    assert base64.b64decode(raw.file.bytes) == b'{"key":"value"}'
    assert create_data_part({"a": 1}).to_wire_dict() == {"kind": "data", "data": {"a": 1}}


def test_user_and_agent_messages() -> None:
    message = create_user_message(
        [create_text_part("Hello, agent!"), create_file_part_from_uri("u", name="n")],
        metadata={"priority": "high"},
        context_id="session-123",
    )
    assert message.role is Role.user and message.context_id == "session-123"
    assert len(message.message_id) == 32 and int(message.message_id, 16) >= 0
    assert create_user_message([create_text_part("x")]).message_id != message.message_id
    agent = create_agent_message([create_text_part("done")], task_id="t", message_id="fixed")
    assert agent.role is Role.agent and agent.message_id == "fixed" and agent.task_id == "t"


def test_agent_data_message() -> None:
    message = create_agent_data_message({"status": "processing", "progress": 0.5}, context_id="c")
    assert message.role is Role.agent
    assert message.to_wire_dict()["parts"] == [{"kind": "data", "data": {"status": "processing", "progress": 0.5}}]


def test_status_update() -> None:
    reply = create_agent_message([create_text_part("Analysis complete!")])
    event = create_status_update("task-123", "session-abc", message=reply, is_final=False)
    assert event.status.state is TaskState.working and event.final is False
    assert event.status.timestamp is not None
    assert datetime.fromisoformat(event.status.timestamp).tzinfo is not None
    assert get_message_from_status_update(event) is reply
    done = create_status_update("t", "c", state=TaskState.completed, is_final=True, metadata={"k": 1})
    wire = done.to_wire_dict()
    assert wire["final"] is True and wire["status"]["state"] == "completed" and wire["metadata"] == {"k": 1}
    assert get_message_from_status_update(done) is None


def test_artifact_update() -> None:
    artifact = Artifact(artifact_id="a1", parts=[create_text_part("chunk")])
    event = create_artifact_update("t", "c", artifact, append=True, last_chunk=False)
    assert event.to_wire_dict() == {
        "taskId": "t",
        "contextId": "c",
        "kind": "artifact-update",
        "artifact": {"artifactId": "a1", "parts": [{"kind": "text", "text": "chunk"}]},
        "append": True,
        "lastChunk": False,
    }


def test_reading_messages() -> None:
    message = create_agent_message([create_text_part("one"), create_data_part({"x": 1}), create_text_part("two")])
    parts = get_parts_from_message(message)
    assert [type(p).__name__ for p in parts] == ["TextPart", "DataPart", "TextPart"]
    parts.clear()  # a copy: the message is untouched
    assert len(message.parts) == 3
    assert get_text_from_message(message) == "one\ntwo"
    assert get_text_from_message(message, delimiter="") == "onetwo"
    assert get_text_from_message(create_agent_message([create_data_part({})])) == ""
    assert isinstance(create_file_part_from_uri("u"), FilePart)


def test_request_helpers_use_the_task_id_as_request_id() -> None:
    message = create_user_message([create_text_part("hi")])
    streaming = create_send_streaming_message_request(message, "task-1", metadata={"m": 1})
    assert streaming.id == "task-1" and streaming.method == "message/stream"
    parsed = parse_request(streaming.to_json_bytes())
    assert parsed.id == "task-1" and parsed.params == streaming.params
    send = create_send_message_request(message, "task-2")
    assert send.to_wire_dict()["method"] == "message/send"
    cancel = create_cancel_task_request("task-1")
    assert cancel.params.id == "task-1" and isinstance(cancel.id, str) and cancel.id != "task-1"


def test_internal_error_response() -> None:
    response = create_internal_error_response("boom", "r1", data={"where": "handler"})
    assert response.to_wire_dict() == {
        "jsonrpc": "2.0",
        "id": "r1",
        "error": {"code": -32603, "message": "boom", "data": {"where": "handler"}},
    }
