"""NDJSON response log: one compact line per frame, required keys first, secrets redacted."""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path

import pytest

from mesh.e2a import (
    LOG_REQUIRED_KEYS,
    REDACTED,
    E2AEnvelope,
    E2AResponse,
    ResponseLog,
    ResponseSequencer,
    format_response_line,
    is_secret_key,
    redact,
)
from tests.gateways.frames import validate_response_frames


def _frame(**fields: object) -> E2AResponse:
    base: dict[str, object] = {
        "response_id": "r1",
        "request_id": "req_1",
        "response_kind": "e2a.complete",
        "timestamp": "2026-03-29T12:00:00+00:00",
    }
    base.update(fields)
    return E2AResponse(**base)  # type: ignore[arg-type]


def test_one_compact_line_with_required_keys_first() -> None:
    line = format_response_line(_frame(body={"result": {"content": "Hello world"}}))
    assert "\n" not in line and ", " not in line and ": " not in line
    data = json.loads(line)
    assert list(data)[: len(LOG_REQUIRED_KEYS)] == list(LOG_REQUIRED_KEYS)
    assert data["request_id"] == "req_1"
    assert data["response_id"] == "r1"
    assert data["sequence"] == 0
    assert data["is_final"] is False
    assert data["response_kind"] == "e2a.complete"
    assert data["timestamp"] == "2026-03-29T12:00:00+00:00"
    assert data["body"] == {"result": {"content": "Hello world"}}


def test_required_keys_present_even_when_null() -> None:
    data = json.loads(format_response_line(E2AResponse()))
    assert set(LOG_REQUIRED_KEYS) <= set(data)


def test_auth_fields_and_extra_headers_are_redacted() -> None:
    auth = {
        "method_id": "oauth",
        "bearer_token": "eyJhbGciOi.secret",
        "api_key_ref": "vault://key",
        "credential_ref": "vault://cred",
        "extra_headers": {"X-Tenant": "t1", "Authorization": "Bearer abc"},
        "_meta": {},
    }
    line = format_response_line(_frame(metadata={"auth": auth}))
    logged = json.loads(line)["metadata"]["auth"]
    assert logged == {
        "method_id": "oauth",
        "bearer_token": REDACTED,
        "api_key_ref": REDACTED,
        "credential_ref": REDACTED,
        "extra_headers": {"X-Tenant": REDACTED, "Authorization": REDACTED},
        "_meta": {},
    }
    for secret in ("eyJhbGciOi", "vault://", "Bearer abc", "t1"):
        assert secret not in line


def test_secret_named_keys_are_redacted_at_any_depth() -> None:
    frame = _frame(
        body={
            "Authorization": "Bearer top",
            "result": {
                "steps": [
                    {"tool": "login", "args": {"password": "hunter2", "user": "bob"}},
                    {"nested": [{"config": {"API_KEY": "sk-1", "client_secret": "cs-1"}}]},
                ],
                "authToken": "tok-1",
                "x-auth-token": "tok-2",
            },
        },
        projections={"acp": {"_meta": {"credentials": {"user": "u", "pass": "p"}}}},
        channel_context={"access_token": "tok-3", "token": "tok-4"},
        metadata={"Secret": "s-1"},
    )
    line = format_response_line(frame)
    for secret in ("Bearer top", "hunter2", "sk-1", "cs-1", "tok-1", "tok-2", "tok-3", "tok-4", "s-1"):
        assert secret not in line, secret
    data = json.loads(line)
    assert data["body"]["result"]["steps"][0]["args"] == {"password": REDACTED, "user": "bob"}
    assert data["projections"]["acp"]["_meta"]["credentials"] == REDACTED
    assert data["channel_context"] == {"access_token": REDACTED, "token": REDACTED}


