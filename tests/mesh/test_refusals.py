"""A refused command is told the way out, by what this machine's state dir says (mesh.brokertools.refusals)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from mesh.brokertools.refusals import refusal_fix
from mesh.brokertools.upstate import UpClaim, UpRecord
from mesh.errors import ConnectError, NotAuthorizedError, SubscribeError

URL = "mqtt://localhost:1884"


def _refused_subscription(url: str = URL, user: str | None = "cli", reason: str = "Not authorized") -> SubscribeError:
    error = SubscribeError("refused", topic_filter="ns/a2a/v1/gateway/response/g/+", reason=reason)
    error.refused_as(url, user)
    return error


@pytest.fixture
def live_up(tmp_path: Path) -> Iterator[UpClaim]:
    """A ``mesh up`` of namespace ``mesh`` alive in ``tmp_path`` (this process holds its lock)."""
    claim = UpClaim.take("mesh", tmp_path)
    yield claim
    claim.release()


def test_no_mesh_up_under_this_state_dir_says_so_and_how_to_join_the_one_that_started_the_broker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path))
    fix = refusal_fix(_refused_subscription(), tmp_path)
    assert fix is not None
    assert f"no mesh up runs here with $MESH_STATE_DIR={tmp_path}" in fix
    assert "same HOME" in fix and "mesh broker-config" in fix and "start the broker" not in fix
    monkeypatch.delenv("MESH_STATE_DIR")
    assert f"the state dir {tmp_path}" in (refusal_fix(_refused_subscription(), tmp_path) or "")


def test_a_mesh_up_of_another_broker_points_at_the_broker_flag(tmp_path: Path, live_up: UpClaim) -> None:
    live_up.write(UpRecord(os.getpid(), "mesh", "mqtt://localhost:1999", secure=True, credentials=str(tmp_path)))
    fix = refusal_fix(_refused_subscription(), tmp_path)
    assert fix is not None and "uses the broker mqtt://localhost:1999, not mqtt://localhost:1884" in fix
    assert "--broker" in fix


def test_the_mesh_up_of_this_broker_blames_the_credentials_used(tmp_path: Path, live_up: UpClaim) -> None:
    live_up.write(UpRecord(os.getpid(), "mesh", URL, secure=True, credentials=str(tmp_path)))
    connack = ConnectError("refused")
    connack.reason_code = 0x87  # CONNACK "Not authorized"
    for refused in (
        _refused_subscription(user="alice"),
        connack.refused_as(URL, "alice"),
        NotAuthorizedError("refused", topic="t", reason="Not authorized", reason_code=0x87).refused_as(URL, "alice"),
    ):
        fix = refusal_fix(refused, tmp_path)
        assert fix is not None and f"(pid {os.getpid()}) started this broker" in fix, refused
        assert "broker user 'alice'" in fix and "MESH_BROKER_PASSWORD_FILE" in fix


def test_what_is_no_refusal_of_an_identity_gets_no_fix(tmp_path: Path) -> None:
    unreachable = ConnectError("nothing listens").refused_as(URL, "cli")  # no CONNACK: no reason code
    assert refusal_fix(unreachable, tmp_path) is None
    assert refusal_fix(_refused_subscription(reason="Quota exceeded"), tmp_path) is None
    assert refusal_fix(SubscribeError("x", topic_filter="t", reason="Not authorized"), tmp_path) is None  # unmarked
    assert refusal_fix(ValueError("no"), tmp_path) is None


def test_the_cli_says_the_state_dir_fix_instead_of_the_transports_guess(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mesh.cli.common import describe

    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path))
    hint = "; if the broker allows anonymous logins, it may still want a user name and password (ejabberd does)"
    refused = ConnectError(f"the MQTT broker at {URL} refused the connection: Not authorized{hint}")
    refused.reason_code, refused.hint = 0x87, hint
    said = describe(refused.refused_as(URL, None))
    assert said.startswith(f"the MQTT broker at {URL} refused the connection: Not authorized; no mesh up runs here")
    assert "ejabberd" not in said and f"$MESH_STATE_DIR={tmp_path}" in said
