"""``mesh agents`` and ``mesh watch``, run in subprocesses against the real broker."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agents import AgentSettings
from agents.builtin import EchoAgent
from agents.service import AgentService
from mesh.a2a import AgentCapabilities, AgentCard, AgentSkill
from mesh.brokertools.localbroker import free_port
from mesh.cli.discovery_commands import age, event_line, truncate
from mesh.discovery.registry import RegistryEvent
from mesh.properties import MessageProperties
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent, TransportFactory
from tests.mesh.cli_process import Service, mesh, start_mesh
from tests.support import wait_until

Serve = Callable[..., Awaitable[AgentService]]
LONG_DESCRIPTION = "Repeats what it is told, word for word, however long the message and whoever asks"


@pytest.fixture
def serve(serve_agent: ServeAgent) -> Serve:
    """Serve Echo agents on the test's namespace; the ones still running are stopped after the test."""

    async def start(name: str, description: str | None = None) -> AgentService:
        return await serve_agent(Echo(name=name, description=description), AgentSettings())

    return start


@pytest.fixture
def env(broker_url: str, namespace: str) -> dict[str, str]:
    return {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}


def card(name: str, *, streaming: bool = False) -> AgentCard:
    return AgentCard(
        name=name,
        description=f"{name} card",
        version="1",
        url=f"mqtt://x/{name}",
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="route", name="Route", description="routes", tags=["web", "http"])],
    )


async def start_watch(*args: str, **env: str) -> Service:
    """``mesh watch ARGS`` once it says it watches (on stderr), which it says *before* it subscribes
    (so that the cards already there come after it): a test that needs it subscribed waits for a
    retained card it prints."""
    watch = await start_mesh("watch", *args, **env)
    await watch.wait_for_line("watching")
    return watch


def json_lines(watch: Service) -> list[dict[str, Any]]:
    return [json.loads(line) for line in watch.stdout_lines]


# ---------------------------------------------------------------------- mesh agents


async def test_agents_prints_a_table_sorted_by_name(
    serve: Serve, make_transport: TransportFactory, namespace: str, env: dict[str, str]
) -> None:
    await serve("zeta")
    await serve("alpha", LONG_DESCRIPTION)
    gateway = await make_transport()
    await gateway.publish(f"{namespace}/a2a/v1/discovery/gatewaycards/web", card("web").to_json_bytes(), retain=True)

    listed = await mesh("agents", **env)
    assert (listed.code, listed.stderr) == (0, ""), listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == ["NAME", "DESCRIPTION", "SKILLS", "STREAMING", "LAST", "SEEN"]
    assert [row.split()[0] for row in rows] == ["alpha", "zeta"]  # gateways only with --gateways
    alpha, zeta = rows
    assert LONG_DESCRIPTION[:40] in alpha and LONG_DESCRIPTION not in alpha and "…" in alpha
    assert re.search(r"zeta\s+echoes\s+echo \[echo\]\s+yes\s+\ds ago$", zeta), zeta
    assert header.index("SKILLS") == alpha.index("echo [echo]") == zeta.index("echo [echo]")  # aligned

    with_gateways = await mesh("agents", "--gateways", **env)
    header, *rows = with_gateways.stdout.splitlines()
    assert header.split()[:2] == ["KIND", "NAME"]
    assert [row.split()[:2] for row in rows] == [["agent", "alpha"], ["agent", "zeta"], ["gateway", "web"]]
    assert re.search(r"web\s+web card\s+route \[web,http\]\s+no\s+\ds ago$", rows[2]), rows[2]


async def test_agents_json_lists_kind_name_last_seen_and_card(serve: Serve, env: dict[str, str]) -> None:
    await serve("beta")
    await serve("alpha")
    before = datetime.now(UTC)

    listed = await mesh("agents", "--json", "--wait", "0.5", **env)
    assert listed.code == 0, listed.stderr
    entries = json.loads(listed.stdout)
    assert [(e["kind"], e["name"]) for e in entries] == [("agent", "alpha"), ("agent", "beta")]
    for entry in entries:
        assert entry["card"]["name"] == entry["name"]
        assert [s["id"] for s in entry["card"]["skills"]] == ["echo"]
        assert entry["card"]["capabilities"]["streaming"] is True
        last_seen = datetime.fromisoformat(entry["lastSeen"])
        assert last_seen.utcoffset() == timedelta(0)
        assert before - timedelta(seconds=1) <= last_seen <= datetime.now(UTC)


