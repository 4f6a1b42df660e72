"""E2A models: seed examples, every from_dict compatibility rule, serialization and errors."""

from __future__ import annotations

import ast
import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

import mesh.e2a as e2a
from mesh.e2a import (
    E2A_WIRE_INTERNAL_METADATA_KEYS,
    E2A_WIRE_SERVER_PUSH_KEY,
    E2AAuth,
    E2AEnvelope,
    E2AError,
    E2AFileRef,
    E2AProvenance,
    E2AResponse,
    E2AValidationError,
    IdentityOrigin,
    constants,
    utc_now_iso,
)

# Spec 11.1, verbatim.
SEED_11_1 = json.loads("""
{
  "protocol_version": "1.0",
  "request_id": "req_abc_01",
  "session_id": "sess_xyz",
  "channel": "web",
  "method": "chat.send",
  "is_stream": true,
  "timestamp": "2026-03-28T12:00:00+00:00",
  "identity_origin": "user",
  "user_id": "u_001",
  "params": {
    "content": "Hello",
    "mode": "plan",
    "query": "Hello"
  },
  "provenance": {
    "source_protocol": "e2a"
  }
}
""")

# Spec 11.2 (legacy AgentRequest), verbatim.
SEED_11_2 = json.loads("""
{
  "request_id": "req_legacy_1",
  "channel_id": "feishu",
  "session_id": "sess_feishu_1",
  "req_method": "chat.send",
  "is_stream": true,
  "timestamp": 1774524781.15,
  "params": {
    "content": "List desktop files",
    "mode": "plan",
    "query": "List desktop files"
  },
  "metadata": {
    "feishu_open_id": "ou_xxx",
    "message_id": "om_xxx"
  }
}
""")


def _utc(ts: str) -> datetime:
    parsed = datetime.fromisoformat(ts)
    assert parsed.utcoffset() is not None and parsed.utcoffset().total_seconds() == 0
    return parsed


# --- seed examples ---------------------------------------------------------------------------


def test_seed_11_1_parses_and_round_trips() -> None:
    env = E2AEnvelope.from_dict(SEED_11_1)
    assert env.request_id == "req_abc_01"
    assert env.channel == "web"
    assert env.method == "chat.send"
    assert env.is_stream is True
    assert env.identity_origin is IdentityOrigin.USER
    assert env.params == {"content": "Hello", "mode": "plan", "query": "Hello"}
    assert env.provenance == E2AProvenance(source_protocol="e2a")
    assert env.channel_context == {}

    data = env.to_dict()
    # to_dict writes every field, defaults included.
    assert {k: data[k] for k in SEED_11_1 if k != "provenance"} == {
        k: v for k, v in SEED_11_1.items() if k != "provenance"
    }
    assert data["provenance"] == {
        "source_protocol": "e2a",
        "converter": None,
        "converted_at": None,
        "details": {},
    }
    assert data["channel_context"] == {}
    assert json.loads(json.dumps(data)) == data  # plain JSON all the way down
    assert E2AEnvelope.from_dict(data) == env


def test_seed_11_2_legacy_agent_request() -> None:
    env = E2AEnvelope.from_dict(SEED_11_2)
    assert env.channel == "feishu"
    assert env.method == "chat.send"
    assert env.session_id == "sess_feishu_1"
    assert env.is_stream is True
    assert isinstance(env.timestamp, str)
    assert _utc(env.timestamp) == datetime.fromtimestamp(1774524781.15, tz=UTC)
    assert env.channel_context == {"feishu_open_id": "ou_xxx", "message_id": "om_xxx"}
    assert env.params["content"] == "List desktop files"


# --- compatibility rules, one test each ------------------------------------------------------


def test_channel_id_maps_to_channel_and_channel_wins() -> None:
    assert E2AEnvelope.from_dict({"channel_id": "feishu"}).channel == "feishu"
    both = E2AEnvelope.from_dict({"channel": "web", "channel_id": "feishu"})
    assert both.channel == "web"
    assert E2AResponse.from_dict({"channel_id": "feishu"}).channel == "feishu"


def test_req_method_maps_to_method_and_method_wins() -> None:
    assert E2AEnvelope.from_dict({"req_method": "history.get"}).method == "history.get"
    both = E2AEnvelope.from_dict({"method": "chat.send", "req_method": "history.get"})
    assert both.method == "chat.send"


