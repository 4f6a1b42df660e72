"""A real PostgreSQL for the tests: ``MESH_TEST_POSTGRES_URL`` if set, else a server of the
session's own, made with the distribution's ``initdb`` in a temporary data directory and run as
the ``postgres`` user (initdb refuses root) on a free port, with its socket in that directory.

It listens on every address of this machine (the multi-host tests reach it over their veth
pairs) and asks a password over TCP (scram-sha-256): the tests pass it the way users do, through
``$MESH_STORE_PASSWORD``. Without PostgreSQL's binaries the tests that need it are skipped, saying so.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["PostgresServer", "postgres_server", "postgres_url"]

PASSWORD = "mesh-test-" + uuid.uuid4().hex[:8]
_USER = "postgres"


@dataclass(frozen=True)
class PostgresServer:
    """A server the tests may use: its URL (no password in it), the password, its port."""

    url: str
    password: str | None
    port: int

    def url_for(self, host: str) -> str:
        """The same database reached through ``host`` (a test host's view of this machine)."""
        return self.url.replace("@127.0.0.1:", f"@{host}:", 1)

    @property
    def env(self) -> dict[str, str]:
        """The environment a component needs to log in (the password, as users pass it)."""
        return {"MESH_STORE_PASSWORD": self.password} if self.password else {}


def _binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    return Path(found[-1]).parent if found else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _run(args: list[str], *, user: str | None) -> None:
    done = subprocess.run(args, user=user, capture_output=True, text=True, check=False, timeout=120)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(args[:2])} failed ({done.returncode}): {done.stderr[-2000:] or done.stdout[-2000:]}")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    url = os.environ.get("MESH_TEST_POSTGRES_URL")
    if url:
        yield PostgresServer(url, os.environ.get("MESH_STORE_PASSWORD"), 0)
        return
    bin_dir = _binaries()
    if bin_dir is None:
        pytest.skip("needs PostgreSQL: set MESH_TEST_POSTGRES_URL, or install the postgresql package (.ci/setup)")
    user = _USER if os.geteuid() == 0 else None  # initdb refuses to run as root
    if user is not None:
        try:
            owner = pwd.getpwnam(user)
        except KeyError:
            pytest.skip("as root, PostgreSQL's server runs as the 'postgres' user; the postgresql package makes it")
    # Under the system temp directory, not pytest's tmp_path: the server runs as another user.
    root = Path(tempfile.mkdtemp(prefix="mesh-test-pg-"))
    data, sockets, pwfile = root / "data", root / "sockets", root / "pw"
    sockets.mkdir()
    pwfile.write_text(PASSWORD)
    if user is not None:
        for path in (root, sockets, pwfile):
            os.chown(path, owner.pw_uid, owner.pw_gid)
    port = _free_port()
    args = [str(bin_dir / "initdb"), "-D", str(data), "-U", "mesh", f"--pwfile={pwfile}"]
    _run([*args, "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"], user=user)
    with (data / "pg_hba.conf").open("a") as hba:  # the test hosts' veth addresses (tests/netns.py)
        hba.write("host all all 10.0.0.0/8 scram-sha-256\n")
    # autovacuum_naptime as docs/operations.md recommends for a store of busy agents.
    options = (
        f"-p {port} -k {sockets} -c listen_addresses=* -c fsync=off -c max_connections=200 -c autovacuum_naptime=10s"
    )
    _run([str(bin_dir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-o", options, "-w", "start"], user=user)
    try:
        _run([str(bin_dir / "createdb"), "-h", str(sockets), "-p", str(port), "-U", "mesh", "mesh"], user=user)
        yield PostgresServer(f"postgresql://mesh@127.0.0.1:{port}/mesh", PASSWORD, port)
    finally:
        subprocess.run(
            [str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
            user=user,
            capture_output=True,
            check=False,
            timeout=60,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres_url(postgres_server: PostgresServer, monkeypatch: pytest.MonkeyPatch) -> str:
    """The test server's URL, its password in ``$MESH_STORE_PASSWORD`` for the test."""
    if postgres_server.password:
        monkeypatch.setenv("MESH_STORE_PASSWORD", postgres_server.password)
    return postgres_server.url
