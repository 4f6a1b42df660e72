"""Artifact stores for tests: the embedded store in a temporary folder (its catalog in SQLite, or
in a fresh database of the tests' real PostgreSQL, tests/postgres.py), and a real S3-compatible
HTTP server (moto's server mode, a subprocess on a loopback port) with a fresh bucket.

Test modules import the fixtures they use from here: ``from tests.artifact_stores import ...``.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from mesh.artifacts import ArtifactLimits, ArtifactSettings

STORE_KINDS = ("embedded", "postgres", "s3")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server of this test session (skipped without moto[server])."""
    pytest.importorskip("moto.server", reason="the S3-compatible server needs the artifacts-s3 dev extra")
    pytest.importorskip("obstore")
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:  # readiness: the server answers HTTP
        try:
            httpx.get(f"{url}/moto-api/", timeout=1)
            break
        except httpx.TransportError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"moto's S3 server did not start on port {port}")
            time.sleep(0.05)
    yield url
    server.terminate()
    server.wait(10)


def s3_settings(endpoint: str, limits: ArtifactLimits | None = None) -> ArtifactSettings:
    """Settings for a fresh bucket on the test server."""
    bucket = f"mesh-{uuid.uuid4().hex[:12]}"
    httpx.put(f"{endpoint}/{bucket}").raise_for_status()
    return ArtifactSettings(
        store=f"s3://{bucket}/artifacts",
        options={"endpoint": endpoint, "region": "us-east-1", "access_key_id": "test", "secret_access_key": "test"},
        client_options={"allow_http": True},
        limits=limits or ArtifactLimits(),
    )


def store_settings(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest, limits: ArtifactLimits | None = None
) -> ArtifactSettings:
    if kind == "s3":
        return s3_settings(request.getfixturevalue("s3_endpoint"), limits)
    if kind == "postgres":
        catalog = fresh_database(request.getfixturevalue("postgres_url"))
        return ArtifactSettings(store=catalog, path=str(tmp_path / "artifacts"), limits=limits or ArtifactLimits())
    return ArtifactSettings(path=str(tmp_path / "artifacts"), limits=limits or ArtifactLimits())


def fresh_database(postgres_url: str) -> str:
    """The URL of a new, empty database on the tests' server (each test its own catalog)."""
    from mesh.store import parse_store_url
    from mesh.store import postgres as pg

    name = f"artifacts_{uuid.uuid4().hex[:12]}"
    with pg.connect(parse_store_url(postgres_url)) as db:
        db.execute(f"CREATE DATABASE {name}")  # a fresh identifier of ours, not input
    return postgres_url.rsplit("/", 1)[0] + "/" + name


@pytest.fixture(params=STORE_KINDS)
def store_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)
