"""Response sequencing: spec 12.8 frames and the 12.3 invariants, produced and checked."""

from __future__ import annotations

import itertools
import json
import threading

import pytest

from mesh.e2a import (
    E2AEnvelope,
    E2AProvenance,
    E2AResponse,
    E2ASequenceError,
    E2AStreamClosedError,
    E2AValidationError,
    IdentityOrigin,
    ResponseSequencer,
    e2a_response_to_a2a_stream_payload,
    e2a_response_to_acp_jsonrpc_response,
)
from tests.gateways.frames import validate_response_frames

# Spec 12.8, verbatim: two chunks and a final.
SEED_12_8 = """\
{"protocol_version":"1.0","response_id":"r1","request_id":"req_1","sequence":0,"is_final":false,"status":"in_progress","response_kind":"e2a.chunk","timestamp":"2026-03-29T12:00:00+00:00","provenance":{"source_protocol":"e2a"},"body":{"delta_kind":"text","delta":"Hello"}}
{"protocol_version":"1.0","response_id":"r2","request_id":"req_1","sequence":1,"is_final":false,"status":"in_progress","response_kind":"e2a.chunk","timestamp":"2026-03-29T12:00:01+00:00","provenance":{"source_protocol":"e2a"},"body":{"delta_kind":"text","delta":" world"}}
{"protocol_version":"1.0","response_id":"r3","request_id":"req_1","sequence":2,"is_final":true,"status":"succeeded","response_kind":"e2a.complete","timestamp":"2026-03-29T12:00:02+00:00","provenance":{"source_protocol":"e2a"},"body":{"result":{"content":"Hello world"}}}
"""  # noqa: E501


def _seed_frames() -> list[E2AResponse]:
    return [E2AResponse.from_dict(json.loads(line)) for line in SEED_12_8.splitlines()]


def _envelope(**overrides: object) -> E2AEnvelope:
    fields: dict[str, object] = {
        "request_id": "req_1",
        "jsonrpc_id": 7,
        "correlation_id": "corr",
        "task_id": "t1",
        "context_id": "c1",
        "session_id": "s1",
        "message_id": "m_in",
        "channel": "web",
        "user_id": "u1",
        "source_agent_id": "up",
        "is_stream": True,
        "method": "chat.send",
    }
    fields.update(overrides)
    return E2AEnvelope(**fields)  # type: ignore[arg-type]


def _pinned(env: E2AEnvelope | None = None) -> ResponseSequencer:
    ids = (f"r{i}" for i in itertools.count(1))
    return ResponseSequencer(
        env or _envelope(),
        clock=lambda: "2026-03-29T12:00:00+00:00",
        new_id=lambda: next(ids),
    )


# --- spec 12.8 -------------------------------------------------------------------------------


def test_seed_12_8_frames_parse_and_satisfy_invariants() -> None:
    frames = _seed_frames()
    assert [f.sequence for f in frames] == [0, 1, 2]
    assert [f.is_final for f in frames] == [False, False, True]
    assert frames[2].body == {"result": {"content": "Hello world"}}
    assert validate_response_frames(reversed(frames)) == frames
    for frame, line in zip(frames, SEED_12_8.splitlines(), strict=False):
        original = json.loads(line)
        data = frame.to_dict()
        assert {k: data[k] for k in original if k != "provenance"} == {
            k: v for k, v in original.items() if k != "provenance"
        }


def test_sequencer_reproduces_seed_12_8() -> None:
    seq = _pinned(E2AEnvelope(request_id="req_1"))
    produced = [seq.chunk("Hello"), seq.chunk(" world"), seq.complete({"content": "Hello world"})]
    for mine, seed in zip(produced, _seed_frames(), strict=False):
        assert (mine.request_id, mine.sequence, mine.is_final, mine.status, mine.response_kind, mine.body) == (
            seed.request_id,
            seed.sequence,
            seed.is_final,
            seed.status,
            seed.response_kind,
            seed.body,
        )
    assert [f.response_id for f in produced] == ["r1", "r2", "r3"]


# --- sequencer -------------------------------------------------------------------------------


