"""The profile's answers from a model (the agent's Task or Message as it holds them) are the
same bytes as from the 0.3 JSON they used to be written to and read back from."""

from __future__ import annotations

import json

import pytest

from mesh.a2a import Message, Method, Task, parse_result
from mesh.profile.emqx import ProfileAnswer

TASK = {
    "kind": "task",
    "id": "t-1",
    "contextId": "c-1",
    "status": {
        "state": "completed",
        "timestamp": "2026-11-26T23:00:00.000000Z",
        "message": {"kind": "message", "role": "agent", "messageId": "m-2", "parts": [{"kind": "text", "text": "é"}]},
    },
    "history": [
        {"kind": "message", "role": "user", "messageId": "m-1", "parts": [{"kind": "data", "data": {"n": 1}}]},
    ],
    "artifacts": [
        {
            "artifactId": "a-1",
            "name": "report.pdf",
            "parts": [{"kind": "file", "file": {"uri": "artifact://c-1/report.pdf?version=1", "mimeType": "x/y"}}],
        }
    ],
    "metadata": {"k": "v"},
}
MESSAGE = {"kind": "message", "role": "agent", "messageId": "m-3", "parts": [{"kind": "text", "text": "hi"}]}


def _json_path(method: Method, result: dict[str, object]) -> list[bytes]:
    return ProfileAnswer(method).encode(json.dumps({"jsonrpc": "2.0", "id": "r-1", "result": result}).encode())


@pytest.mark.parametrize(
    ("method", "result", "kind"),
    [
        (Method.message_send, TASK, Task),
        (Method.message_send, MESSAGE, Message),
        (Method.tasks_get, TASK, Task),
        (Method.message_stream, TASK, Task),
    ],
)
def test_a_model_result_translates_as_its_json_did(method: Method, result: dict[str, object], kind: type) -> None:
    model = parse_result(result, kind)
    assert ProfileAnswer(method).encode_result("r-1", model) == _json_path(method, result)


def test_text_no_json_can_carry_is_a_value_error_for_the_json_path_to_answer() -> None:
    broken = parse_result({**MESSAGE, "parts": [{"kind": "text", "text": "\ud800"}]}, Message)
    with pytest.raises(ValueError):
        ProfileAnswer(Method.message_send).encode_result("r-1", broken)
    with pytest.raises(ValueError):
        ProfileAnswer(None).encode_result("r-1", parse_result(MESSAGE, Message))
