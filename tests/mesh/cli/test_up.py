"""``mesh up`` on a real machine: a slow broker on its port, a second ``mesh up``, a killed one,
no ``http`` extra. Each test keeps its own state directory to see what is left behind."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mesh.broker import BrokerSettings
from mesh.brokertools.brokerprobe import SLOW_ROUND_TRIP_MS, round_trip_ms
from mesh.brokertools.localbroker import (
    BrokerUnavailableError,
    LocalBroker,
    default_config_path,
    free_port,
    port_answers,
)
from mesh.brokertools.upstate import (
    UpAlreadyRunningError,
    UpClaim,
    UpRecord,
    running_up,
    running_up_broker_url,
    running_up_of_broker,
    up_files,
)
from mesh.client import MeshClient
from mesh.transport import MqttTransport
from tests.mesh.cli_process import ROOT, Service, mesh, start_mesh
from tests.support import Inbox, alive
from topics import get_agent_discovery_topic, get_gateway_discovery_topic


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def slow_mosquitto(tmp_path: Path, port: int | None = None) -> LocalBroker:
    """A Mosquitto as Debian's stock service runs it: our config without ``set_tcp_nodelay``."""
    config = tmp_path / "slow.conf"
    text = default_config_path().read_text()
    config.write_text("\n".join(line for line in text.splitlines() if "set_tcp_nodelay" not in line))
    try:
        broker = LocalBroker(config, port=port)
    except BrokerUnavailableError as exc:
        pytest.skip(f"needs the mosquitto binary: {exc}")
    broker.start()
    return broker


@pytest.fixture
def slow_broker(tmp_path: Path) -> Iterator[LocalBroker]:
    broker = slow_mosquitto(tmp_path)
    yield broker
    broker.remove()