async def test_agents_on_an_empty_mesh_says_so_on_stderr(env: dict[str, str], namespace: str) -> None:
    empty = await mesh("agents", "--wait", "0.2", **env)
    assert (empty.code, empty.stdout) == (0, "")
    assert f"no agents on namespace '{namespace}' at mqtt://" in empty.stderr

    as_json = await mesh("agents", "--json", "--gateways", "--wait", "0.2", **env)
    assert (as_json.code, json.loads(as_json.stdout)) == (0, [])
    assert "no agents or gateways on namespace" in as_json.stderr


# ---------------------------------------------------------------------- mesh watch


async def test_watch_json_reports_an_agent_added_then_removed(serve: Serve, env: dict[str, str]) -> None:
    watch = await start_watch("--json", **env)
    try:
        service = await serve("newcomer")
        await watch.wait_for_line('"added"', stream="stdout")
        await service.stop()  # clean shutdown: the card topic is cleared
        await watch.wait_for_line('"removed"', stream="stdout")
    finally:
        code = await watch.stop(signal.SIGINT)
    assert code == 0, watch.output

    events = json_lines(watch)  # stdout holds nothing but the NDJSON
    assert [(e["event"], e["kind"], e["name"]) for e in events] == [
        ("added", "agent", "newcomer"),
        ("removed", "agent", "newcomer"),
    ]
    added, removed = events
    assert [s["id"] for s in added["card"]["skills"]] == ["echo"] and "reason" not in added
    assert removed["reason"] == "gone"
    assert datetime.fromisoformat(added["time"]) <= datetime.fromisoformat(removed["time"])
    assert datetime.fromisoformat(removed["time"]).utcoffset() == timedelta(0)


async def test_watch_text_shows_the_cards_already_there_first(serve: Serve, env: dict[str, str]) -> None:
    early = await serve("early")
    watch = await start_watch(**env)
    try:
        added = await watch.wait_for_line("added", stream="stdout")
        await early.stop()
        removed = await watch.wait_for_line("removed", stream="stdout")
    finally:
        code = await watch.stop(signal.SIGTERM)
    assert code == 0, watch.output
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}  added    agent    early  echoes \(skills: echo\)\n", added), added
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}  removed  agent    early  \(gone\)\n", removed), removed