def test_metadata_merges_into_channel_context_without_overwriting() -> None:
    env = E2AEnvelope.from_dict(
        {
            "channel_context": {"tenant": "kept", "app_id": "ctx_app"},
            "metadata": {"tenant": "ignored", "open_id": "ou_1"},
            "app_id": "top_app",
        }
    )
    assert env.channel_context == {"tenant": "kept", "app_id": "ctx_app", "open_id": "ou_1"}


def test_metadata_merge_drops_wire_internal_keys() -> None:
    metadata = {key: "x" for key in E2A_WIRE_INTERNAL_METADATA_KEYS} | {"open_id": "ou_1"}
    env = E2AEnvelope.from_dict({"metadata": metadata})
    assert env.channel_context == {"open_id": "ou_1"}
    assert len(E2A_WIRE_INTERNAL_METADATA_KEYS) == 4
    assert E2A_WIRE_SERVER_PUSH_KEY in E2A_WIRE_INTERNAL_METADATA_KEYS


def test_app_id_lands_in_channel_context() -> None:
    assert E2AEnvelope.from_dict({"app_id": "cli_1"}).channel_context == {"app_id": "cli_1"}
    assert E2AEnvelope.from_dict({"app_id": ""}).channel_context == {}


def test_legacy_payload_merges_into_params_skipping_empties_without_overwriting() -> None:
    env = E2AEnvelope.from_dict(
        {
            "params": {"query": "from params"},
            "payload": {
                "query": "from payload",
                "mode": "plan",
                "none": None,
                "empty_list": [],
                "empty_obj": {},
                "zero": 0,
                "files": [{"uri": "file:///a.txt"}],
            },
        }
    )
    assert env.params == {
        "query": "from params",
        "mode": "plan",
        "zero": 0,
        "files": [{"uri": "file:///a.txt"}],
    }


def test_binding_migrates_and_sets_source_protocol_when_still_e2a() -> None:
    acp = E2AEnvelope.from_dict({"binding": "acp"})
    assert acp.provenance.source_protocol == "acp"
    assert acp.provenance.details == {"migrated_from_binding": "acp"}
    a2a = E2AEnvelope.from_dict({"binding": {"value": "a2a"}, "provenance": {"source_protocol": "e2a"}})
    assert a2a.provenance.source_protocol == "a2a"
    other = E2AEnvelope.from_dict({"binding": "internal"})
    assert other.provenance.source_protocol == "e2a"
    assert other.provenance.details["migrated_from_binding"] == "internal"


def test_binding_does_not_override_an_explicit_source_protocol() -> None:
    env = E2AEnvelope.from_dict({"binding": "a2a", "provenance": {"source_protocol": "acp", "details": {"k": 1}}})
    assert env.provenance.source_protocol == "acp"
    assert env.provenance.details == {"k": 1, "migrated_from_binding": "a2a"}
    kept = E2AEnvelope.from_dict({"binding": "a2a", "provenance": {"details": {"migrated_from_binding": "acp"}}})
    assert kept.provenance.details == {"migrated_from_binding": "acp"}
    assert kept.provenance.source_protocol == "e2a"


@pytest.mark.parametrize("cls", [E2AEnvelope, E2AResponse])
def test_epoch_timestamp_float_becomes_rfc3339_utc(cls: type) -> None:
    obj = cls.from_dict({"timestamp": 1774524781.5})
    assert _utc(obj.timestamp).timestamp() == 1774524781.5


@pytest.mark.parametrize("cls", [E2AEnvelope, E2AResponse])
def test_epoch_timestamp_int_becomes_rfc3339_utc(cls: type) -> None:
    obj = cls.from_dict({"timestamp": 0})
    assert obj.timestamp == "1970-01-01T00:00:00+00:00"


def test_string_timestamp_passes_through() -> None:
    assert E2AEnvelope.from_dict({"timestamp": "2026-03-28T12:00:00+00:00"}).timestamp == ("2026-03-28T12:00:00+00:00")


def test_agent_id_prefers_agent_id_then_source_agent_id_never_agent_ref() -> None:
    both = E2AEnvelope.from_dict({"agent_id": "tenant_a", "source_agent_id": "up_b"})
    assert both.agent_id == "tenant_a"
    assert both.source_agent_id == "up_b"
    fallback = E2AEnvelope.from_dict({"agent_id": "  ", "source_agent_id": "up_b"})
    assert fallback.agent_id == "up_b"
    ref_only = E2AEnvelope.from_dict({"agent_ref": {"id": "default"}})
    assert ref_only.agent_id is None
    assert ref_only.agent_ref == {"id": "default"}


