"""A2E messages, the type registry and NDJSON framing, without a broker or a process."""

from __future__ import annotations

import base64
import json
import logging

import pytest

from agents.a2e.events import CallFailure, EventTranslator, outcome
from agents.a2e.framing import NdjsonDecoder, encode
from agents.a2e.messages import (
    A2EError,
    A2EEvent,
    A2EMessage,
    ArtifactData,
    EventKind,
    GenericMessage,
    HandshakeResponse,
    LogData,
    ProgressData,
    SkillCallRequest,
    SkillCallResponse,
    SkillDiscoverResponse,
    SkillEvent,
    StatusData,
)
from agents.a2e.registry import TypeRegistry
from agents.updates import Reply, Status, TextArtifact


def test_base_fields_and_compact_line() -> None:
    request = SkillCallRequest(name="echo", arguments={"text": "hi"}, correlation_id="t1")
    line = encode(request)
    assert line.endswith(b"\n") and line.count(b"\n") == 1 and b", " not in line and b": " not in line
    obj = json.loads(line)
    assert obj["type"] == "skill/call/req" and obj["version"] == "1.0" and len(obj["id"]) == 32
    assert isinstance(obj["ts"], float)
    old = request.id
    assert request.new_id() != old and request.id != old


def test_the_documented_a2e_version_key_is_read() -> None:
    message = TypeRegistry().decode({"a2e": "1.0", "id": "x", "type": "ping", "ts": 1.0})
    assert message.type == "ping" and message.version == "1.0" and message.id == "x"


def test_registry_decodes_known_types_and_skill_messages() -> None:
    registry = TypeRegistry()
    resp = registry.decode({"type": "handshake/resp", "req_id": "r", "max_parallel": 2, "ok": False, "reason": "no"})
    assert isinstance(resp, HandshakeResponse) and resp.max_parallel == 2 and not resp.ok and resp.reason == "no"
    found = registry.decode({"type": "skill/discover/resp", "req_id": "r", "skills": [{"name": "s", "extra": 1}]})
    assert isinstance(found, SkillDiscoverResponse) and found.skills[0].name == "s"
    event = registry.decode({"type": "skill/event", "req_id": "r", "kind": "artifact", "seq": 3, "data": {}})
    assert isinstance(event, SkillEvent) and isinstance(event, A2EEvent) and event.kind is EventKind.artifact
    error = registry.decode({"type": "error", "req_id": "r", "code": "timeout", "retryable": True})
    assert isinstance(error, A2EError) and error.retryable


def test_unknown_type_keeps_its_req_id_and_fields() -> None:
    message = TypeRegistry().decode({"type": "tool/call/resp", "req_id": "r1", "data": {"x": 1}})
    assert isinstance(message, GenericMessage) and message.type == "tool/call/resp" and message.req_id == "r1"
    assert message.model_extra == {"data": {"x": 1}}
    # A known type that does not fit its model is kept the same way, so its call still resolves.
    broken = TypeRegistry().decode({"type": "skill/call/resp", "req_id": "r2", "data": "not a result"})
    assert isinstance(broken, GenericMessage) and broken.req_id == "r2"
    odd = TypeRegistry().decode({"type": 7, "id": [1], "req_id": 12})
    assert isinstance(odd, GenericMessage) and odd.req_id == "12"


def test_plugins_extend_the_registry() -> None:
    class ToolCallResponse(A2EMessage):
        TYPE = "tool/call/resp"
        req_id: str
        data: dict[str, int]

    registry = TypeRegistry()
    registry.register({ToolCallResponse.TYPE: ToolCallResponse})
    decoded = registry.decode({"type": "tool/call/resp", "req_id": "r", "data": {"x": 1}})
    assert isinstance(decoded, ToolCallResponse) and decoded.data == {"x": 1}
    with pytest.raises(TypeError, match="A2EMessage subclass"):
        registry.register({"x": dict})  # type: ignore[dict-item]


def _read(data: bytes, max_line_bytes: int = 100, piece: int = 7) -> tuple[list[dict[str, object]], list[str]]:
    """Decode ``data`` fed in pieces of ``piece`` bytes, as a pipe may deliver it."""
    bad: list[str] = []
    decoder = NdjsonDecoder(max_line_bytes=max_line_bytes, on_bad=lambda problem, head: bad.append(problem))
    objects = [o for start in range(0, len(data), piece) for o in decoder.feed(data[start : start + piece])]
    return [*objects, *decoder.close()], bad


