"""Wire behaviour of the A2A models: names, unknown keys, parts and their discriminator."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from mesh.a2a import (
    Artifact,
    DataPart,
    FilePart,
    FileWithBytes,
    FileWithUri,
    Message,
    MessageSendConfiguration,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskQueryParams,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    TextPart,
    format_validation_error,
    validation_error_details,
)

PART = TypeAdapter(Part)


def errors_of(call: Any, *args: Any) -> list[dict[str, str]]:
    with pytest.raises(ValidationError) as info:
        call(*args)
    return validation_error_details(info.value)


def message_dict(**extra: Any) -> dict[str, Any]:
    return {"messageId": "m1", "role": "user", "parts": [{"kind": "text", "text": "hi"}], **extra}


# --------------------------------------------------------------------------- names


def test_input_accepts_camel_and_snake_case_output_is_camel_case() -> None:
    camel = Message.model_validate(message_dict(contextId="c1", taskId="t1", referenceTaskIds=["a"]))
    snake = Message.model_validate(
        {
            "message_id": "m1",
            "role": "user",
            "parts": [{"text": "hi"}],
            "context_id": "c1",
            "task_id": "t1",
            "reference_task_ids": ["a"],
        }
    )
    assert camel == snake
    assert camel.context_id == "c1"
    assert snake.to_wire_dict() == {
        "messageId": "m1",
        "role": "user",
        "parts": [{"kind": "text", "text": "hi"}],
        "kind": "message",
        "taskId": "t1",
        "contextId": "c1",
        "referenceTaskIds": ["a"],
    }


def test_constructor_takes_python_names() -> None:
    event = TaskArtifactUpdateEvent(
        task_id="t", context_id="c", artifact=Artifact(artifact_id="a", parts=[]), last_chunk=True
    )
    assert event.to_wire_dict() == {
        "taskId": "t",
        "contextId": "c",
        "kind": "artifact-update",
        "artifact": {"artifactId": "a", "parts": []},
        "lastChunk": True,
    }


def test_to_json_bytes_matches_to_wire_dict() -> None:
    message = Message.model_validate(message_dict(metadata={"x": [1, None]}, extensions=["urn:e"]))
    assert isinstance(message.to_json_bytes(), bytes)
    assert json.loads(message.to_json_bytes()) == message.to_wire_dict()
    assert message.to_json_bytes() == message.model_dump_json(by_alias=True, exclude_none=True).encode()


def test_none_members_are_left_out_but_user_data_keeps_its_nulls() -> None:
    message = Message.model_validate(message_dict(metadata={"keep": None}, taskId=None))
    assert "taskId" not in message.to_wire_dict()
    assert message.to_wire_dict()["metadata"] == {"keep": None}


def test_enums_are_their_wire_strings() -> None:
    status = TaskStatus(state=TaskState.input_required)
    assert status.state == "input-required" and f"{status.state}" == "input-required"
    assert status.to_wire_dict() == {"state": "input-required"}
    assert Message.model_validate(message_dict()).role is Role.user


def test_task_state_has_the_nine_a2a_states() -> None:
    assert [s.value for s in TaskState] == [
        "submitted",
        "working",
        "input-required",
        "completed",
        "canceled",
        "failed",
        "rejected",
        "auth-required",
        "unknown",
    ]


# --------------------------------------------------------------------------- unknown keys


def test_unknown_keys_survive_a_round_trip_at_every_level() -> None:
    source = {
        "id": "t1",
        "contextId": "c1",
        "kind": "task",
        "vendorTop": {"a": 1},
        "status": {
            "state": "working",
            "progress": 0.5,
            "message": message_dict(
                parts=[
                    {"kind": "text", "text": "x", "lang": "en"},
                    {"kind": "file", "file": {"uri": "u", "sizeBytes": 3}},
                ],
                kind="message",
                trace="abc",
            ),
        },
        "artifacts": [
            {
                "artifactId": "a",
                "parts": [{"kind": "data", "data": {}, "schema": "s"}],
                "version": 2,
            }
        ],
    }
    task = Task.model_validate(source)
    assert task.model_extra == {"vendorTop": {"a": 1}}
    assert json.loads(task.to_json_bytes()) == source
    assert task.to_wire_dict() == source


def test_unknown_keys_are_not_renamed() -> None:
    message = Message.model_validate(message_dict(some_vendor_key=1))
    assert message.to_wire_dict()["some_vendor_key"] == 1


# --------------------------------------------------------------------------- messages


def test_message_needs_an_id_a_role_and_a_part() -> None:
    details = errors_of(Message.model_validate, {"parts": []})
    assert [(d["path"], d["type"]) for d in details] == [
        ("messageId", "missing"),
        ("role", "missing"),
        ("parts", "too_short"),
    ]


def test_message_kind_is_fixed() -> None:
    details = errors_of(Message.model_validate, message_dict(kind="task"))
    assert details[0]["path"] == "kind"
    assert details[0]["reason"] == "Input should be 'message' (got 'task')"


def test_history_length_must_not_be_negative() -> None:
    assert TaskQueryParams(id="t", history_length=0).history_length == 0
    assert errors_of(TaskQueryParams.model_validate, {"id": "t", "historyLength": -1})[0]["path"] == "historyLength"
    assert errors_of(MessageSendConfiguration.model_validate, {"historyLength": -2})[0]["path"] == "historyLength"


def test_accepted_output_modes_is_optional() -> None:
    assert MessageSendConfiguration.model_validate({"blocking": True}).to_wire_dict() == {"blocking": True}


def test_status_update_event_requires_final() -> None:
    event = TaskStatusUpdateEvent(task_id="t", context_id="c", status=TaskStatus(state="working"), final=False)
    assert event.to_wire_dict() == {
        "taskId": "t",
        "contextId": "c",
        "status": {"state": "working"},
        "final": False,
        "kind": "status-update",
    }
    assert (
        errors_of(
            TaskStatusUpdateEvent.model_validate,
            {"taskId": "t", "contextId": "c", "status": {"state": "working"}},
        )[0]["path"]
        == "final"
    )


# --------------------------------------------------------------------------- parts


@pytest.mark.parametrize(
    ("source", "cls"),
    [
        ({"kind": "text", "text": "a"}, TextPart),
        ({"kind": "data", "data": {"k": 1}}, DataPart),
        ({"kind": "file", "file": {"uri": "u"}}, FilePart),
        ({"text": "a"}, TextPart),
        ({"data": {}}, DataPart),
        ({"file": {"bytes": "AA=="}}, FilePart),
    ],
)
def test_part_kind_is_read_or_inferred(source: dict[str, Any], cls: type) -> None:
    part = PART.validate_python(source)
    assert type(part) is cls
    assert part.to_wire_dict() == {"kind": part.kind, **source}


def test_part_kind_wins_over_keys() -> None:
    # An explicit kind is trusted: a "data" part with a stray "text" key stays a data part.
    part = PART.validate_python({"kind": "data", "data": {}, "text": "note"})
    assert type(part) is DataPart and part.model_extra == {"text": "note"}


def test_file_content_is_told_apart_by_bytes_or_uri() -> None:
    inline = PART.validate_python({"file": {"bytes": "AA=="}})
    by_uri = PART.validate_python({"file": {"uri": "s3://x"}})
    assert isinstance(inline, FilePart) and type(inline.file) is FileWithBytes
    assert isinstance(by_uri, FilePart) and type(by_uri.file) is FileWithUri


@pytest.mark.parametrize(
    ("source", "path", "reason"),
    [
        (
            {"kind": "image", "url": "x"},
            "kind",
            "unknown kind 'image'; expected 'text', 'file' or 'data'",
        ),
        ({"url": "x"}, "kind", "missing; expected 'text', 'file' or 'data'"),
        ({"kind": ["text"]}, "kind", "unknown kind ['text']; expected"),
        ("just text", "<root>", "expected an object, got str 'just text'"),
        (
            {"file": {"name": "n"}},
            "file",
            "must be an object with exactly one of 'bytes' (base64) or 'uri' (keys: name)",
        ),
        ({"file": {"bytes": "AA==", "uri": "u"}}, "file", "must be an object with exactly one of"),
        ({"kind": "text"}, "text", "Field required"),
        (
            {"kind": "file", "file": {"uri": 3}},
            "file.uri",
            "Input should be a valid string (got 3)",
        ),
    ],
)
def test_bad_parts_name_the_field(source: Any, path: str, reason: str) -> None:
    details = errors_of(PART.validate_python, source)
    assert details[0]["path"] == path
    assert details[0]["reason"].startswith(reason)


def test_part_errors_inside_a_message_have_json_paths() -> None:
    source = message_dict(parts=[{"text": "ok"}, {"kind": "text", "text": 5}, {"kind": "video"}])
    with pytest.raises(ValidationError) as info:
        Message.model_validate(source)
    assert format_validation_error(info.value, prefix="params.message") == (
        "params.message.parts.1.text: Input should be a valid string (got 5); "
        "params.message.parts.2.kind: unknown kind 'video'; expected 'text', 'file' or 'data' "
        "(or left out when the part has a text, file or data key)"
    )


def test_built_parts_pass_through_unchanged() -> None:
    text = TextPart(text="a")
    message = Message(message_id="m", role=Role.agent, parts=[text])
    assert message.parts[0] is text


def test_format_validation_error_caps_the_list() -> None:
    source = message_dict(parts=[{"kind": "nope"}] * 30)
    with pytest.raises(ValidationError) as info:
        Message.model_validate(source)
    text = format_validation_error(info.value, limit=3)
    assert text.count("unknown kind") == 3
    assert text.endswith("; ... and 27 more")
    assert len(validation_error_details(info.value, limit=5)) == 5
