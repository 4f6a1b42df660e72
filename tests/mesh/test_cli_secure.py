"""``mesh up --secure`` and ``mesh send --secure``: TLS, a broker user per component, generated rules."""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal
import stat
import sys
from pathlib import Path

import pytest

from mesh.broker import BrokerSettings, TlsOptions
from mesh.brokertools.localbroker import free_port, port_answers
from mesh.brokertools.upstate import running_up, up_files
from mesh.errors import ConnectError
from mesh.transport import MqttTransport
from tests.mesh.cli_process import mesh, start_mesh
from tests.mesh.test_cli_up import wait_until_gone
from tests.support import Inbox
from topics import get_agent_discovery_topic

needs_mosquitto = pytest.mark.skipif(
    not (shutil.which("mosquitto") or Path("/usr/sbin/mosquitto").is_file()),
    reason="mesh up --secure runs the local mosquitto binary",
)


@needs_mosquitto
async def test_up_secure_then_send_secure(namespace: str, tmp_path: Path) -> None:
    port = free_port()
    url = f"mqtts://localhost:{port}"
    state = {"MESH_STATE_DIR": str(tmp_path)}
    up = await start_mesh(
        "up", "--secure", "--broker", url, "--namespace", namespace, MESH_HTTP_PORT=str(free_port()), **state
    )
    try:
        await up.wait_for_line("mesh up: ready", stream="stdout")
        assert any("with TLS and per-component users" in line for line in up.stdout_lines)
        assert any(f" send echo hi --secure --broker {url}" in line for line in up.stdout_lines)
        files = tmp_path / "secure"
        for secret in ("passwords", "dynamic-security.json", "server.key"):
            assert stat.S_IMODE((files / secret).stat().st_mode) == 0o600, secret

        # Signed cards and user tokens are on: a key per component, every card signed, and the
        # orchestrator (whose registry now takes signed cards only) still finds its peers below.
        keys = files / "keys"
        assert {"echo.jwk", "calculator.jwk", "orchestrator.jwk", "jwks.json"} <= {p.name for p in keys.iterdir()}
        as_cli = BrokerSettings.from_url(url, tls=TlsOptions(ca_file=str(files / "ca.crt")))
        as_cli = dataclasses.replace(as_cli, password_file=str(files / "passwords")).for_identity("cli")
        async with MqttTransport(as_cli) as watcher:
            cards = Inbox()
            await watcher.subscribe(get_agent_discovery_topic(namespace, "echo"), cards)
            [card] = await cards.wait_for(1)
        assert json.loads(card.payload)["signatures"][0]["protected"]

        sent = await mesh("send", "echo", "hi", "--secure", "--broker", url, "--namespace", namespace, **state)
        assert (sent.code, sent.stdout) == (0, "hi\n"), sent.stderr
        calc = await mesh("send", "orchestrator", "what is 6*7", "--secure", "--broker", url, "-n", namespace, **state)
        assert calc.code == 0 and "42" in calc.stdout, calc.stderr

        # The broker's CA but no user: refused, by the CLI (exit 3, one line) and by the transport.
        anonymous = await mesh(
            "send", "echo", "hi", "--broker", url, "-n", namespace, MESH_BROKER_CA_FILE=str(files / "ca.crt"), **state
        )
        assert anonymous.code == 3 and "Not authorized" in anonymous.stderr and "Traceback" not in anonymous.stderr
        tls = TlsOptions(ca_file=str(files / "ca.crt"))
        with pytest.raises(ConnectError, match="Not authorized"):
            await MqttTransport(BrokerSettings.from_url(url, tls=tls)).connect()
        with pytest.raises(ConnectError):  # plain MQTT on the TLS port
            await MqttTransport(BrokerSettings.from_url(f"mqtt://localhost:{port}", connect_timeout_s=2)).connect()
    finally:
        assert await up.stop() == 0, up.output
    assert not port_answers("127.0.0.1", port)
    assert "Traceback" not in up.output


async def test_up_secure_refuses_a_plain_or_remote_broker_url(tmp_path: Path) -> None:
    for url in ("mqtt://localhost:1883", "mqtts://broker.example:8883"):
        result = await mesh("up", "--secure", "--broker", url, MESH_STATE_DIR=str(tmp_path))
        assert result.code == 2 and "mqtts://localhost:PORT" in result.stderr, result.stderr


@needs_mosquitto
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
async def test_a_killed_up_secure_leaves_no_broker_and_the_next_start_cleans_its_files(
    namespace: str, tmp_path: Path
) -> None:
    port = free_port()
    env = {"MESH_STATE_DIR": str(tmp_path), "MESH_HTTP_PORT": str(free_port())}
    args = ("up", "--secure", "--broker", f"mqtts://localhost:{port}", "--namespace", namespace)
    killed = await start_mesh(*args, **env)
    await killed.wait_for_line("mesh up: ready", stream="stdout")
    files = up_files(namespace, tmp_path)
    record = running_up(namespace, tmp_path)
    assert record is not None and record.secure and record.broker_pid is not None
    assert await killed.stop(signal.SIGKILL) == -signal.SIGKILL
    await wait_until_gone(record.broker_pid)  # the kernel stopped it with its parent
    assert not port_answers("127.0.0.1", port) and files.broker_dir.exists()

    again = await start_mesh(*args, **env)
    try:
        await again.wait_for_line("mesh up: ready", stream="stdout")
        await again.wait_for_line(f"(pid {killed.proc.pid}) ended without cleaning up")
    finally:
        assert await again.stop(signal.SIGTERM) == 0, again.output
    assert not files.state.exists() and not files.broker_dir.exists()
