"""The store layer (mesh.store): URLs and their passwords, and ``mesh doctor --store``'s checks."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from mesh.errors import ConfigError
from mesh.store import is_postgres_url, parse_store_url
from mesh.store.checks import store_findings


def test_a_store_url_keeps_its_password_out_of_every_message(tmp_path: Path) -> None:
    secret = tmp_path / "pw"
    secret.write_text("s3cret-from-file\n")
    from_env = parse_store_url("postgresql://mesh@db:5432/mesh", {"MESH_STORE_PASSWORD": "s3cret-env"})
    from_file = parse_store_url("postgresql://mesh@db/mesh", {"MESH_STORE_PASSWORD_FILE": str(secret)})
    inline = parse_store_url("postgresql://mesh:s3cret-inline@db/mesh", {})
    assert from_env.password == "s3cret-env" and from_file.password == "s3cret-from-file"
    for url in (from_env, from_file, inline):
        assert "s3cret" not in str(url) and "s3cret" not in repr(url)
    assert "password=s3cret-env" in from_env.conninfo()
    assert is_postgres_url("postgres://h/db") and not is_postgres_url("/var/tasks.sqlite3")


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("mysql://db/mesh", "not a PostgreSQL URL"),
        ("postgresql://db", "names no database"),
    ],
)
def test_a_bad_store_url_says_what_to_write(value: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as raised:
        parse_store_url(value, {})
    assert "postgresql://USER@HOST:PORT/DATABASE" in str(raised.value)


def test_an_unreadable_password_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="MESH_STORE_PASSWORD_FILE"):
        parse_store_url("postgresql://db/mesh", {"MESH_STORE_PASSWORD_FILE": str(tmp_path / "missing")})


def test_doctor_reports_a_reachable_store_with_its_version(postgres_url: str) -> None:
    findings = store_findings(postgres_url)
    assert all(f.ok for f in findings), [f.line() for f in findings]
    assert "PostgreSQL" in findings[0].seen
    assert any(f.check == "store server version" for f in findings)


def test_doctor_fails_an_unreachable_store_saying_what_to_check() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # closed again: nothing listens there
    [finding] = store_findings(f"postgresql://mesh:hunter2@127.0.0.1:{port}/mesh")
    assert not finding.ok and finding.needed and "unreachable" in finding.seen
    assert "hunter2" not in finding.line() and "MESH_STORE_PASSWORD" in finding.consequence