@pytest.mark.parametrize("piece", [1, 7, 10_000])
def test_bad_lines_are_reported_once_each_and_reading_goes_on(piece: int) -> None:
    data = b'{"a":1}\nnot json\n[1,2]\n\n' + b'{"long":"' + b"x" * 300 + b'"}\n{"b":2}\n\xff\xfe\n{"c":3}'
    objects, bad = _read(data, piece=piece)
    assert objects == [{"a": 1}, {"b": 2}, {"c": 3}]
    assert len(bad) == 4
    assert bad[0].startswith("not JSON") and "list" in bad[1] and "over the limit of 100" in bad[2]
    assert bad[3].startswith("not JSON")


def test_a_long_line_spanning_reads_is_skipped_whole() -> None:
    objects, bad = _read(b'{"x":"' + b"y" * 200_000 + b'"}\n{"ok":true}\n', max_line_bytes=1000, piece=65536)
    assert objects == [{"ok": True}] and len(bad) == 1 and "200008 bytes" in bad[0]
    objects, bad = _read(b'{"ok":1}\n{"x":"' + b"y" * 5000, max_line_bytes=1000, piece=3000)
    assert objects == [{"ok": 1}] and bad == ["a line of 5006 bytes, over the limit of 1000, cut off by end of file"]


def _event(seq: int, kind: str, **data: object) -> A2EEvent:
    return SkillEvent(req_id="r", seq=seq, kind=EventKind(kind), data=data)


def test_events_become_updates_in_seq_order(caplog: pytest.LogCaptureFixture) -> None:
    translate = EventTranslator("w", "t1")
    chunk = base64.b64encode(b"hello ").decode()
    assert translate.accept(_event(0, "progress", pct=50, message="half")) == [
        Status("half", metadata={"progress": 50})
    ]
    assert translate.accept(_event(2, "artifact", name="out", mime="text/plain", chunk=chunk, final=False)) == []
    with caplog.at_level(logging.INFO, logger="agents.a2e.events"):
        ready = translate.accept(_event(1, "log", level="info", message="note"))
    assert "note" in caplog.text
    assert ready == [TextArtifact("out", "hello ", artifact_id="t1-out", append=False, last_chunk=False)]
    last = base64.b64encode(b"world").decode()
    assert translate.accept(_event(4, "status", message="done")) == []
    assert translate.flush() == [Status("done")]
    assert translate.accept(_event(5, "artifact", name="out", mime="text/plain", chunk=last, final=True)) == [
        TextArtifact("out", "world", artifact_id="t1-out", append=True, last_chunk=True)
    ]


def test_outcomes() -> None:
    ok = SkillCallResponse(req_id="r", data={"success": True, "summary": "done", "data": {"n": 1}})  # type: ignore[arg-type]
    assert outcome(ok) == Reply(text="done", data={"n": 1})
    scalar = SkillCallResponse(req_id="r", data={"success": True, "data": 42})  # type: ignore[arg-type]
    assert outcome(scalar) == Reply(data={"result": 42})
    failed = SkillCallResponse(req_id="r", data={"success": False, "error": "bad", "error_code": "skill_error"})  # type: ignore[arg-type]
    assert outcome(failed) == CallFailure("skill_error", "bad")
    transport = SkillCallResponse(req_id="r", error={"code": "timeout", "message": "slow", "retryable": True})
    assert outcome(transport) == CallFailure("timeout", "slow", True)
    assert outcome(A2EError(req_id="r", code="unknown_skill", message="no")) == CallFailure("unknown_skill", "no")
    odd = outcome(GenericMessage(type="tool/call/resp", req_id="r"))
    assert isinstance(odd, CallFailure) and odd.code == "invalid_message" and "tool/call/resp" in odd.message


def test_event_data_has_the_shape_of_its_kind(caplog: pytest.LogCaptureFixture) -> None:
    assert _event(0, "progress", pct=5, message="m").payload() == ProgressData(pct=5, message="m")
    assert _event(0, "artifact", name="a", chunk="eA==").payload() == ArtifactData(name="a", chunk="eA==")
    assert _event(0, "log", level="error", message="x").payload() == LogData(level="error", message="x")
    assert _event(0, "status", message="s").payload() == StatusData(message="s")
    translate = EventTranslator("w", "t1")
    assert translate.accept(_event(0, "progress", pct="lots")) == []
    assert translate.accept(_event(1, "artifact", name="a", chunk="***")) == []
    assert "progress event skipped" in caplog.text and "chunk is not base64" in caplog.text
    assert translate.accept(_event(2, "status", message="fine")) == [Status("fine")]