def test_harmless_lookalike_keys_are_kept() -> None:
    usage = {"inputTokens": 12, "max_tokens": 100, "tokenizer": "bpe", "token_type": "x", "session_id": "s"}
    data = json.loads(format_response_line(_frame(body={"usage": usage, "bearer_token": None})))
    assert data["body"]["usage"] == usage
    assert data["body"]["bearer_token"] is None


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("authorization", True),
        ("Authorization", True),
        ("token", True),
        ("refresh_token", True),
        ("authToken", True),
        ("AUTH-TOKEN", True),
        ("password", True),
        ("db_password", True),
        ("secret", True),
        ("clientSecret", True),
        ("api_key", True),
        ("x-api-key", True),
        ("apiKey", True),
        ("credentials", True),
        ("bearer_token", True),
        ("api_key_ref", True),
        ("credential_ref", True),
        ("input_tokens", False),
        ("tokenizer", False),
        ("content", False),
        ("method_id", False),
    ],
)
def test_is_secret_key(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


def test_redact_does_not_mutate_its_input() -> None:
    data = {"a": [{"password": "p"}], "extra_headers": {"H": "v"}}
    redact(data)
    assert data == {"a": [{"password": "p"}], "extra_headers": {"H": "v"}}
    assert redact({"extra_headers": "raw"}) == {"extra_headers": REDACTED}


def test_log_to_stream_flushes_what_it_wrote() -> None:
    class Recorder(io.StringIO):
        flushes = 0

        def flush(self) -> None:
            self.flushes += 1
            super().flush()

    stream = Recorder()
    seq = ResponseSequencer(E2AEnvelope(request_id="req_1"))
    log = ResponseLog(stream)
    log.write(seq.chunk("Hello"))
    assert log.flush(5)
    assert stream.flushes >= 1 and stream.getvalue().count("\n") == 1
    log.write(seq.complete({"content": "Hello"}))
    log.close()
    assert not stream.closed  # a stream passed in is not ours to close
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and stream.getvalue().endswith("\n")
    frames = [E2AResponse.from_dict(json.loads(line)) for line in lines]
    assert [f.sequence for f in validate_response_frames(frames)] == [0, 1]


def test_a_write_does_not_wait_on_a_stalled_disk() -> None:
    """write() runs on the gateway's event loop: a stream that stalls must not stall it."""
    release = threading.Event()

    class Stalled(io.StringIO):
        def write(self, text: str) -> int:
            release.wait(10)
            return super().write(text)

    stream = Stalled()
    log = ResponseLog(stream, max_queued=2)
    seq = ResponseSequencer(E2AEnvelope(request_id="req_s"))
    returned = threading.Event()

    def writing() -> None:
        for _ in range(5):  # more than the queue holds: the rest are dropped, not waited for
            log.write(seq.chunk("x"))
        returned.set()

    threading.Thread(target=writing, daemon=True).start()
    try:
        assert returned.wait(5), "ResponseLog.write blocked on the stream"
    finally:
        release.set()
    log.close()
    written = len(stream.getvalue().splitlines())
    assert written + log.dropped == 5 and written >= 1


def test_log_to_path_appends_and_replays(tmp_path: Path) -> None:
    path = tmp_path / "responses.ndjson"
    seq = ResponseSequencer(E2AEnvelope(request_id="req_9"))
    with ResponseLog(path) as log:
        returned = log.write(seq.chunk("a"))
    with ResponseLog(str(path)) as log:
        log.write(seq.error(-32603, "boom", {"password": "p"}))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == returned
    assert [json.loads(line)["sequence"] for line in lines] == [0, 1]
    assert json.loads(lines[1])["body"]["details"] == {"password": REDACTED}


def test_concurrent_writers_do_not_interleave_lines(tmp_path: Path) -> None:
    path = tmp_path / "responses.ndjson"
    seq = ResponseSequencer(E2AEnvelope(request_id="req_c"))
    log = ResponseLog(path)

    def work() -> None:
        for _ in range(50):
            log.write(seq.chunk("x" * 200))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    lines = path.read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(line)["sequence"] for line in lines) == list(range(200))