def test_frames_echo_the_envelope_correlation_fields() -> None:
    frame = _pinned().chunk("x")
    assert frame.request_id == "req_1"
    assert frame.jsonrpc_id == 7
    assert frame.correlation_id == "corr"
    assert (frame.task_id, frame.context_id, frame.session_id) == ("t1", "c1", "s1")
    assert (frame.channel, frame.user_id, frame.source_agent_id) == ("web", "u1", "up")
    assert frame.is_stream is True
    assert frame.method == "chat.send"
    assert frame.message_id is None  # the request's message id is not the response's
    assert frame.identity_origin is IdentityOrigin.AGENT
    assert frame.protocol_version == "1.0"
    assert frame.timestamp == "2026-03-29T12:00:00+00:00"


def test_default_ids_are_uuid_hex_and_timestamps_rfc3339() -> None:
    seq = ResponseSequencer(_envelope())
    a, b = seq.chunk("a"), seq.chunk("b")
    assert len(a.response_id) == 32 and int(a.response_id, 16) >= 0
    assert a.response_id != b.response_id
    assert a.timestamp.endswith("+00:00")


def test_sequence_runs_from_zero_with_exactly_one_final() -> None:
    seq = _pinned()
    frames = [
        seq.chunk("think", delta_kind="reasoning"),
        seq.event("acp.session_update", {"sessionUpdate": "tool_call", "toolCallId": "t"}),
        seq.chunk({"name": "tool"}, delta_kind="tool", mime_type="application/json"),
        seq.complete({"content": "done"}),
    ]
    assert [f.sequence for f in frames] == [0, 1, 2, 3]
    assert [f.is_final for f in frames] == [False, False, False, True]
    assert frames[2].body == {"delta_kind": "tool", "delta": {"name": "tool"}, "mime_type": "application/json"}
    assert frames[3].status == "succeeded"
    assert seq.finished and seq.next_sequence == 4
    assert validate_response_frames(frames) == frames


@pytest.mark.parametrize(
    "emit_after",
    [
        lambda s: s.chunk("late"),
        lambda s: s.complete("again"),
        lambda s: s.error(-32603, "late"),
        lambda s: s.a2a_stream_event("task", {}),
        lambda s: s.event("ext", {}),
    ],
)
def test_emit_after_final_raises(emit_after) -> None:  # type: ignore[no-untyped-def]
    seq = _pinned()
    seq.chunk("a")
    seq.complete("done")
    with pytest.raises(E2AStreamClosedError, match="req_1"):
        emit_after(seq)
    assert seq.next_sequence == 2


def test_error_frame_is_failed_e2a_error_and_final() -> None:
    seq = _pinned()
    frame = seq.error("agent.timeout", "no answer", {"after_s": 30}, external={"protocol": "a2a"})
    assert frame.status == "failed"
    assert frame.response_kind == "e2a.error"
    assert frame.is_final
    assert frame.body == {
        "code": "agent.timeout",
        "message": "no answer",
        "details": {"after_s": 30},
        "external": {"protocol": "a2a"},
    }
    with pytest.raises(E2AStreamClosedError):
        seq.chunk("x")
    assert e2a_response_to_acp_jsonrpc_response(frame)["error"]["code"] == -32603


def test_non_final_error_keeps_the_stream_open() -> None:
    seq = _pinned()
    warning = seq.error(-32603, "tool failed", final=False)
    assert warning.body["details"] == {}
    assert not warning.is_final and not seq.finished
    assert seq.complete("recovered").sequence == 1


def test_failed_frames_must_be_e2a_error() -> None:
    seq = _pinned()
    with pytest.raises(E2ASequenceError, match=r"e2a\.error"):
        seq.emit("acp.jsonrpc_error", {"code": -1, "message": "x"}, status="failed", final=True)
    assert seq.next_sequence == 0  # a refused frame uses no sequence number