async def test_watch_raw_shows_topics_retain_expiry_and_user_properties(
    make_transport: TransportFactory, namespace: str, env: dict[str, str]
) -> None:
    owner = await make_transport()
    topic = f"{namespace}/a2a/v1/discovery/agentcards/"
    await owner.publish(topic + "old", card("old").to_json_bytes(), retain=True)
    raw_json = await start_watch("--raw", "--json", **env)
    raw_text = await start_watch("--raw", **env)
    try:
        for watch in (raw_json, raw_text):  # subscribed: the retained card came (else fresh could come first)
            await watch.wait_for_line(f"{topic}old", stream="stdout")
        props = MessageProperties(content_type="application/json", message_expiry_s=30, extra=[("source", "test")])
        await owner.publish(topic + "fresh", card("fresh").to_json_bytes(), retain=True, properties=props)
        await owner.publish(topic + "fresh", b"", retain=True)
        for watch in (raw_json, raw_text):
            await watch.wait_for_line("<empty: gone>" if watch is raw_text else '"payloadBytes": 0', stream="stdout")
    finally:
        assert await raw_json.stop() == 0, raw_json.output
        assert await raw_text.stop() == 0, raw_text.output

    # Each watcher held a roll call as it started; raw mode shows those messages too.
    rollcall = f"{namespace}/a2a/v1/rollcall"  # outside the discovery tree, shown with it
    calls = [line for line in json_lines(raw_json) if line["topic"] == rollcall]
    assert calls and all(call["payloadBytes"] > 0 and "card" not in call for call in calls)
    old, fresh, gone = [line for line in json_lines(raw_json) if line["topic"] != rollcall]
    assert (old["topic"], old["retain"], old["card"]["name"]) == (topic + "old", True, "old")
    assert fresh["topic"] == topic + "fresh" and fresh["card"]["name"] == "fresh"
    assert ["source", "test"] in fresh["userProperties"]
    assert 0 < fresh["expiry"] <= 30 and fresh["payloadBytes"] == len(card("fresh").to_json_bytes())
    assert (gone["topic"], gone["payloadBytes"], gone["userProperties"]) == (topic + "fresh", 0, [])
    assert "card" not in gone
    datetime.fromisoformat(gone["time"])

    old_line, fresh_line, gone_line = [line for line in raw_text.stdout_lines if rollcall not in line]
    assert f"  {topic}old  retain=1  expiry=-  card old (" in old_line
    assert re.search(rf"  {topic}fresh  retain=[01]  expiry=\d+s  card fresh \(\d+ bytes\)  source=test$", fresh_line)
    assert re.search(rf"  {topic}fresh  retain=[01]  expiry=-  <empty: gone>$", gone_line)
    called = [line for line in raw_text.stdout_lines if rollcall in line]
    assert called and all(re.search(r"  retain=0  expiry=-  roll call \(answers within \d+ ms\)$", c) for c in called)


def test_event_lines_ages_and_truncation() -> None:
    at = datetime(2025, 1, 2, 3, 4, 5, 678_000).timestamp()  # local time, as the lines show it
    added = event_line(RegistryEvent("added", "gateway", "web", card("web"), at))
    assert added == "03:04:05.678  added    gateway  web  web card (skills: route)"
    expired = event_line(RegistryEvent("removed", "agent", "sleepy", card("sleepy"), at, "expired"))
    assert expired == "03:04:05.678  removed  agent    sleepy  (expired)"
    assert [age(s) for s in (-0.5, 2.9, 61, 7200, 90000)] == ["0s ago", "2s ago", "1m ago", "2h ago", "1d ago"]
    assert truncate("abcdef", 6) == "abcdef" and truncate("abc def", 5) == "abc…"


# ---------------------------------------------------------------------- errors


@pytest.mark.parametrize("command", [["agents"], ["watch", "--json"]])
async def test_an_unreachable_broker_exits_3_with_a_message(command: list[str]) -> None:
    nobody = f"mqtt://127.0.0.1:{free_port()}"
    result = await mesh(*command, "--broker", nobody)
    assert (result.code, result.stdout) == (3, "")
    assert f"cannot connect to the MQTT broker at {nobody}" in result.stderr


async def test_a_bad_namespace_exits_2(broker_url: str) -> None:
    result = await mesh("watch", "--namespace", "a/+/b", "--broker", broker_url)
    assert result.code == 2 and "a/+/b" in result.stderr


async def test_agents_counts_the_replicas_of_an_agent(
    serve: Serve, serve_agent: ServeAgent, env: dict[str, str]
) -> None:
    await serve("solo")
    for _ in range(3):
        await serve_agent(Echo(name="many"), AgentSettings(shared_subscription=True))
    listed = await mesh("agents", **env)
    assert listed.code == 0, listed.stderr
    rows = [line.split() for line in listed.stdout.splitlines()]
    assert rows[0][:2] == ["NAME", "REPLICAS"]
    assert [row[:2] for row in rows[1:]] == [["many", "3"], ["solo", "1"]]
    as_json = await mesh("agents", "--json", **env)
    assert [(e["name"], e.get("replicas")) for e in json.loads(as_json.stdout)] == [("many", 3), ("solo", None)]


ROOT = Path(__file__).resolve().parent.parents[2]
TIME = re.compile(r"^\d\d:\d\d:\d\d\.\d{3}  ")