def test_workspace_key_falls_back_to_workspace_dir() -> None:
    assert E2AEnvelope.from_dict({"workspace_dir": "/srv/ws"}).workspace_key == "/srv/ws"
    both = E2AEnvelope.from_dict({"workspace_key": "abc123", "workspace_dir": "/srv/ws"})
    assert both.workspace_key == "abc123"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(3, 3), ("7", 7), (2.9, 2), ("garbage", 0), (None, 0), ([1], 0), (float("inf"), 0)],
)
def test_response_sequence_is_coerced_to_int_with_fallback_0(raw: object, expected: int) -> None:
    assert E2AResponse.from_dict({"sequence": raw}).sequence == expected


def test_missing_sequence_is_0() -> None:
    assert E2AResponse.from_dict({}).sequence == 0


def test_unknown_keys_are_ignored() -> None:
    env = E2AEnvelope.from_dict({"request_id": "r", "future_field": {"x": 1}})
    assert env == E2AEnvelope(request_id="r")


# --- nested types ----------------------------------------------------------------------------


def test_nested_provenance_auth_and_file_refs_parse() -> None:
    env = E2AEnvelope.from_dict(
        {
            "provenance": {
                "source_protocol": "acp",
                "converter": "x:y",
                "converted_at": "2026-03-28T12:00:00+00:00",
                "details": {"jsonrpc_method": "session/prompt"},
            },
            "auth": {
                "method_id": "oauth",
                "credential_ref": "vault://k",
                "extra_headers": {"X-Tenant": "t1"},
                "_meta": {"m": 1},
            },
            "params": {
                "files": [{"uri": "file:///a.png", "mime_type": "image/png", "size": 10}],
                "attachments": [{"uri": "https://x/b.pdf", "_meta": {"k": "v"}}],
            },
        }
    )
    assert env.provenance.details == {"jsonrpc_method": "session/prompt"}
    assert env.auth == E2AAuth(
        method_id="oauth", credential_ref="vault://k", extra_headers={"X-Tenant": "t1"}, meta={"m": 1}
    )
    assert env.file_refs() == [
        E2AFileRef(uri="file:///a.png", mime_type="image/png", size=10),
        E2AFileRef(uri="https://x/b.pdf", meta={"k": "v"}),
    ]
    # params stays plain JSON so it can be forwarded as is.
    assert env.params["files"][0] == {"uri": "file:///a.png", "mime_type": "image/png", "size": 10}


def test_meta_is_serialized_under_underscore_key_even_when_empty() -> None:
    assert E2AFileRef(uri="u").to_dict() == {
        "uri": "u",
        "name": None,
        "mime_type": None,
        "size": None,
        "_meta": {},
    }
    assert E2AAuth().to_dict()["_meta"] == {}
    ref = E2AFileRef(uri="u")
    ref.meta = None  # type: ignore[assignment]
    assert "_meta" not in ref.to_dict()
    assert E2AFileRef.from_dict(E2AFileRef(uri="u", meta={"a": 1}).to_dict()).meta == {"a": 1}


def test_to_dict_is_recursive_and_turns_enums_into_values() -> None:
    env = E2AEnvelope(
        auth=E2AAuth(bearer_token="t"),
        params={"files": [E2AFileRef(uri="u")], "origin": IdentityOrigin.SERVICE},
    )
    data = env.to_dict()
    assert data["identity_origin"] == "user"
    assert data["auth"]["bearer_token"] == "t"
    assert data["params"]["files"][0]["_meta"] == {}
    assert data["params"]["origin"] == "service"
    assert json.loads(json.dumps(data)) == data


def test_to_dict_keeps_field_order() -> None:
    keys = list(E2AEnvelope().to_dict())
    assert keys[:4] == ["protocol_version", "provenance", "request_id", "jsonrpc_id"]
    assert keys[-3:] == ["channel_context", "a2a_metadata", "acp_meta"]
    rkeys = list(E2AResponse().to_dict())
    assert rkeys[:10] == [
        "protocol_version",
        "response_id",
        "request_id",
        "sequence",
        "is_final",
        "status",
        "response_kind",
        "timestamp",
        "provenance",
        "body",
    ]


def test_defaults() -> None:
    env = E2AEnvelope()
    assert env.protocol_version == constants.E2A_PROTOCOL_VERSION == "1.0"
    assert env.identity_origin is IdentityOrigin.USER
    assert env.provenance.source_protocol == "e2a"
    resp = E2AResponse()
    assert resp.identity_origin is IdentityOrigin.AGENT
    assert (resp.sequence, resp.is_final, resp.status, resp.response_kind) == (0, False, "in_progress", "")


