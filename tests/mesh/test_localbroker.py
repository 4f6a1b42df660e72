"""Brokers this process starts leave nothing behind: no process, no temp dir, even on failure."""

from __future__ import annotations

import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mesh.brokertools.localbroker import (
    BrokerUnavailableError,
    ContainerBroker,
    LocalBroker,
    default_config_path,
    port_answers,
    running_broker,
)


@pytest.fixture
def temp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point tempfile at a directory of the test's own, to see what a broker leaves there."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


@pytest.fixture
def occupied_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


needs_mosquitto = pytest.mark.skipif(
    shutil.which("mosquitto") is None and not Path("/usr/sbin/mosquitto").exists(), reason="needs the mosquitto binary"
)


@needs_mosquitto
def test_a_binary_broker_removes_its_directory_when_stopped(temp_root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MESH_NO_DOCKER", "1")
    with running_broker(prefer="binary") as broker:
        assert port_answers(broker.host, broker.port)
        assert [p.name[:15] for p in temp_root.iterdir()] == ["mesh-mosquitto-"]
    assert not port_answers(broker.host, broker.port)
    assert list(temp_root.iterdir()) == []


@needs_mosquitto
def test_a_binary_broker_that_cannot_listen_says_why_and_leaves_nothing(
    temp_root: Path, occupied_port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MESH_NO_DOCKER", "1")
    with (
        pytest.raises(BrokerUnavailableError, match=f"port {occupied_port} on 127.0.0.1 is already in use"),
        running_broker(prefer="binary", port=occupied_port),
    ):
        pass
    assert list(temp_root.iterdir()) == []


def test_no_docker_engine_is_reported_without_leaving_a_directory(
    temp_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:1")  # nothing listens on port 1
    with pytest.raises(BrokerUnavailableError, match="Docker engine"):
        ContainerBroker(default_config_path())
    assert list(temp_root.iterdir()) == []


@needs_mosquitto
def test_what_mosquitto_says_at_start_is_in_its_log_while_it_runs(broker_dir: Path) -> None:
    acl = broker_dir / "acl"
    acl.write_text("pattern read some/topic\n")  # a pattern naming no client: Mosquitto warns at start
    acl.chmod(0o644)
    broker = LocalBroker(default_config_path(), extra_config=f"acl_file {acl}")
    try:
        broker.start()
        deadline = time.monotonic() + 5
        while "does not contain" not in broker.log_file.read_text():
            assert time.monotonic() < deadline, f"the warning is not in the log yet: {broker.log_file.read_text()!r}"
            time.sleep(0.05)
    finally:
        broker.remove()