async def wait_until_gone(pid: int, timeout: float = 10.0) -> None:
    """Wait for ``pid`` (not our child) to end: its pidfd becomes readable then."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()
    loop.add_reader(pidfd, ended.set)
    try:
        await asyncio.wait_for(ended.wait(), timeout)
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)


async def best_echo_round_trip_ms(broker_url: str, namespace: str, tries: int = 20) -> float:
    """The fastest of ``tries`` echo calls through ``broker_url``, in ms."""
    best = float("inf")
    async with MeshClient.connect(broker_url, namespace) as client:
        for _ in range(tries):
            started = time.perf_counter()
            await client.send("echo", "ping")
            best = min(best, (time.perf_counter() - started) * 1000)
    return best


async def up_ready(*args: str, **env: str) -> Service:
    up = await start_mesh("up", "--insecure", *args, **env)
    await up.wait_for_line("mesh up: ready", stream="stdout")
    return up


async def test_beside_a_slow_broker_up_starts_its_own_and_send_finds_it(
    slow_broker: LocalBroker, namespace: str, state: Path
) -> None:
    # The broker on the port mesh up is pointed at (as the stock service on 1883 is by default).
    assert await round_trip_ms(BrokerSettings.from_url(slow_broker.url)) > SLOW_ROUND_TRIP_MS
    env: dict[str, Any] = {"MESH_STATE_DIR": str(state)}
    up = await up_ready("--broker", slow_broker.url, "-n", namespace, MESH_HTTP_PORT=str(free_port()), **env)
    try:
        assert any(f"{slow_broker.url} is slow" in line for line in up.stdout_lines), up.output
        assert any("set_tcp_nodelay true" in line and "systemctl restart" in line for line in up.stderr_lines)
        record = running_up(namespace, state)
        assert record is not None and record.broker_url is not None and record.broker_pid is not None
        assert record.broker_url != slow_broker.url and not any("--broker" in line for line in up.stdout_lines)

        sent = await mesh("send", "echo", "hi", "-n", namespace, **env)  # no flag, no MESH_BROKER_URL
        assert (sent.code, sent.stdout) == (0, "hi\n"), sent

        best = await best_echo_round_trip_ms(record.broker_url, namespace)
        # Not slow as mesh up judges it (a broker without set_tcp_nodelay: ~40 ms), on a loaded machine too.
        assert best < SLOW_ROUND_TRIP_MS, f"echo round trip {best:.1f} ms"
    finally:
        assert await up.stop() == 0, up.output
    assert not alive(record.broker_pid) and list(state.joinpath("up").iterdir()) == []  # nothing left


def held_port_pair() -> tuple[socket.socket, int]:
    """A socket bound (not listening) to ``port + 1``, and ``port``, free when it was picked. The
    pair is picked, not ``free_port() + 1``: a test on the other worker may hold that one."""
    for _ in range(50):
        port = free_port()
        holder = socket.socket()
        try:
            holder.bind(("127.0.0.1", port + 1))
        except OSError:
            holder.close()
            continue
        return holder, port
    raise AssertionError("no two free ports side by side in 50 tries")


async def test_beside_a_slow_broker_a_port_taken_meanwhile_sends_up_to_a_free_one(
    tmp_path: Path, namespace: str, state: Path
) -> None:
    """The port beside the slow broker looks free (nothing listens) but another process holds it
    (as a test on the other worker once did between mesh up's look and its broker's start)."""
    holder, port = held_port_pair()  # bound, not listening: no answer, no bind
    slow_broker = slow_mosquitto(tmp_path, port=port)
    with holder, contextlib.ExitStack() as cleanup:
        cleanup.callback(slow_broker.remove)
        env: dict[str, Any] = {"MESH_STATE_DIR": str(state)}
        up = await up_ready("--broker", slow_broker.url, "-n", namespace, MESH_HTTP_PORT=str(free_port()), **env)
        try:
            assert any("could not listen on port" in line and "instead" in line for line in up.stderr_lines), up.output
            record = running_up(namespace, state)
            assert record is not None and record.broker_url is not None
            assert not record.broker_url.endswith(f":{slow_broker.port + 1}")
            sent = await mesh("send", "echo", "hi", "-n", namespace, **env)
            assert (sent.code, sent.stdout) == (0, "hi\n"), sent
        finally:
            assert await up.stop() == 0, up.output


@pytest.fixture
def broker_on_the_default_port(tmp_path: Path) -> Iterator[str]:
    """The broker on 1883: the machine's own when one runs there (Debian's stock service, which
    lacks set_tcp_nodelay), else a slow one of ours started there."""
    if port_answers("127.0.0.1", 1883):
        yield "mqtt://localhost:1883"
        return
    broker = slow_mosquitto(tmp_path, port=1883)
    yield "mqtt://localhost:1883"
    broker.remove()


async def test_with_a_slow_broker_on_the_default_port_a_plain_up_and_send_are_fast(
    broker_on_the_default_port: str, namespace: str, state: Path
) -> None:
    default = BrokerSettings.from_url(broker_on_the_default_port)
    if await round_trip_ms(default) <= SLOW_ROUND_TRIP_MS:
        pytest.skip("a fast broker holds port 1883 on this machine: there is no slow one to step around")
    env: dict[str, Any] = {"MESH_STATE_DIR": str(state)}
    up = await up_ready("-n", namespace, MESH_HTTP_PORT=str(free_port()), **env)  # no --broker, no MESH_BROKER_URL
    try:
        assert any("localhost:1883 is slow" in line for line in up.stdout_lines), up.output
        record = running_up(namespace, state)
        assert record is not None and record.broker_url is not None and record.broker_pid is not None
        assert BrokerSettings.from_url(record.broker_url).port != 1883
        sent = await mesh("send", "echo", "hi", "-n", namespace, **env)
        assert (sent.code, sent.stdout) == (0, "hi\n"), sent
        best = await best_echo_round_trip_ms(record.broker_url, namespace)
        # Not slow as mesh up judges it (a broker without set_tcp_nodelay: ~40 ms), on a loaded machine too.
        assert best < SLOW_ROUND_TRIP_MS, f"echo round trip {best:.1f} ms"
    finally:
        assert await up.stop() == 0, up.output
    assert not alive(record.broker_pid)


async def test_a_second_up_exits_2_says_what_runs_and_clears_nothing(
    broker_url: str, namespace: str, state: Path, tmp_path: Path
) -> None:
    http_port = str(free_port())
    env: dict[str, Any] = {"MESH_BROKER_URL": broker_url, "MESH_STATE_DIR": str(state)}
    cards = [get_agent_discovery_topic(namespace, "echo"), get_gateway_discovery_topic(namespace, "http")]
    sentinel = f"{namespace}/test/sentinel"
    inbox = Inbox()
    async with MqttTransport(BrokerSettings.from_url(broker_url)) as watcher:
        first = await up_ready("-n", namespace, MESH_HTTP_PORT=http_port, **env)
        try:
            for topic in (*cards, sentinel):
                await watcher.subscribe(topic, inbox)
            await inbox.wait_for(len(cards))  # the retained cards
            second = await mesh("up", "--insecure", "-n", namespace, MESH_HTTP_PORT=http_port, **env)
            assert second.code == 2, second
            assert f"mesh up is already running on namespace '{namespace}' (pid {first.proc.pid})" in second.stderr
            assert f"broker {broker_url}" in second.stderr and f"http://127.0.0.1:{http_port}" in second.stderr
            assert f"--namespace {namespace}-2" in second.stderr and "MESH_HTTP_PORT=" in second.stderr
            # Another state directory hides the first's state; its gateway's port still stops it first.
            elsewhere = {**env, "MESH_STATE_DIR": str(tmp_path / "other-state")}
            other = await mesh("up", "--insecure", "-n", namespace, MESH_HTTP_PORT=http_port, **elsewhere)
            assert other.code == 2 and f"port {http_port} on 127.0.0.1 is already in use" in other.stderr, other
            for refused in (second, other):
                assert "Traceback" not in refused.stderr and "started" not in refused.stderr, refused

            await watcher.publish(sentinel, b"end")  # after everything the refused ones did
            await inbox.wait_until_topic(sentinel)
            for topic in cards:  # the first's cards only, never cleared
                seen = [m.payload for m in inbox.messages if m.topic == topic]
                assert seen and all(card.startswith(b"{") for card in seen), (topic, seen)
            async with MqttTransport(BrokerSettings.from_url(broker_url)) as newcomer:  # sees what is retained
                retained = Inbox()
                await newcomer.subscribe(cards[0], retained)
                [card] = await retained.wait_for(1)
                assert card.payload.startswith(b"{") and card.retain
            assert (await mesh("send", "echo", "still here", "-n", namespace, **env)).stdout == "still here\n"
        finally:
            assert await first.stop() == 0, first.output
    assert not up_files(namespace, state).state.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
async def test_sighup_and_kill_9_leave_no_broker_and_the_next_start_cleans_up(namespace: str, state: Path) -> None:
    url = f"mqtt://localhost:{free_port()}"  # nobody answers: mesh up starts its own there
    files = up_files(namespace, state)
    env: dict[str, Any] = {"MESH_STATE_DIR": str(state), "MESH_HTTP_PORT": str(free_port())}

    hung_up = await up_ready("--broker", url, "-n", namespace, **env)
    record = running_up(namespace, state)
    assert record is not None and record.broker_pid is not None and alive(record.broker_pid)
    assert files.broker_dir.joinpath("mosquitto.log").exists()
    assert await hung_up.stop(signal.SIGHUP) == 0, hung_up.output  # the terminal closed
    assert not alive(record.broker_pid) and not files.state.exists() and not files.broker_dir.exists()

    killed = await up_ready("--broker", url, "-n", namespace, **env)
    record = running_up(namespace, state)
    assert record is not None and record.broker_pid is not None
    assert await killed.stop(signal.SIGKILL) == -signal.SIGKILL
    await wait_until_gone(record.broker_pid)  # the kernel stopped it with its parent
    assert not port_answers("127.0.0.1", int(url.rsplit(":", 1)[1]))
    assert running_up(namespace, state) is None and files.state.exists()  # stale: nobody holds it

    again = await up_ready("--broker", url, "-n", namespace, **env)
    try:
        await again.wait_for_line(f"(pid {killed.proc.pid}) ended without cleaning up")
    finally:
        assert await again.stop(signal.SIGTERM) == 0, again.output
    assert not files.state.exists() and not files.broker_dir.exists()


def test_a_stale_state_whose_broker_still_runs_is_cleaned(namespace: str, state: Path) -> None:
    """Where no kernel stops the broker with its parent (not Linux), the next start stops it."""
    files = up_files(namespace, state)
    orphan = LocalBroker(default_config_path(), workdir=files.broker_dir)
    orphan.start()
    try:
        pid = orphan.pid
        assert pid is not None
        files.state.write_bytes(UpRecord(pid=1, namespace=namespace, broker_url=orphan.url, broker_pid=pid).to_json())
        claim = UpClaim.take(namespace, state)
        try:
            assert orphan._process is not None and orphan._process.wait(10) == 0  # stopped with SIGTERM
            assert not files.broker_dir.exists()
            record = running_up(namespace, state)
            assert record is not None and record.pid == os.getpid() and record.broker_url is None
        finally:
            claim.release()
        assert not files.state.exists() and running_up(namespace, state) is None
    finally:
        orphan.remove()


async def test_without_the_http_extra_up_runs_the_agents_and_says_how_to_add_the_gateway(
    broker_url: str, namespace: str, tmp_path: Path
) -> None:
    blocker = tmp_path / "no-http"
    blocker.mkdir()
    blocker.joinpath("sitecustomize.py").write_text(
        textwrap.dedent(
            """
            import sys

            class NoHttpExtra:  # as if `pip install mqtt-agent-mesh` had no [http]
                def find_spec(self, name, path=None, target=None):
                    if name.split(".")[0] in ("uvicorn", "starlette"):
                        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                    return None

            sys.meta_path.insert(0, NoHttpExtra())
            """
        )
    )
    env: dict[str, Any] = {"MESH_BROKER_URL": broker_url, "PYTHONPATH": f"{blocker}{os.pathsep}{ROOT}"}
    up = await up_ready("-n", namespace, MESH_HTTP_PORT=str(free_port()), **env)
    try:
        assert any("echo, calculator, countdown, orchestrator" in line for line in up.stdout_lines), up.output
        assert any("pip install 'mqtt-agent-mesh[http]'" in line for line in up.stdout_lines), up.output
        assert not any("gateways" in line and "http://" in line for line in up.stdout_lines)
        sent = await mesh("send", "echo", "no gateway needed", "-n", namespace, MESH_BROKER_URL=broker_url)
        assert (sent.code, sent.stdout) == (0, "no gateway needed\n"), sent
    finally:
        assert await up.stop() == 0, up.output
    assert "Traceback" not in up.output

    # A file the user names runs whole or not at all: its gateway makes `mesh run` exit 2, saying why.
    gateway_file = tmp_path / "gateway.yaml"
    gateway_file.write_text(f"namespace: {namespace}\ngateways:\n  - {{kind: http, id: web, port: 0}}\n")
    refused = await mesh("run", str(gateway_file), **env)
    assert refused.code == 2 and "pip install 'mqtt-agent-mesh[http]'" in refused.stderr, refused
    assert "Traceback" not in refused.stderr


def test_the_state_file_names_the_broker_while_its_owner_holds_it(namespace: str, state: Path) -> None:
    claim = UpClaim.take(namespace, state)
    try:
        claim.write(UpRecord(os.getpid(), namespace, "mqtt://127.0.0.1:1884", gateways=["http://127.0.0.1:8080"]))
        assert running_up_broker_url(namespace, state) == "mqtt://127.0.0.1:1884"
        # Another namespace joins the one broker the live mesh ups use, unless they use several.
        assert running_up_broker_url("another/namespace", state) == "mqtt://127.0.0.1:1884"
        second = UpClaim.take("second", state)
        try:
            second.write(UpRecord(os.getpid(), "second", "mqtt://127.0.0.1:1885"))
            assert running_up_broker_url("another/namespace", state) is None
            assert running_up_broker_url("second", state) == "mqtt://127.0.0.1:1885"
        finally:
            second.release()
        with pytest.raises(UpAlreadyRunningError, match=rf"pid {os.getpid()}\): broker mqtt://127.0.0.1:1884"):
            UpClaim.take(namespace, state)  # a lock of another open file, as another process's would be
        credentials = str(state / "credentials")
        claim.write(UpRecord(os.getpid(), namespace, "mqtts://localhost:8883", secure=True, credentials=credentials))
        # A secured broker is found too, with where its credentials are.
        assert running_up_broker_url(namespace, state) == "mqtts://localhost:8883"
        found = running_up_of_broker("mqtts://127.0.0.1:8883", None, state)
        assert found is not None and found.credentials == credentials
        assert running_up_of_broker("mqtts://localhost:9999", namespace, state) is None
    finally:
        claim.release()
    assert running_up_broker_url(namespace, state) is None and not up_files(namespace, state).state.exists()
    # A record written by a newer mesh up still reads; an empty or damaged one reads as none.
    newer = UpRecord.from_json(b'{"pid": 7, "namespace": "ns", "broker_url": "mqtt://h:1", "later": true}')
    assert newer == UpRecord(7, "ns", "mqtt://h:1")
    assert UpRecord.from_json(b"") is None and UpRecord.from_json(b'{"pid": 7}') is None
