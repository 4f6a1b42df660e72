"""``mesh up`` is secured by default: its own broker under the mesh's rules, a user and a
credentials file per component, signed cards; the other commands find all of it through the
state file. ``--secure`` adds TLS; ``--insecure`` is the open mesh, with a warning."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import signal
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from mesh.broker import BrokerSettings, TlsOptions
from mesh.brokertools.localbroker import (
    BrokerUnavailableError,
    LocalBroker,
    default_config_path,
    free_port,
    port_answers,
)
from mesh.brokertools.upstate import running_up, up_files
from mesh.cli.broker_commands import check_broker_log
from mesh.clientids import SLOTS, client_transport
from mesh.config.credentials import private_client_id, read_passwords
from mesh.errors import ConnectError
from mesh.transport import MqttTransport
from mesh.trust import generate_keys, load_private_key, sign_card
from tests.mesh.cli.test_up import wait_until_gone
from tests.mesh.cli_process import Service, mesh, mesh_env, start_mesh
from tests.mesh.test_trust import card
from tests.support import Inbox
from topics import get_agent_discovery_topic

needs_mosquitto = pytest.mark.skipif(
    not (shutil.which("mosquitto") or Path("/usr/sbin/mosquitto").is_file()),
    reason="mesh up runs the local mosquitto binary",
)


@needs_mosquitto
async def test_plain_mesh_up_is_secured_and_the_commands_find_their_credentials(namespace: str, tmp_path: Path) -> None:
    port = free_port()
    url = f"mqtt://localhost:{port}"
    state = {"MESH_STATE_DIR": str(tmp_path)}
    up = await start_mesh("up", "--broker", url, "--namespace", namespace, MESH_HTTP_PORT=str(free_port()), **state)
    try:
        await up.wait_for_line("mesh up: ready", stream="stdout")
        assert any("under the mesh's rules" in line for line in up.stdout_lines), up.output
        assert any(f"send echo hi --namespace {namespace}" in line for line in up.stdout_lines), up.output
        record = running_up(namespace, tmp_path)
        assert record is not None and record.secure and record.credentials is not None
        secure = up_files(namespace, tmp_path).secure_dir
        credentials = Path(record.credentials)
        # One file per component (its password; its signing key beside it), each 0600; the
        # broker's file holds only hashes; the admin password stays with mesh up.
        assert stat.S_IMODE(credentials.stat().st_mode) == 0o700
        names = {"echo", "calculator", "countdown", "orchestrator", "http", "cli"}
        assert names <= {p.name for p in credentials.iterdir()}
        for path in [*(credentials / n for n in names), *(credentials / f"{n}.jwk" for n in names - {"cli"})]:
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
            if not path.name.endswith(".jwk"):
                assert set(read_passwords(path)) == {path.name}  # its own password only
        for private in (secure / "dynamic-security.json", secure / "admin"):
            assert stat.S_IMODE(private.stat().st_mode) == 0o600
        assert "password" not in (secure / "mosquitto-security.conf").read_text()
        assert not (secure / "passwords").exists()

        # Cards are signed (the orchestrator's registry takes signed cards only; it still finds its peers).
        as_cli = BrokerSettings.from_url(url, password_file=str(credentials)).for_identity("cli")
        async with client_transport(as_cli) as watcher:
            cards = Inbox()
            await watcher.subscribe(get_agent_discovery_topic(namespace, "echo"), cards)
            [card] = await cards.wait_for(1)
        assert json.loads(card.payload)["signatures"][0]["protected"]

        sent = await mesh("send", "echo", "hi", "--namespace", namespace, **state)
        assert (sent.code, sent.stdout) == (0, "hi\n"), sent.stderr
        calc = await mesh("send", "orchestrator", "what is 6*7", "-n", namespace, **state)
        assert calc.code == 0 and "42" in calc.stdout, calc.stderr
        listed = await mesh("agents", "-n", namespace, **state)
        assert listed.code == 0 and "echo" in listed.stdout, listed.stderr

        # Without the state file: refused, by the CLI (exit 3, one line) and by the transport.
        anonymous = await mesh(
            "send", "echo", "hi", "--broker", url, "-n", namespace, MESH_STATE_DIR=str(tmp_path / "x")
        )
        assert anonymous.code == 3 and "Not authorized" in anonymous.stderr and "Traceback" not in anonymous.stderr
        assert f"no mesh up runs here with $MESH_STATE_DIR={tmp_path / 'x'}" in anonymous.stderr  # the way out
        with pytest.raises(ConnectError, match="Not authorized"):
            await MqttTransport(BrokerSettings.from_url(url)).connect()
        # The CLI's own credentials have client rights only: no card in an agent's name.
        async with client_transport(as_cli) as forger:
            with pytest.raises(Exception, match=r"(?i)not authori[sz]ed|refused"):
                await forger.publish(get_agent_discovery_topic(namespace, "echo"), b"{}", retain=True, timeout=5)
    finally:
        assert await up.stop() == 0, up.output
    assert not port_answers("127.0.0.1", port)
    assert not up_files(namespace, tmp_path).secure_dir.exists()  # the credentials go with the broker
    assert "Traceback" not in up.output


@needs_mosquitto
async def test_mesh_watch_says_its_banner_first_and_an_enrolment_elsewhere_is_no_warning(
    namespace: str, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MESH_STATE_DIR", str(tmp_path))  # this process's CLI connection claims a slot there too
    port = free_port()
    url = f"mqtt://localhost:{port}"
    state = {"MESH_STATE_DIR": str(tmp_path)}
    up = await start_mesh("up", "--broker", url, "--namespace", namespace, MESH_HTTP_PORT=str(free_port()), **state)
    runs = []
    try:
        await up.wait_for_line("mesh up: ready", stream="stdout")
        # stderr into stdout: one stream, in the order the command wrote it
        argv = [sys.executable, "-m", "mesh.cli", "watch", "-n", namespace]
        proc = await asyncio.create_subprocess_exec(
            *argv, env=mesh_env(**state), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        watch = Service(proc)
        watch._readers = [asyncio.create_task(_read_lines(proc.stdout, watch))]
        await watch.wait_for_line("added    agent    echo", stream="stdout")
        assert watch.stdout_lines[0].startswith(f"watching {namespace!r} at {url}"), watch.output  # before "added"

        # A mesh run of another namespace adds it to the CLI user's rules: the broker (its dynamic-security
        # plugin) closes that user's connections, which reconnect, saying so at INFO only.
        record = running_up(namespace, tmp_path)
        assert record is not None and record.credentials is not None
        as_cli = BrokerSettings.from_url(url, password_file=str(record.credentials)).for_identity("cli")
        reconnected = asyncio.Event()
        with caplog.at_level(logging.INFO, logger="mesh.transport"):
            async with client_transport(as_cli) as cli:
                cli.add_connect_listener(lambda _session: reconnected.set())
                other = tmp_path / "other.yaml"
                other.write_text(
                    f"namespace: {namespace}-2\nagents:\n  - class: agents.builtin.echo:EchoAgent\n    name: robin\n"
                )
                runs.append(await start_mesh("run", str(other), **state))
                await runs[-1].wait_for_line("running agent robin")
                await asyncio.wait_for(reconnected.wait(), 10)
        kicked = [r for r in caplog.records if "after the broker changed its rules" in r.getMessage()]
        assert kicked and all(r.levelno == logging.INFO for r in kicked), caplog.text
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
        # The watch is still there, and said nothing about it.
        mine = tmp_path / "mine.yaml"
        mine.write_text(
            f"namespace: {namespace}\nagents:\n  - class: agents.builtin.echo:EchoAgent\n    name: parrot\n"
        )
        runs.append(await start_mesh("run", str(mine), **state))
        await watch.wait_for_line("added    agent    parrot", stream="stdout")
        assert not [line for line in watch.stdout_lines if "WARNING" in line or "lost" in line], watch.output
        await watch.stop()
    finally:
        for run in runs:
            await run.stop()
        assert await up.stop() == 0, up.output


async def _read_lines(stream: asyncio.StreamReader | None, service: Service) -> None:
    assert stream is not None
    while line := await stream.readline():
        service.stdout_lines.append(line.decode())
        service._changed.set()
    service._changed.set()


@needs_mosquitto
async def test_under_mesh_up_no_session_is_taken_over_with_the_clis_or_the_gateways_credentials(
    namespace: str, tmp_path: Path
) -> None:
    """Replicas run beside ``mesh up`` (``mesh run``, same state dir) get users of their own (slots
    of their agent's, added through the broker's admin user): with the CLI's or the gateway's
    credentials, a CONNECT under the client id of an agent, the gateway or either replica is
    refused (0x87), and the replicas keep serving without losing their sessions."""
    url = f"mqtt://localhost:{free_port()}"
    state = {"MESH_STATE_DIR": str(tmp_path)}
    up = await start_mesh("up", "--broker", url, "--namespace", namespace, MESH_HTTP_PORT=str(free_port()), **state)
    runs = []
    try:
        await up.wait_for_line("mesh up: ready", stream="stdout")
        config = tmp_path / "ticker.yaml"
        config.write_text(
            f"namespace: {namespace}\nagents:\n  - class: agents.builtin.countdown:CountdownAgent\n"
            "    name: ticker\n    shared_subscription: true\n"
        )
        for _ in range(2):  # one after the other: the first adds ticker's users
            run = await start_mesh("run", str(config), "--broker", url, "--log-level", "info", **state)
            runs.append(run)
            await run.wait_for_line("running agent ticker")
        record = running_up(namespace, tmp_path)
        assert record is not None and record.credentials is not None
        credentials = Path(record.credentials)
        as_user = BrokerSettings.from_url(url, password_file=str(credentials)).for_identity
        ticker = as_user("ticker")
        assert (credentials / "ticker.slots").read_text().strip() == str(SLOTS)
        ticker_id = private_client_id(f"{namespace}/ticker", ticker.password)
        victims = {
            "echo": private_client_id(f"{namespace}/echo", as_user("echo").password),
            "http": private_client_id(f"{namespace}/http", as_user("http").password),
            "ticker (slot 0)": ticker_id,
            "ticker (slot 1)": f"{ticker_id}@1",
        }
        for attacker in (as_user("cli"), as_user("http")):
            for victim, stolen in victims.items():
                if victim == attacker.username:
                    continue  # its own id: the same identity again (logged as a takeover, see above)
                with pytest.raises(ConnectError, match="Not authorized") as refused:
                    await MqttTransport(attacker, client_id=stolen).connect()
                assert refused.value.reason_code == 0x87, (attacker.username, victim)
        for _ in range(2):
            sent = await mesh("send", "ticker", "1", "--namespace", namespace, **state)
            assert sent.code == 0 and "Liftoff" in sent.stdout, sent.stderr
    finally:
        for run in runs:
            assert await run.stop() == 0, run.output
        assert await up.stop() == 0, up.output
    for service in (up, *runs):
        assert "taken over" not in service.output and "Traceback" not in service.output, service.output


@needs_mosquitto
async def test_mesh_run_without_credentials_is_told_where_they_are(namespace: str, tmp_path: Path) -> None:
    url = f"mqtt://localhost:{free_port()}"
    state = {"MESH_STATE_DIR": str(tmp_path)}
    up = await start_mesh("up", "--broker", url, "--namespace", namespace, MESH_HTTP_PORT=str(free_port()), **state)
    try:
        await up.wait_for_line("mesh up: ready", stream="stdout")
        config = tmp_path / "agents.yaml"
        config.write_text(
            f"namespace: {namespace}\nagents:\n  - class: agents.builtin.echo:EchoAgent\n    name: parrot\n"
        )
        # Another state dir: this mesh run does not see the mesh up, so it has no credentials.
        run = await mesh("run", str(config), "--broker", url, MESH_STATE_DIR=str(tmp_path / "elsewhere"))
        assert run.code == 3 and "Traceback" not in run.stderr, run.stderr
        assert "no credentials" in run.stderr and "MESH_BROKER_PASSWORD_FILE" in run.stderr
        assert str(up_files(namespace, tmp_path / "elsewhere").secure_dir / "credentials") in run.stderr
    finally:
        assert await up.stop() == 0, up.output


@needs_mosquitto
async def test_mesh_up_secure_adds_tls(namespace: str, tmp_path: Path) -> None:
    port = free_port()
    url = f"mqtts://localhost:{port}"
    state = {"MESH_STATE_DIR": str(tmp_path)}
    up = await start_mesh(
        "up", "--secure", "--broker", url, "--namespace", namespace, MESH_HTTP_PORT=str(free_port()), **state
    )
    try:
        await up.wait_for_line("mesh up: ready", stream="stdout")
        record = running_up(namespace, tmp_path)
        assert record is not None and record.ca_file is not None and record.broker_url == url
        assert stat.S_IMODE((up_files(namespace, tmp_path).secure_dir / "server.key").stat().st_mode) == 0o600
        sent = await mesh("send", "echo", "hi", "-n", namespace, **state)  # CA and credentials found
        assert (sent.code, sent.stdout) == (0, "hi\n"), sent.stderr
        tls = TlsOptions(ca_file=record.ca_file)
        with pytest.raises(ConnectError, match="Not authorized"):
            await MqttTransport(BrokerSettings.from_url(url, tls=tls)).connect()
        with pytest.raises(ConnectError):  # plain MQTT on the TLS port
            await MqttTransport(BrokerSettings.from_url(f"mqtt://localhost:{port}", connect_timeout_s=2)).connect()
    finally:
        assert await up.stop() == 0, up.output


async def test_mesh_up_refuses_a_remote_url_or_a_broker_it_cannot_secure(
    make_broker: Callable[..., LocalBroker], tmp_path: Path
) -> None:
    # A gateway port of its own: the whole-product test's mesh up may hold 8080 (checked first).
    env = {"MESH_STATE_DIR": str(tmp_path), "MESH_HTTP_PORT": str(free_port())}
    for url in ("mqtts://broker.example:8883", "mqtt://user:pw@localhost:1999"):
        result = await mesh("up", "--broker", url, **env)
        assert result.code == 2 and "--insecure" in result.stderr, result.stderr
    open_broker = make_broker()
    result = await mesh("up", "--broker", open_broker.url, **env)
    assert result.code == 3 and "already answers" in result.stderr and "--insecure" in result.stderr, result.stderr


async def test_mesh_up_insecure_is_the_open_mesh_with_a_warning(
    make_broker: Callable[..., LocalBroker], namespace: str, tmp_path: Path
) -> None:
    broker = make_broker()
    env = {"MESH_STATE_DIR": str(tmp_path), "MESH_HTTP_PORT": str(free_port())}
    up = await start_mesh("up", "--insecure", "--broker", broker.url, "-n", namespace, **env)
    try:
        await up.wait_for_line("mesh up: ready", stream="stdout")
        assert any("mesh up --insecure: the broker takes anonymous connections" in line for line in up.stderr_lines)
        sent = await mesh("send", "echo", "hi", "-n", namespace, MESH_STATE_DIR=str(tmp_path))
        assert (sent.code, sent.stdout) == (0, "hi\n"), sent.stderr
        async with MqttTransport(BrokerSettings.from_url(broker.url)):
            pass  # anonymous: accepted
    finally:
        assert await up.stop() == 0, up.output


@needs_mosquitto
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
async def test_a_killed_mesh_up_leaves_no_broker_and_the_next_start_cleans_its_files(
    namespace: str, tmp_path: Path
) -> None:
    port = free_port()
    env = {"MESH_STATE_DIR": str(tmp_path), "MESH_HTTP_PORT": str(free_port())}
    args = ("up", "--broker", f"mqtt://localhost:{port}", "--namespace", namespace)
    killed = await start_mesh(*args, **env)
    await killed.wait_for_line("mesh up: ready", stream="stdout")
    files = up_files(namespace, tmp_path)
    record = running_up(namespace, tmp_path)
    assert record is not None and record.secure and record.broker_pid is not None
    assert await killed.stop(signal.SIGKILL) == -signal.SIGKILL
    await wait_until_gone(record.broker_pid)  # the kernel stopped it with its parent
    assert not port_answers("127.0.0.1", port) and files.secure_dir.exists()

    again = await start_mesh(*args, **env)
    try:
        await again.wait_for_line("mesh up: ready", stream="stdout")
        await again.wait_for_line(f"(pid {killed.proc.pid}) ended without cleaning up")
    finally:
        assert await again.stop(signal.SIGTERM) == 0, again.output
    assert not files.state.exists() and not files.broker_dir.exists()


async def test_mesh_agents_under_trust_shows_forged_cards_as_refused(
    broker_url: str, namespace: str, tmp_path: Path
) -> None:
    keys = tmp_path / "keys"
    generate_keys(keys, ["good", "evil"])
    (keys / "evil.jwk").unlink()
    generate_keys(keys, [])  # the trust store: good's key only (evil's is gone)
    other = tmp_path / "other"
    generate_keys(other, ["evil", "echo"])
    cards = {
        "good": sign_card(card("good"), load_private_key(keys / "good.jwk")),
        "forged": card("forged"),  # unsigned
        "evil": sign_card(card("evil"), load_private_key(other / "evil.jwk")),  # by an untrusted key
        "echo": sign_card(card("echo"), load_private_key(other / "echo.jwk")),  # by an impostor's key of that name
    }
    async with MqttTransport(BrokerSettings.from_url(broker_url)) as publisher:
        for name, forged in cards.items():
            topic = get_agent_discovery_topic(namespace, name)
            await publisher.publish(topic, forged.to_json_bytes(), retain=True)
        try:
            env = {"MESH_TRUST_JWKS": str(keys / "jwks.json"), "MESH_STATE_DIR": str(tmp_path)}
            listed = await mesh("agents", "--broker", broker_url, "-n", namespace, "--wait", "0.5", **env)
            assert listed.code == 0, listed.stderr
            table, _, refused = listed.stdout.partition("refused (not signed by a trusted key of its name): 3")
            assert "good" in table and not any(name in table for name in ("forged", "evil", "echo")), listed.stdout
            assert {line.split(":")[0].strip() for line in refused.strip().splitlines()} == {"forged", "evil", "echo"}
            as_json = await mesh("agents", "--json", "--broker", broker_url, "-n", namespace, "--wait", "0.5", **env)
            entries = json.loads(as_json.stdout)
            assert [e["name"] for e in entries if "card" in e] == ["good"]
            assert sorted(e["name"] for e in entries if "refused" in e) == ["echo", "evil", "forged"]
            names = await mesh("agents", "--names", "--broker", broker_url, "-n", namespace, "--wait", "0.5", **env)
            assert names.stdout.split() == ["good"]
        finally:
            for name in cards:
                await publisher.publish(get_agent_discovery_topic(namespace, name), b"", retain=True)


def test_the_start_check_ignores_a_client_failing_but_not_the_broker_complaining(tmp_path: Path) -> None:
    """The port probe on a TLS listener makes Mosquitto log a failed client connection; whether
    that line lands before the check reads the log is a race, and it is no fault of the rules."""
    broker = LocalBroker(default_config_path(), workdir=tmp_path)
    rules = tmp_path / "dynamic-security.json"
    client_failed = (
        "2026-11-27T01:44:00: Client connection from 127.0.0.1 failed: "
        "error:0A000126:SSL routines::unexpected eof while reading."
    )
    broker.log_file.write_text(f"2026-11-27T01:44:00: mosquitto version 2.0.21 running\n{client_failed}\n")
    check_broker_log(broker, rules)
    broker.log_file.write_text(
        "2026-11-27T01:44:00: Error: Dynamic security plugin config: File is not readable.\n" + client_failed + "\n"
    )
    with pytest.raises(BrokerUnavailableError, match="File is not readable") as raised:
        check_broker_log(broker, rules)
    assert "unexpected eof" not in str(raised.value)


@needs_mosquitto
async def test_mesh_acp_and_mesh_mcp_beside_mesh_up_run_as_gateways_of_their_own_and_leave_no_user(
    namespace: str, tmp_path: Path
) -> None:
    """Each run of ``mesh acp`` / ``mesh mcp`` gets a gateway user, a key among the trusted ones and
    a token issuer entry of its own, and answers; when it ends, all three are gone, and its
    password no longer opens a connection."""
    url = f"mqtt://localhost:{free_port()}"
    state = {"MESH_STATE_DIR": str(tmp_path)}
    up = await start_mesh("up", "--broker", url, "--namespace", namespace, MESH_HTTP_PORT=str(free_port()), **state)
    initialize = {
        "acp": {"protocolVersion": 1},
        "mcp": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}},
    }
    try:
        await up.wait_for_line("mesh up: ready", stream="stdout")
        record = running_up(namespace, tmp_path)
        assert record is not None and record.credentials is not None
        credentials = Path(record.credentials)
        before = {p.name for p in credentials.iterdir()}
        issuers = (credentials / "token-issuers.txt").read_text()
        for command in (["acp", "echo"], ["mcp"]):
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "mesh.cli",
                *command,
                "-n",
                namespace,
                "--log-level",
                "info",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=mesh_env(**state),
            )
            assert proc.stdin is not None and proc.stdout is not None
            request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": initialize[command[0]]}
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            answer = json.loads(await asyncio.wait_for(proc.stdout.readline(), 30))
            assert "result" in answer, answer  # connected, as a user of its own
            added = {p.name for p in credentials.iterdir()} - before
            gateway = min(added)  # its password file; its key beside it
            assert gateway.startswith(command[0] + "-") and added == {gateway, f"{gateway}.jwk"}, added
            assert gateway in (credentials / "token-issuers.txt").read_text()
            assert gateway in (credentials / "jwks.json").read_text()
            settings = BrokerSettings.from_url(url, password_file=str(credentials)).for_identity(gateway)
            proc.stdin.close()
            _, err = await asyncio.wait_for(proc.communicate(), 30)
            assert proc.returncode == 0 and b"Traceback" not in err, err.decode()
            assert f"added broker users for gateway {gateway}".encode() in err
            assert {p.name for p in credentials.iterdir()} == before
            assert (credentials / "token-issuers.txt").read_text() == issuers
            assert gateway not in (credentials / "jwks.json").read_text()
            with pytest.raises(ConnectError, match=r"Not authorized|Bad user name or password"):
                await MqttTransport(settings, client_id=f"{namespace}/{gateway}-x").connect()
        assert not [line for line in up.stderr_lines if "refused the card" in line], up.output
    finally:
        assert await up.stop() == 0, up.output
