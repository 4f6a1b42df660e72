"""The ``mesh`` command, run in subprocesses against the real broker."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from agents.a2e import WorkerAgent
from mesh.broker import BrokerSettings
from mesh.brokertools.localbroker import free_port, port_answers
from mesh.cli.run_commands import mesh_command
from mesh.transport import InboundMessage, MqttTransport
from tests.agents.service_agents import Decider
from tests.conftest import ServeAgent
from tests.mesh.cli_process import mesh, start_mesh
from tests.support import Inbox
from topics import get_agent_discovery_topic, get_discovery_subscription_topic, get_gateway_discovery_topic


def agents_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "agents.yaml"
    path.write_text(textwrap.dedent(body))
    return path


async def test_up_then_send_as_the_readme_says(broker_url: str, namespace: str) -> None:
    http_port = free_port()
    up = await start_mesh(
        "up", "--insecure", "--namespace", namespace, MESH_BROKER_URL=broker_url, MESH_HTTP_PORT=str(http_port)
    )
    try:
        banner = await up.wait_for_line("mesh up: ready", stream="stdout")
        assert banner
        assert any("echo, calculator, countdown, orchestrator" in line for line in up.stdout_lines)
        assert any(f"http http://127.0.0.1:{http_port}" in line for line in up.stdout_lines)  # the gateway's URL
        assert any(f"dashboard  http://127.0.0.1:{http_port}/ui" in line for line in up.stdout_lines)
        assert any(f"chat       http://127.0.0.1:{http_port}/chat" in line for line in up.stdout_lines)
        env: dict[str, Any] = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
        hi = await mesh("send", "echo", "hi", **env)
        assert (hi.code, hi.stdout) == (0, "hi\n")
        calc = await mesh("send", "calculator", "what is (1/3) * 3 + 2^3?", **env)
        assert (calc.code, calc.stdout.strip()) == (0, "9")
        streamed = await mesh("send", "countdown", "1", "--stream", **env)
        assert streamed.code == 0
        assert "[working] 1..." in streamed.stdout and "[completed] Liftoff! Counted down from 1." in streamed.stdout
        await up.wait_for_line("countdown: task")  # one log line per task transition
    finally:
        code = await up.stop(signal.SIGINT)
    assert code == 0, up.output
    assert any("agent echo stopped" in line for line in up.stderr_lines)


async def test_up_starts_mosquitto_when_no_broker_answers(namespace: str) -> None:
    port = free_port()
    url = f"mqtt://localhost:{port}"
    up = await start_mesh(
        "up", "--insecure", "--broker", url, "--namespace", namespace, MESH_HTTP_PORT=str(free_port())
    )
    try:
        await up.wait_for_line("mesh up: ready", stream="stdout")
        assert any("started here from mosquitto.conf" in line for line in up.stdout_lines)
        sent = await mesh("send", "echo", "from a fresh broker", "--broker", url, "--namespace", namespace)
        assert (sent.code, sent.stdout) == (0, "from a fresh broker\n")
    finally:
        assert await up.stop() == 0, up.output
    assert not port_answers("127.0.0.1", port)  # the broker it started is gone


async def test_run_serves_the_agents_of_a_file_and_stops_on_sigterm(
    broker_url: str, namespace: str, tmp_path: Path
) -> None:
    config = agents_file(
        tmp_path,
        f"""
        namespace: {namespace}
        broker: {broker_url}
        agents:
          - class: tests.agents.service_agents:Echo
            name: parrot
          - class: tests.agents.service_agents:Blocker
        """,
    )
    run = await start_mesh("run", str(config))
    try:
        await run.wait_for_line("running agent parrot, agent blocker")
        # No mesh up here: it says, once, that it joins that broker anonymously, and how to be secured.
        warned = [line for line in run.stderr_lines if "WARNING" in line and "no `mesh up` runs here" in line]
        assert len(warned) == 1, run.output
        assert f"with the broker {broker_url}" in warned[0] and "anonymously, as the open mesh" in warned[0]
        assert "start `mesh up` first" in warned[0]
        env: dict[str, Any] = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
        sent = await mesh("send", "parrot", "polly", "--json", **env)
        assert sent.code == 0
        task = json.loads(sent.stdout)
        assert task["status"]["state"] == "completed" and task["kind"] == "task"

        got = await mesh("task", "get", "parrot", task["id"], "--history", "1", **env)
        assert got.code == 0 and "state    completed" in got.stdout and "message  polly" in got.stdout

        slow = await mesh("send", "blocker", "forever", "--timeout", "0.5", **env)
        assert slow.code == 5 and "no reply" in slow.stderr
        assert f"asked the broker {broker_url} on namespace {namespace!r} without credentials" in slow.stderr
    finally:
        code = await run.stop(signal.SIGTERM)
    assert code == 0, run.output


async def test_errors_exit_with_their_code_and_a_message(broker_url: str, namespace: str, tmp_path: Path) -> None:
    nobody = f"mqtt://127.0.0.1:{free_port()}"
    unreachable = await mesh("send", "echo", "hi", "--broker", nobody)
    assert unreachable.code == 3 and f"cannot connect to the MQTT broker at {nobody}" in unreachable.stderr

    env: dict[str, Any] = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
    unknown = await mesh("send", "ghost", "hi", "--wait", "0.3", **env)
    assert unknown.code == 4 and "unknown agent 'ghost'" in unknown.stderr
    assert f"asked the broker {broker_url} on namespace {namespace!r}" in unknown.stderr  # which mesh was asked

    bad_yaml = tmp_path / "bad.yaml"
    bad_yaml.write_text("agents:\n  - class: [unclosed\n")
    config_error = await mesh("run", str(bad_yaml))
    assert config_error.code == 2 and "bad.yaml" in config_error.stderr and "line" in config_error.stderr

    empty = tmp_path / "empty.yaml"
    empty.write_text("namespace: x\n")
    nothing = await mesh("run", str(empty))
    assert nothing.code == 2 and "nothing to run" in nothing.stderr


async def test_task_errors_and_failed_tasks(broker_url: str, namespace: str) -> None:
    up = await start_mesh(
        "up", "--insecure", "--namespace", namespace, MESH_BROKER_URL=broker_url, MESH_HTTP_PORT=str(free_port())
    )
    try:
        await up.wait_for_line("mesh up: ready", stream="stdout")
        env: dict[str, Any] = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
        failed = await mesh("send", "calculator", "2 +", **env)
        assert failed.code == 1 and "cannot evaluate '2 +'" in failed.stdout and "ended failed" in failed.stderr
        missing = await mesh("task", "get", "echo", "no-such-task", **env)
        assert missing.code == 6 and "error -32001" in missing.stderr and "no-such-task" in missing.stderr
        canceled = await mesh("task", "cancel", "echo", "no-such-task", **env)
        assert canceled.code == 6
    finally:
        assert await up.stop() == 0


async def test_sigterm_disconnects_every_component_cleanly_so_no_will_fires(
    broker_url: str, namespace: str, tmp_path: Path
) -> None:
    agents = [f"echo{i}" for i in range(4)]
    entries = "".join(f"  - {{class: 'tests.agents.service_agents:Echo', name: {name}}}\n" for name in agents)
    config = tmp_path / "five.yaml"
    config.write_text(
        f"namespace: {namespace}\nbroker: {broker_url}\nagents:\n{entries}"
        "gateways:\n  - {kind: http, id: web, host: 127.0.0.1, port: 0}\n"
    )
    cards = {get_agent_discovery_topic(namespace, name) for name in agents}
    cards.add(get_gateway_discovery_topic(namespace, "web"))
    heard: list[InboundMessage] = []
    changed = asyncio.Event()

    def record(message: InboundMessage) -> None:
        heard.append(message)
        changed.set()

    async def until(condition: Callable[[], bool]) -> None:
        async with asyncio.timeout(30):
            while not condition():
                changed.clear()
                await changed.wait()

    def payloads(topic: str) -> list[bytes]:
        return [m.payload for m in heard if m.topic == topic]

    sentinel = f"{namespace}/test/sentinel"
    async with MqttTransport(BrokerSettings.from_url(broker_url)) as watcher:
        await watcher.subscribe(get_discovery_subscription_topic(namespace), record)
        await watcher.subscribe(sentinel, record)
        run = await start_mesh("run", str(config))
        try:
            await until(lambda: all(payloads(topic) for topic in cards))
        finally:
            code = await run.stop(signal.SIGTERM)
        assert code == 0, run.output
        # The process is gone, its sockets closed: a will would be on its way before this.
        await watcher.publish(sentinel, b"end")
        await until(lambda: bool(payloads(sentinel)))
    for topic in cards:
        seen = payloads(topic)
        # The clean "gone" once, last; a second empty message would be the will.
        assert seen[-1] == b"" and seen.count(b"") == 1, f"{topic}: {seen!r}\n{run.output}"


async def test_a_second_instance_of_an_agent_name_exits_2_and_the_first_keeps_its_cards(
    broker_url: str, namespace: str, tmp_path: Path
) -> None:
    # An echo and a gateway "http", as in `mesh up`.
    config = agents_file(
        tmp_path,
        f"""
        namespace: {namespace}
        broker: {broker_url}
        agents:
          - class: tests.agents.service_agents:Echo
        gateways:
          - {{kind: http, id: http, host: 127.0.0.1, port: 0}}
        """,
    )
    cards = {get_agent_discovery_topic(namespace, "echo"), get_gateway_discovery_topic(namespace, "http")}
    sentinel = f"{namespace}/test/sentinel"
    env: dict[str, Any] = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
    inbox = Inbox()
    async with MqttTransport(BrokerSettings.from_url(broker_url)) as watcher:
        for topic in (*cards, sentinel):
            await watcher.subscribe(topic, inbox)
        first = await start_mesh("run", str(config))
        try:
            await first.wait_for_line("running agent echo, gateway http")
            again = await mesh("run", str(config))
            # `mesh up` runs an echo too: it stops the agents it had started, and exits 2 as well,
            # before its gateway "http" ever published a card.
            up = await mesh(
                "up",
                "--insecure",
                "--namespace",
                namespace,
                MESH_BROKER_URL=broker_url,
                MESH_HTTP_PORT=str(free_port()),
            )
            for second in (again, up):
                assert second.code == 2, second
                assert f"mesh: agent 'echo' is already running on namespace '{namespace}'" in second.stderr
                assert "shared_subscription: true" in second.stderr and "Traceback" not in second.stderr
            assert "agent calculator stopped" in up.stderr

            sent = await mesh("send", "echo", "still me", **env)
            assert (sent.code, sent.stdout) == (0, "still me\n")
            await watcher.publish(sentinel, b"end")  # after everything the refused processes did
            await inbox.wait_until_topic(sentinel)
            for topic in cards:  # the first's cards only, never cleared
                seen = [m.payload for m in inbox.messages if m.topic == topic]
                assert seen and all(card.startswith(b"{") for card in seen), (topic, seen)
        finally:
            assert await first.stop(signal.SIGTERM) == 0, first.output


async def test_send_shows_every_ending_of_the_agent_api(
    serve_agent: ServeAgent, broker_url: str, namespace: str
) -> None:
    await serve_agent(Decider())
    env: dict[str, Any] = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
    message = await mesh("send", "decider", "message", **env)
    assert message.code == 0 and message.stdout.strip() == "just a message"
    streamed = await mesh("send", "decider", "message", "--stream", **env)
    assert streamed.code == 0 and "just a message" in streamed.stdout
    rejected = await mesh("send", "decider", "reject", **env)
    assert rejected.code == 1 and "not my job" in rejected.stdout and "ended rejected" in rejected.stderr
    auth = await mesh("send", "decider", "auth", **env)
    assert auth.code == 0 and "sign in first" in auth.stdout and "is auth-required: answer with --task" in auth.stderr


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js")
async def test_send_picks_a_skill_and_sets_metadata(serve_agent: ServeAgent, broker_url: str, namespace: str) -> None:
    examples = Path(__file__).resolve().parent.parents[2] / "agents" / "a2e" / "examples"
    await serve_agent(WorkerAgent(name="shout", worker="node shout.js", cwd=examples, backoff_s=0.05))
    env: dict[str, Any] = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
    spelled = await mesh("send", "shout", "mesh", "--skill", "spell", **env)
    assert spelled.code == 0 and spelled.stdout.startswith("mesh has 4 letters\n"), spelled.stderr
    shouted = await mesh("send", "shout", "hi", "--metadata", "skill=shout", "-m", 'extra={"n": 1}', **env)
    assert (shouted.code, shouted.stdout.strip()) == (0, "HI!"), shouted.stderr
    unnamed = await mesh("send", "shout", "hi", **env)
    assert unnamed.code != 0 and "serves 2 skills (shout, spell)" in unnamed.stdout + unnamed.stderr
    bad = await mesh("send", "shout", "hi", "--metadata", "novalue", **env)
    assert bad.code == 2 and "--metadata 'novalue': give KEY=VALUE" in bad.stderr


def test_the_banner_names_mesh_as_the_user_can_type_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "mesh").write_text("#!/bin/sh\n")
    (bin_dir / "mesh").chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", [".venv/bin/mesh", "up"])
    monkeypatch.setenv("PATH", "/nonexistent")
    assert mesh_command() == ".venv/bin/mesh"  # not on PATH: what the README's users typed
    monkeypatch.setenv("PATH", str(bin_dir))
    assert mesh_command() == "mesh"


def test_only_an_anonymous_run_without_a_mesh_up_is_warned_about_its_broker() -> None:
    from mesh.cli.running import open_broker_warning

    assert open_broker_warning(BrokerSettings.from_url("mqtt://someone:secret@localhost:1883")) is None
    warning = open_broker_warning(BrokerSettings.from_url("mqtt://localhost:1883"))
    assert warning is not None and "mqtt://localhost:1883" in warning and "MESH_BROKER_PASSWORD_FILE" in warning