def documented_output(command: str) -> list[str]:
    """The lines the README or a docs page shows after ``$ COMMAND`` (to the next ``$`` line)."""
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        lines = page.read_text(encoding="utf-8").splitlines()
        if f"$ {command}" in lines:
            rest = lines[lines.index(f"$ {command}") + 1 :]
            end = next(i for i, line in enumerate(rest) if line.startswith(("$ ", "```")))
            return rest[:end]
    raise AssertionError(f"no page shows `$ {command}`")


def comparable(line: str, namespace: str) -> str:
    """A --raw line without what changes from run to run: the time, the sizes, the namespace."""
    line = TIME.sub("TIME  ", line.rstrip("\n")).replace(f"{namespace}/a2a/v1/", "NS/a2a/v1/")
    return re.sub(r"\(\d+ bytes\)", "(N bytes)", re.sub(r"<not a card: \d+ bytes>", "<not a card: N bytes>", line))


async def test_the_documented_watch_raw_example_is_what_it_prints(
    serve_agent: ServeAgent, namespace: str, env: dict[str, str]
) -> None:
    example = documented_output("mesh watch --raw")
    echo = await serve_agent(EchoAgent())
    watch = await start_watch("--raw", **env)
    try:
        await watch.wait_for_line("retain=1  expiry=-  card echo", stream="stdout")  # the retained card
        await watch.wait_for_line("retain=0  expiry=-  card echo", stream="stdout")  # its answer to the roll call
        await echo.stop()
        await watch.wait_for_line("<empty: gone>", stream="stdout")
    finally:
        assert await watch.stop() == 0, watch.output
    printed = [comparable(line, namespace) for line in watch.stdout_lines]
    assert printed == [comparable(line, "mesh") for line in example], watch.output


# ---------------------------------------------------------------------- roll calls of one-off commands


async def test_an_unknown_name_holds_a_roll_call_except_on_the_broker_mesh_up_started(
    serve: Serve, env: dict[str, str], namespace: str, make_transport: TransportFactory, tmp_path: Path
) -> None:
    """On any broker a name missing from the retained cards may be on a cluster's other node: a
    roll call asks. On the Mosquitto a live ``mesh up`` started (one node), every retained card is
    already in: the name is unknown at once, with no roll call (and `mesh agents` holds none)."""
    from mesh.brokertools.upstate import UpClaim, UpRecord
    from mesh.transport import InboundMessage
    from topics import get_rollcall_topic

    await serve("echo")  # the mesh is not empty: an empty one is waited on
    rollcall = get_rollcall_topic(namespace)
    heard: list[bytes] = []
    arrived = asyncio.Event()
    watcher = await make_transport()

    def on_rollcall(message: InboundMessage) -> None:
        heard.append(message.payload)
        arrived.set()

    await watcher.subscribe(rollcall, on_rollcall)

    async def roll_calls_after(*command: str, **extra: str) -> list[bytes]:
        """The roll calls heard while ``command`` ran (a marker of ours closes the count)."""
        start = len(heard)
        marker = f'{{"windowMs": 50, "marker": "{len(heard)}"}}'.encode()
        done = await mesh(*command, **env, **extra)
        await watcher.publish(rollcall, marker)
        await wait_until(lambda: marker in heard, arrived, 5, lambda: "the marker roll call")
        assert done.code == (4 if command[0] == "send" else 0), done.stderr
        return heard[start : heard.index(marker)]

    state = tmp_path / "state"
    assert len(await roll_calls_after("send", "nosuch", "hi", MESH_STATE_DIR=str(state))) == 1

    claim = UpClaim.take(namespace, state)  # a live `mesh up` that started this broker
    try:
        claim.write(UpRecord(pid=os.getpid(), namespace=namespace, broker_url=env["MESH_BROKER_URL"], broker_pid=1))
        assert await roll_calls_after("send", "nosuch", "hi", MESH_STATE_DIR=str(state)) == []
        assert await roll_calls_after("agents", MESH_STATE_DIR=str(state)) == []
    finally:
        claim.release()