def test_final_frame_cannot_be_in_progress() -> None:
    with pytest.raises(E2ASequenceError, match="in_progress"):
        _pinned().emit("e2a.complete", {"result": 1}, final=True)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: s.emit("e2a.unknown", {}), "response_kind"),
        (lambda s: s.emit("e2a.chunk", {}, status="done"), "status"),
        (lambda s: s.emit("e2a.chunk", ["x"]), "body"),
        (lambda s: s.chunk("x", delta_kind="audio"), "delta_kind"),
        (lambda s: s.a2a_stream_event("statusUpdate", {}), "branch"),
        (lambda s: s.a2a_stream_event("task", "x"), "payload"),
    ],
)
def test_bad_frames_are_refused(call, match: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(E2AValidationError, match=match):
        call(_pinned())


def test_finish_with_acp_prompt_result() -> None:
    seq = _pinned()
    frame = seq.finish("acp.prompt_result", {"stop_reason": "end_turn"})
    assert (frame.is_final, frame.status) == (True, "succeeded")
    assert e2a_response_to_acp_jsonrpc_response(frame) == {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"stop_reason": "end_turn"},
    }


def test_a2a_stream_events() -> None:
    seq = _pinned()
    working = seq.a2a_stream_event("status_update", {"taskId": "t1", "status": {"state": "working"}})
    done = seq.a2a_stream_event("status_update", {"taskId": "t1", "final": True}, final=True)
    assert (working.status, working.is_final) == ("in_progress", False)
    assert (done.status, done.is_final, done.sequence) == ("succeeded", True, 1)
    assert e2a_response_to_a2a_stream_payload(done) == {"statusUpdate": {"taskId": "t1", "final": True}}


def test_frames_do_not_alias_caller_data() -> None:
    seq = _pinned()
    body = {"sessionUpdate": "plan"}
    frame = seq.event("acp.session_update", body)
    body["sessionUpdate"] = "changed"
    assert frame.body == {"sessionUpdate": "plan"}


def test_custom_provenance_is_copied_per_frame() -> None:
    prov = E2AProvenance(source_protocol="acp", details={"k": 1})
    seq = ResponseSequencer(_envelope(), provenance=prov)
    a, b = seq.chunk("a"), seq.chunk("b")
    assert a.provenance == prov and a.provenance is not b.provenance
    a.provenance.details["k"] = 2
    assert b.provenance.details == {"k": 1}


def test_request_id_is_required() -> None:
    with pytest.raises(E2AValidationError, match="request_id"):
        ResponseSequencer(E2AEnvelope())


def test_concurrent_emits_get_distinct_sequences() -> None:
    seq = ResponseSequencer(_envelope())
    frames: list[E2AResponse] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(50):
            frame = seq.chunk("x")
            with lock:
                frames.append(frame)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    frames.append(seq.complete())
    assert len(validate_response_frames(frames)) == 201


# --- validate_response_frames ----------------------------------------------------------------


def _frames(*specs: tuple[int, bool, str, str]) -> list[E2AResponse]:
    return [
        E2AResponse(request_id="req_1", sequence=s, is_final=f, status=st, response_kind=k) for s, f, st, k in specs
    ]


@pytest.mark.parametrize(
    ("frames", "match"),
    [
        ([], "no frames"),
        (_frames((1, True, "succeeded", "e2a.complete")), "0..0"),
        (_frames((0, False, "in_progress", "e2a.chunk"), (0, True, "succeeded", "e2a.complete")), "repeats"),
        (_frames((0, False, "in_progress", "e2a.chunk"), (2, True, "succeeded", "e2a.complete")), "gaps"),
        (_frames((0, False, "in_progress", "e2a.chunk")), "exactly one final"),
        (_frames((0, True, "succeeded", "e2a.chunk"), (1, True, "succeeded", "e2a.complete")), "exactly one"),
        (_frames((0, True, "succeeded", "e2a.complete"), (1, False, "in_progress", "e2a.chunk")), "follow"),
        (_frames((0, True, "failed", "e2a.complete")), "e2a.error"),
        (
            [E2AResponse(request_id="a", is_final=True), E2AResponse(request_id="b", sequence=1)],
            "request_id",
        ),
    ],
)
def test_validation_rejects_broken_streams(frames: list[E2AResponse], match: str) -> None:
    with pytest.raises(E2ASequenceError, match=match):
        validate_response_frames(frames)


def test_validation_allows_a_cut_short_stream_when_asked() -> None:
    frames = _frames((0, False, "in_progress", "e2a.chunk"), (1, False, "in_progress", "e2a.chunk"))
    assert validate_response_frames(frames, require_final=False) == frames
    with pytest.raises(E2ASequenceError):
        validate_response_frames(frames)