def test_ensure_timestamp_only_fills_when_missing() -> None:
    env = E2AEnvelope()
    env.ensure_timestamp()
    assert _utc(env.timestamp)
    env.timestamp = "2026-01-01T00:00:00+00:00"
    env.ensure_timestamp()
    assert env.timestamp == "2026-01-01T00:00:00+00:00"
    resp = E2AResponse()
    resp.ensure_timestamp()
    assert _utc(resp.timestamp)
    assert _utc(utc_now_iso())


# --- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", [E2AEnvelope, E2AResponse, E2AProvenance, E2AAuth, E2AFileRef])
@pytest.mark.parametrize("data", [None, [], "x", 1])
def test_from_dict_rejects_non_objects(cls: type, data: object) -> None:
    with pytest.raises(E2AValidationError, match=cls.__name__):
        cls.from_dict(data)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"request_id": 5}, "E2AEnvelope.request_id"),
        ({"is_stream": "yes"}, "E2AEnvelope.is_stream"),
        ({"params": ["a"]}, "E2AEnvelope.params"),
        ({"jsonrpc_id": True}, "E2AEnvelope.jsonrpc_id"),
        ({"identity_origin": "robot"}, "E2AEnvelope.identity_origin"),
        ({"timestamp": True}, "E2AEnvelope.timestamp"),
        ({"timestamp": [1]}, "E2AEnvelope.timestamp"),
        ({"provenance": "acp"}, "E2AEnvelope.provenance"),
        ({"provenance": {"details": 1}}, "E2AEnvelope.provenance.details"),
        ({"auth": {"extra_headers": {"X": 1}}}, "E2AEnvelope.auth.extra_headers.X"),
        ({"metadata": "x"}, "E2AEnvelope.metadata"),
        ({"payload": "x"}, "E2AEnvelope.payload"),
        ({"binding": 3}, "E2AEnvelope.binding"),
        ({"expected_output_modes": ["text", 1]}, "E2AEnvelope.expected_output_modes[1]"),
        ({"params": {"files": [{"name": "a"}]}}, "E2AEnvelope.params.files[0].uri"),
        ({"params": {"attachments": "a.txt"}}, "E2AEnvelope.params.attachments"),
        ({"req_method": 1}, "E2AEnvelope.req_method"),
    ],
)
def test_envelope_wrong_types_name_the_field(data: dict, field: str) -> None:
    with pytest.raises(E2AValidationError) as info:
        E2AEnvelope.from_dict(data)
    assert info.value.field == field
    assert field in str(info.value)


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"is_final": 1}, "E2AResponse.is_final"),
        ({"body": "text"}, "E2AResponse.body"),
        ({"status": 1}, "E2AResponse.status"),
        ({"projections": []}, "E2AResponse.projections"),
    ],
)
def test_response_wrong_types_name_the_field(data: dict, field: str) -> None:
    with pytest.raises(E2AValidationError) as info:
        E2AResponse.from_dict(data)
    assert info.value.field == field


def test_errors_are_value_errors() -> None:
    assert issubclass(E2AValidationError, E2AError)
    assert issubclass(E2AError, ValueError)
    with pytest.raises(ValueError):
        E2AFileRef.from_dict({})


# --- public API ------------------------------------------------------------------------------


def test_public_api_is_exported() -> None:
    assert len(e2a.__all__) == len(set(e2a.__all__))
    for name in e2a.__all__:
        assert hasattr(e2a, name), name
    public_constants = {n for n in dir(constants) if n.isupper()}
    assert public_constants <= set(e2a.__all__)


def _imported_modules(path: Path) -> list[str]:
    modules: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            modules.append(node.module or "")
    return modules


# The mesh helpers E2A shares (short_repr, the secret-key rule, timestamps): standard library only.
MESH_HELPERS = {"mesh.errors", "mesh.redaction", "mesh.timestamps"}


def test_subpackage_imports_only_the_standard_library() -> None:
    package_dir = Path(e2a.__file__).parent
    for path in package_dir.glob("*.py"):
        for module in _imported_modules(path):
            top = module.split(".")[0]
            allowed = top in sys.stdlib_module_names or module.startswith("mesh.e2a") or module in MESH_HELPERS
            assert allowed, f"{path.name} imports {module}"
    mesh_dir = package_dir.parent.parent / "mesh"
    for helper in MESH_HELPERS:
        path = mesh_dir / f"{helper.split('.')[1]}.py"
        outside = [m for m in _imported_modules(path) if m.split(".")[0] not in sys.stdlib_module_names]
        assert outside == [], f"{helper} imports {outside}"
