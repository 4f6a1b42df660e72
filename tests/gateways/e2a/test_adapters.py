"""E2A adapters: ACP / A2A ingress, ACP call export, prompt merging and response projections."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from mesh.e2a import (
    E2AEnvelope,
    E2AResponse,
    E2AValidationError,
    IdentityOrigin,
    e2a_response_to_a2a_stream_payload,
    e2a_response_to_acp_jsonrpc_response,
    envelope_from_a2a_send_message,
    envelope_from_acp_jsonrpc,
    envelope_to_acp_jsonrpc_call,
    merge_params_to_acp_prompt,
)

# Spec 11.4, verbatim.
SEED_11_4 = json.loads("""
{
  "jsonrpc": "2.0",
  "id": 42,
  "method": "session/prompt",
  "params": {
    "session_id": "s1",
    "prompt": [{"type": "text", "text": "hi"}]
  }
}
""")

# Spec 11.5, verbatim.
SEED_11_5 = json.loads("""
{
  "method": "session/prompt",
  "session_id": "s1",
  "jsonrpc_id": 1,
  "params": {
    "content_blocks": [
      {"type": "text", "text": "Describe this image"},
      {"type": "image", "mime_type": "image/png", "data": "<base64 omitted>"}
    ]
  }
}
""")


# --- ACP ingress (spec 11.3) -----------------------------------------------------------------


def test_acp_ingress_11_3_and_export_11_4() -> None:
    params = {"session_id": "s1", "prompt": [{"type": "text", "text": "hi"}]}
    env = envelope_from_acp_jsonrpc("session/prompt", params, jsonrpc_id=42)
    assert env.method == "session/prompt"
    assert env.jsonrpc_id == 42
    assert env.session_id == "s1"
    assert env.params == params and env.params is not params
    prov = env.provenance
    assert prov.source_protocol == "acp"
    assert prov.converter == "mesh.e2a.adapters:envelope_from_acp_jsonrpc"
    assert datetime.fromisoformat(prov.converted_at).utcoffset().total_seconds() == 0
    assert prov.details == {
        "kind": "jsonrpc_request",
        "jsonrpc_method": "session/prompt",
        "jsonrpc_id": 42,
    }
    assert envelope_to_acp_jsonrpc_call(env) == SEED_11_4


def test_acp_ingress_options() -> None:
    env = envelope_from_acp_jsonrpc(
        "initialize",
        None,
        session_id="arg",
        channel="acp",
        identity_origin=IdentityOrigin.SERVICE,
        converter="custom:conv",
        extra_provenance_details={"transport": "stdio"},
    )
    assert env.params == {}
    assert env.session_id == "arg"
    assert env.channel == "acp"
    assert env.identity_origin is IdentityOrigin.SERVICE
    assert env.provenance.converter == "custom:conv"
    assert env.provenance.details == {
        "kind": "jsonrpc_request",
        "jsonrpc_method": "initialize",
        "transport": "stdio",
    }
    assert env.request_id is None


def test_acp_ingress_session_id_from_params_only_when_string() -> None:
    assert envelope_from_acp_jsonrpc("session/load", {"session_id": 7}).session_id is None
    assert envelope_from_acp_jsonrpc("session/load", {"session_id": "p"}, session_id="a").session_id == "a"


def test_acp_ingress_rejects_positional_params() -> None:
    with pytest.raises(E2AValidationError, match="ACP params"):
        envelope_from_acp_jsonrpc("session/prompt", ["hi"])  # type: ignore[arg-type]


# --- A2A ingress -----------------------------------------------------------------------------


def test_a2a_send_message_ingress() -> None:
    message = {"kind": "message", "role": "user", "messageId": "m1", "parts": [{"kind": "text", "text": "hi"}]}
    configuration = {"acceptedOutputModes": ["text/plain", "application/json"], "blocking": True}
    env = envelope_from_a2a_send_message(
        task_id="t1",
        context_id="c1",
        message_body=message,
        metadata={"trace": "abc"},
        configuration=configuration,
        channel="http",
    )
    assert env.method == "session/prompt"
    assert (env.task_id, env.context_id, env.channel) == ("t1", "c1", "http")
    assert env.params == {"message": message, "configuration": configuration}
    assert env.expected_output_modes == ["text/plain", "application/json"]
    assert env.a2a_metadata == {"trace": "abc"}
    assert env.channel_context == {}
    assert env.provenance.source_protocol == "a2a"
    assert env.provenance.converter == "mesh.e2a.adapters:envelope_from_a2a_send_message"
    assert env.provenance.details == {"kind": "a2a_send_message", "abstract_operation": "SendMessage"}


def test_a2a_send_message_defaults() -> None:
    env = envelope_from_a2a_send_message(
        task_id=None, context_id=None, message_body={}, extra_provenance_details={"x": 1}
    )
    assert env.params == {"message": {}, "configuration": {}}
    assert env.expected_output_modes == []
    assert env.a2a_metadata == {}
    assert env.provenance.details["x"] == 1


# --- merge_params_to_acp_prompt --------------------------------------------------------------


def test_seed_11_5_prompt_gains_content_blocks() -> None:
    env = E2AEnvelope.from_dict(SEED_11_5)
    params = merge_params_to_acp_prompt(env)
    blocks = SEED_11_5["params"]["content_blocks"]
    assert params["prompt"] == blocks
    assert params["content_blocks"] == blocks
    assert params["session_id"] == "s1"
    assert "prompt" not in env.params  # the envelope is untouched


@pytest.mark.parametrize(
    ("params", "text"),
    [
        ({"text": "t", "content": "c", "query": "q"}, "t"),
        ({"text": "", "content": "c", "query": "q"}, "c"),
        ({"query": "q"}, "q"),
    ],
)
def test_prompt_from_first_truthy_text_content_query(params: dict, text: str) -> None:
    env = E2AEnvelope(method="session/prompt", params=params)
    assert merge_params_to_acp_prompt(env)["prompt"] == [{"type": "text", "text": text}]


def test_no_prompt_when_nothing_usable() -> None:
    env = E2AEnvelope(method="session/prompt", params={"text": "", "content_blocks": []})
    assert "prompt" not in merge_params_to_acp_prompt(env)
    # The first truthy value wins even when it is not a string; then there is no prompt.
    env = E2AEnvelope(method="session/prompt", params={"text": {"x": 1}, "query": "q"})
    assert "prompt" not in merge_params_to_acp_prompt(env)


def test_session_id_and_acp_meta_are_merged() -> None:
    env = E2AEnvelope(
        method="session/prompt",
        session_id="s9",
        params={"text": "hi", "_meta": {"a": 1}},
        acp_meta={"b": 2},
    )
    params = merge_params_to_acp_prompt(env)
    assert params["session_id"] == "s9"
    assert params["_meta"] == {"a": 1, "b": 2}
    assert env.params["_meta"] == {"a": 1}  # not mutated through the shallow copy
    kept = E2AEnvelope(method="session/prompt", session_id="s9", params={"text": "hi", "session_id": "own"})
    assert merge_params_to_acp_prompt(kept)["session_id"] == "own"


def test_quirk_existing_prompt_returns_copy_without_session_id_or_meta() -> None:
    params = {"prompt": [{"type": "text", "text": "hi"}]}
    env = E2AEnvelope(method="session/prompt", session_id="s1", params=params, acp_meta={"m": 1})
    merged = merge_params_to_acp_prompt(env)
    assert merged == params
    assert merged is not params
    assert "session_id" not in merged and "_meta" not in merged


def test_other_methods_get_a_plain_copy() -> None:
    env = E2AEnvelope(method="chat.send", session_id="s1", params={"text": "hi"}, acp_meta={"m": 1})
    merged = merge_params_to_acp_prompt(env)
    assert merged == {"text": "hi"} and merged is not env.params


def test_non_object_meta_is_refused() -> None:
    env = E2AEnvelope(method="session/prompt", params={"text": "hi", "_meta": "x"}, acp_meta={"m": 1})
    with pytest.raises(E2AValidationError, match=r"params\._meta"):
        merge_params_to_acp_prompt(env)


# --- envelope_to_acp_jsonrpc_call ------------------------------------------------------------


def test_call_uses_ext_method_for_ext() -> None:
    env = E2AEnvelope(method="ext", ext_method="_zed/custom", jsonrpc_id="a", params={"x": 1})
    assert envelope_to_acp_jsonrpc_call(env) == {
        "jsonrpc": "2.0",
        "id": "a",
        "method": "_zed/custom",
        "params": {"x": 1},
    }
    assert envelope_to_acp_jsonrpc_call(E2AEnvelope(method="ext"))["method"] == "ext"


def test_call_keeps_gateway_method_names() -> None:
    env = E2AEnvelope(method="chat.send", params={"text": "hi"})
    call = envelope_to_acp_jsonrpc_call(env)
    assert call["method"] == "chat.send"
    assert call["params"] == {"text": "hi"}
    assert call["id"] is None


def test_call_does_not_change_provenance() -> None:
    env = envelope_from_acp_jsonrpc("session/prompt", {"text": "hi"}, jsonrpc_id=1)
    before = env.provenance.to_dict()
    envelope_to_acp_jsonrpc_call(env)
    assert env.provenance.to_dict() == before


# --- e2a_response_to_acp_jsonrpc_response ----------------------------------------------------


def test_acp_projection_wins_and_gets_id() -> None:
    resp = E2AResponse(
        jsonrpc_id=5,
        response_kind="e2a.complete",
        projections={"acp": {"jsonrpc": "2.0", "result": {"stopReason": "end_turn"}}},
    )
    assert e2a_response_to_acp_jsonrpc_response(resp) == {
        "jsonrpc": "2.0",
        "result": {"stopReason": "end_turn"},
        "id": 5,
    }
    explicit = E2AResponse(jsonrpc_id=5, projections={"acp": {"jsonrpc": "2.0", "id": 9, "error": {}}})
    assert e2a_response_to_acp_jsonrpc_response(explicit)["id"] == 9


def test_incomplete_acp_projection_is_ignored() -> None:
    resp = E2AResponse(response_kind="e2a.chunk", projections={"acp": {"jsonrpc": "2.0"}})
    assert e2a_response_to_acp_jsonrpc_response(resp) is None


def test_prompt_result_becomes_result() -> None:
    resp = E2AResponse(jsonrpc_id=1, response_kind="acp.prompt_result", body={"stop_reason": "end_turn"})
    assert e2a_response_to_acp_jsonrpc_response(resp) == {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {"stop_reason": "end_turn"},
    }


def test_jsonrpc_error_becomes_error() -> None:
    body = {"code": -32602, "message": "Invalid params", "data": {"field": "prompt"}}
    resp = E2AResponse(jsonrpc_id="x", response_kind="acp.jsonrpc_error", body=body)
    assert e2a_response_to_acp_jsonrpc_response(resp) == {"jsonrpc": "2.0", "id": "x", "error": body}


def test_e2a_error_with_int_code() -> None:
    resp = E2AResponse(
        jsonrpc_id=3,
        response_kind="e2a.error",
        status="failed",
        body={"code": -32001, "message": "Task not found", "details": {"task_id": "t"}},
    )
    assert e2a_response_to_acp_jsonrpc_response(resp) == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32001, "message": "Task not found", "data": {"details": {"task_id": "t"}}},
    }


def test_e2a_error_with_non_int_code() -> None:
    external = {"protocol": "a2a", "type": "TaskNotFound", "payload": {}}
    resp = E2AResponse(
        jsonrpc_id=3,
        response_kind="e2a.error",
        body={"code": "agent.timeout", "message": None, "external": external},
    )
    assert e2a_response_to_acp_jsonrpc_response(resp) == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {
            "code": -32603,
            "message": "",
            "data": {"external": external, "e2a_code": "agent.timeout"},
        },
    }
    boolean = E2AResponse(response_kind="e2a.error", body={"code": True, "message": 1})
    error = e2a_response_to_acp_jsonrpc_response(boolean)["error"]
    assert error == {"code": -32603, "message": "1", "data": {"e2a_code": True}}


def test_e2a_error_without_code_or_data() -> None:
    resp = E2AResponse(response_kind="e2a.error", body={"message": "boom"})
    assert e2a_response_to_acp_jsonrpc_response(resp) == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32603, "message": "boom"},
    }


@pytest.mark.parametrize("kind", ["e2a.complete", "e2a.chunk", "acp.session_update", "a2a.stream_event", ""])
def test_other_kinds_have_no_acp_response(kind: str) -> None:
    assert e2a_response_to_acp_jsonrpc_response(E2AResponse(response_kind=kind, body={"x": 1})) is None


# --- e2a_response_to_a2a_stream_payload ------------------------------------------------------


@pytest.mark.parametrize(
    ("branch", "key"),
    [
        ("task", "task"),
        ("message", "message"),
        ("status_update", "statusUpdate"),
        ("artifact_update", "artifactUpdate"),
    ],
)
def test_stream_branch_maps_to_a2a_key(branch: str, key: str) -> None:
    payload = {"taskId": "t1", "final": False}
    resp = E2AResponse(response_kind="a2a.stream_event", body={"branch": branch, "payload": payload})
    assert e2a_response_to_a2a_stream_payload(resp) == {key: payload}


def test_a2a_projection_wins_when_single_known_key() -> None:
    projected = {"statusUpdate": {"taskId": "p"}}
    resp = E2AResponse(
        response_kind="a2a.stream_event",
        body={"branch": "task", "payload": {"id": "b"}},
        projections={"a2a": projected},
    )
    assert e2a_response_to_a2a_stream_payload(resp) == projected
    bad = E2AResponse(
        response_kind="a2a.stream_event",
        body={"branch": "task", "payload": {"id": "b"}},
        projections={"a2a": {"status_update": {}}},
    )
    assert e2a_response_to_a2a_stream_payload(bad) == {"task": {"id": "b"}}


@pytest.mark.parametrize("payload", [None, "text", ["a"], 1])
def test_stream_payload_must_be_dict(payload: object) -> None:
    resp = E2AResponse(response_kind="a2a.stream_event", body={"branch": "task", "payload": payload})
    assert e2a_response_to_a2a_stream_payload(resp) is None


def test_unknown_branch_gives_none() -> None:
    resp = E2AResponse(response_kind="a2a.stream_event", body={"branch": "statusUpdate", "payload": {}})
    assert e2a_response_to_a2a_stream_payload(resp) is None


@pytest.mark.parametrize("kind", ["a2a.task", "a2a.message", "e2a.complete", "e2a.error"])
def test_non_stream_event_kinds_give_none(kind: str) -> None:
    resp = E2AResponse(
        response_kind=kind,
        body={"branch": "task", "payload": {}},
        projections={"a2a": {"task": {}}},
    )
    assert e2a_response_to_a2a_stream_payload(resp) is None
