"""The dashboard's server side against the real broker: /ui on the gateway behind its auth,
``mesh dashboard`` in a subprocess, the live feed, sending, and what watching must not change."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.builtin import CountdownAgent, EchoAgent
from gateways.dashboard import Dashboard
from gateways.dashboard.service import FollowerTooSlow
from gateways.http.dashboard import DashboardServer
from mesh.a2a import Task
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.errors import AgentUnavailableError
from mesh.transport import MqttTransport
from mesh.trust import generate_keys, load_private_key, sign_card
from tests.conftest import ServeAgent
from tests.gateways.conftest import StartGateway
from tests.mesh.cli_process import start_mesh
from tests.mesh.test_trust import card
from tests.support import wait_until
from topics import get_agent_discovery_topic

SECRET = "dashboard-secret-1"
BEARER = {"Authorization": f"Bearer {SECRET}"}


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    """The (event, data) pairs of an SSE response, as they come."""
    kind, data = "message", []
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            kind = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].strip())
        elif not line and data:
            yield kind, json.loads("\n".join(data))
            kind, data = "message", []


async def next_event(events: AsyncIterator[tuple[str, Any]], kind: str, timeout: float = 5.0) -> Any:
    async with asyncio.timeout(timeout):
        async for got, data in events:
            if got == kind:
                return data
    raise AssertionError(f"the stream ended before a {kind!r} event")


async def test_ui_on_the_gateway_requires_the_gateways_authentication(
    start_gateway: StartGateway, serve_agent: ServeAgent, http: httpx.AsyncClient
) -> None:
    await serve_agent(EchoAgent())
    gateway = await start_gateway(auth={"mode": "bearer", "tokens": [SECRET]}, wait_for=("echo",))
    base = f"http://127.0.0.1:{gateway.port}"
    for path in ("/ui", "/ui/", "/ui/static/dashboard.js", "/ui/api/events"):
        refused = await http.get(base + path)
        assert refused.status_code == 401, path
        assert refused.headers["WWW-Authenticate"].startswith("Bearer"), path
        wrong = await http.get(base + path, headers={"Authorization": "Bearer not-it"})
        assert wrong.status_code == 401, path
    sent = await http.post(base + "/ui/api/send", json={"agent": "echo", "text": "hi"})
    assert sent.status_code == 401

    page = await http.get(base + "/ui/", headers=BEARER)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<base href="/ui/">' in page.text and 'src="static/dashboard.js"' in page.text
    script = await http.get(base + "/ui/static/render.js", headers=BEARER)
    assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
    async with http.stream("GET", base + "/ui/api/events", headers=BEARER) as response:
        snapshot = await next_event(sse_events(response), "snapshot")
    names = {(c["kind"], c["name"]) for c in snapshot["cards"]}
    assert {("agent", "echo"), ("gateway", "http")} <= names


async def test_a_gateway_can_leave_the_dashboard_out(start_gateway: StartGateway, http: httpx.AsyncClient) -> None:
    gateway = await start_gateway(dashboard=False)
    assert (await http.get(f"http://127.0.0.1:{gateway.port}/ui")).status_code == 404


async def test_mesh_dashboard_serves_the_page_and_the_live_feed(
    broker_url: str, namespace: str, serve_agent: ServeAgent, http: httpx.AsyncClient
) -> None:
    await serve_agent(EchoAgent())
    service = await start_mesh("dashboard", "--port", "0", "--broker", broker_url, "--namespace", namespace)
    try:
        line = await service.wait_for_line("dashboard of", stream="stdout", timeout=20)
        found = re.search(r"(http://\S+/ui)", line)
        assert found, line
        url = found.group(1)
        page = await http.get(url)
        assert page.status_code == 200 and "Agent mesh" in page.text and namespace in page.text
        assert (await http.get(url.removesuffix("/ui") + "/", follow_redirects=True)).url.path == "/ui"
        for asset in ("dashboard.js", "render.js", "dashboard.css"):
            assert (await http.get(f"{url}/static/{asset}")).status_code == 200
        assert (await http.get(f"{url}/static/../service.py")).status_code == 404
        async with http.stream("GET", url + "/api/events") as response:
            snapshot = await next_event(sse_events(response), "snapshot")
        assert [c["name"] for c in snapshot["cards"]] == ["echo"]
    finally:
        code = await service.stop()
    assert code == 0, service.output


async def test_mesh_dashboard_says_when_it_cannot_listen(broker_url: str, namespace: str) -> None:
    service = await start_mesh("dashboard", "--port", "70000", "--broker", broker_url, "--namespace", namespace)
    assert await asyncio.wait_for(service.proc.wait(), 20) == 2
    await service.stop()
    assert "--port 70000 is no port" in service.output and "Traceback" not in service.output


@pytest.fixture
async def dashboard_url(broker_settings: BrokerSettings, namespace: str) -> AsyncIterator[str]:
    server = DashboardServer(Dashboard(broker_settings, namespace), port=0)
    await server.start()
    yield server.url
    await server.stop()


async def test_sending_streams_the_agents_events_and_the_feed_shows_the_task(
    dashboard_url: str, serve_agent: ServeAgent, http: httpx.AsyncClient
) -> None:
    await serve_agent(CountdownAgent(interval_s=0.01))
    async with contextlib.AsyncExitStack() as stack:
        feed = await stack.enter_async_context(http.stream("GET", dashboard_url + "/api/events"))
        changes = sse_events(feed)
        await next_event(changes, "snapshot")
        sent = await stack.enter_async_context(
            http.stream("POST", dashboard_url + "/api/send", json={"agent": "countdown", "text": "2"})
        )
        items = [(kind, data) async for kind, data in sse_events(sent)]
        assert items[-1] == ("end", {})
        kinds = [data.get("kind") for kind, data in items if kind == "item"]
        assert kinds[0] in ("task", "status-update") and kinds[-1] == "task"
        assert items[-2][1]["status"]["state"] == "completed"
        task_id = items[-2][1]["id"]

        seen: list[dict[str, Any]] = []
        async with asyncio.timeout(5):
            while not seen or not seen[-1]["task"]["final"]:
                change = await next_event(changes, "task")
                if change["task"]["taskId"] == task_id:
                    seen.append(change)
    assert seen[0]["event"]["kind"] == "request" and seen[-1]["task"]["state"] == "completed"
    assert any(c["event"].get("text") == "1..." for c in seen)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ("not json", "send a JSON object"),
        ({"text": "hi"}, '"agent" must be'),
        ({"agent": "no/such", "text": "hi"}, "agent name"),
        ({"agent": "echo", "text": "  "}, '"text" must be a non-empty string'),
        ({"agent": "echo", "text": "x" * 10_001}, "at most 10000"),
    ],
)
async def test_a_bad_send_is_refused_with_what_to_fix(
    dashboard_url: str, http: httpx.AsyncClient, body: object, problem: str
) -> None:
    content = body if isinstance(body, str) else json.dumps(body)
    refused = await http.post(
        dashboard_url + "/api/send", content=content, headers={"content-type": "application/json"}
    )
    assert refused.status_code == 400 and problem in refused.json()["error"]


async def test_only_a_json_send_is_taken_and_only_from_a_loopback_name(
    dashboard_url: str, http: httpx.AsyncClient
) -> None:
    """What another site's page can send unasked (a text/plain POST) or reach through its own
    name pointed at 127.0.0.1 (DNS rebinding) is refused."""
    body = json.dumps({"agent": "echo", "text": "hi"})
    for content_type in ("text/plain", "application/x-www-form-urlencoded"):
        refused = await http.post(dashboard_url + "/api/send", content=body, headers={"content-type": content_type})
        assert refused.status_code == 415 and "application/json" in refused.json()["error"]
    rebound = await http.get(dashboard_url, headers={"Host": "attacker.example:8090"})
    assert rebound.status_code == 400
    assert (await http.get(dashboard_url, headers={"Host": "localhost:8090"})).status_code == 200


async def test_sending_to_an_agent_that_is_not_there_ends_with_the_reason(
    dashboard_url: str, http: httpx.AsyncClient
) -> None:
    async with http.stream("POST", dashboard_url + "/api/send", json={"agent": "ghost", "text": "hi"}) as sent:
        items = [(kind, data) async for kind, data in sse_events(sent)]
    assert len(items) == 1 and items[0][0] == "error" and "no agent is listening" in items[0][1]["reason"]


async def test_watching_leaves_a_call_to_a_missing_agent_failing_at_once(
    broker_settings: BrokerSettings, namespace: str, serve_agent: ServeAgent
) -> None:
    """The watcher subscribes to the request topics of the agents on the mesh only: a request
    to any other still finds no subscriber, so its caller hears at once (PUBACK 0x10)."""
    await serve_agent(EchoAgent())
    dashboard = Dashboard(broker_settings, namespace)
    changed = asyncio.Event()
    dashboard.view.add_listener(lambda change: changed.set())
    await dashboard.start()  # the echo agent's requests followed from here on
    try:
        async with MeshClient.connect(broker_settings, namespace) as client:
            with pytest.raises(AgentUnavailableError, match="no agent is listening"):
                await client.send("ghost", "hi", timeout=5)
            reply = await client.send("echo", "hi", timeout=5)  # the watched agent still answers
        assert reply.kind == "task"

        def echo_done() -> bool:
            tasks = dashboard.snapshot()["tasks"]
            return len(tasks) == 1 and tasks[0]["state"] == "completed"

        await wait_until(echo_done, changed, 5, lambda: str(dashboard.snapshot()["tasks"]))
        (task,) = dashboard.snapshot()["tasks"]
        assert task["agent"] == "echo" and task["taskId"] == reply.id
        assert dashboard.view.rates.snapshot()["echo"] == {"requests": 1, "answers": 1, "errors": 0, "refusals": 0}
    finally:
        await dashboard.close()


async def test_watching_stops_when_the_last_page_has_gone_and_starts_afresh(
    broker_settings: BrokerSettings, namespace: str, serve_agent: ServeAgent
) -> None:
    await serve_agent(EchoAgent())
    dashboard = Dashboard(broker_settings, namespace, idle_stop_s=0.05)
    try:
        async with contextlib.aclosing(dashboard.follow()) as changes:
            kind, snapshot = await anext(changes)
        assert kind == "snapshot" and [c["name"] for c in snapshot["cards"]] == ["echo"]
        assert dashboard.watching
        async with asyncio.timeout(5):
            while dashboard.watching:
                await asyncio.sleep(0.01)
        async with contextlib.aclosing(dashboard.follow()) as changes:
            kind, snapshot = await anext(changes)
        assert [c["name"] for c in snapshot["cards"]] == ["echo"] and dashboard.watching
    finally:
        await dashboard.close()
    assert not dashboard.watching


async def test_a_follower_too_far_behind_is_ended_not_buffered(
    broker_settings: BrokerSettings, namespace: str, serve_agent: ServeAgent
) -> None:
    dashboard = Dashboard(broker_settings, namespace, max_backlog=3)
    try:
        async with contextlib.aclosing(dashboard.follow()) as changes:
            assert (await anext(changes))[0] == "snapshot"
            for name in ("a", "b", "c", "d"):  # four cards while the follower reads nothing
                await serve_agent(EchoAgent(name=name))
            with pytest.raises(FollowerTooSlow):
                async with asyncio.timeout(5):
                    async for _ in changes:
                        pass
    finally:
        await dashboard.close()


async def test_a_first_page_shows_the_tasks_done_before_it_opened(
    start_gateway: StartGateway,
    serve_agent: ServeAgent,
    broker_settings: BrokerSettings,
    namespace: str,
    http: httpx.AsyncClient,
) -> None:
    await serve_agent(EchoAgent())
    gateway = await start_gateway(wait_for=("echo",))
    async with MeshClient.connect(broker_settings, namespace, name="before") as client:
        done = await client.send("echo", "sent before any page")
    assert isinstance(done, Task)
    base = f"http://127.0.0.1:{gateway.port}"
    async with http.stream("GET", base + "/ui/api/events") as response:
        snapshot = await next_event(sse_events(response), "snapshot")
    listed = [t for t in snapshot["tasks"] if t["taskId"] == done.id]
    assert len(listed) == 1, snapshot["tasks"]
    assert listed[0]["agent"] == "echo" and listed[0]["state"] == "completed"
    assert [e["text"] for e in listed[0]["events"]] == ["sent before any page", "sent before any page"]


async def test_the_favicon_is_served_without_credentials(
    start_gateway: StartGateway, dashboard_url: str, http: httpx.AsyncClient
) -> None:
    gateway = await start_gateway(auth={"mode": "bearer", "tokens": [SECRET]})
    for url in (f"http://127.0.0.1:{gateway.port}/favicon.ico", dashboard_url.removesuffix("/ui") + "/favicon.ico"):
        icon = await http.get(url)
        assert icon.status_code == 200, url
        assert icon.headers["content-type"] == "image/x-icon"
        assert icon.content[:4] == b"\0\0\1\0"  # an ICO header
    page = await http.get(f"http://127.0.0.1:{gateway.port}/ui", headers=BEARER)
    assert '<link rel="icon" href="static/favicon.ico">' in page.text


async def test_under_trust_the_dashboard_shows_refused_cards_as_refused_not_as_agents(
    broker_url: str, namespace: str, tmp_path: Path, http: httpx.AsyncClient
) -> None:
    """``mesh dashboard`` with a trust store (as under a secured ``mesh up``): an unsigned card and
    one signed by an untrusted key are listed as refused, with why, never as agents; a card
    refused while the page is open arrives as a ``refused`` event."""
    keys = tmp_path / "keys"
    generate_keys(keys, ["good"])
    other = tmp_path / "other"
    generate_keys(other, ["evil"])
    cards = {
        "good": sign_card(card("good"), load_private_key(keys / "good.jwk")),
        "forged": card("forged"),  # unsigned
        "evil": sign_card(card("evil"), load_private_key(other / "evil.jwk")),  # not a trusted key
    }
    env = {"MESH_TRUST_JWKS": str(keys / "jwks.json"), "MESH_STATE_DIR": str(tmp_path)}
    async with MqttTransport(BrokerSettings.from_url(broker_url)) as publisher:
        for name in ("good", "forged"):
            await publisher.publish(
                get_agent_discovery_topic(namespace, name), cards[name].to_json_bytes(), retain=True
            )
        service = await start_mesh("dashboard", "--port", "0", "--broker", broker_url, "-n", namespace, **env)
        try:
            line = await service.wait_for_line("dashboard of", stream="stdout", timeout=20)
            found = re.search(r"(http://\S+/ui)", line)
            assert found, line
            async with http.stream("GET", found.group(1) + "/api/events") as response:
                events = sse_events(response)
                snapshot = await next_event(events, "snapshot")
                assert [c["name"] for c in snapshot["cards"]] == ["good"]
                assert [(r["name"], r["kind"]) for r in snapshot["refused"]] == [("forged", "agent")]
                assert snapshot["refused"][0]["why"] == "the card is not signed", snapshot["refused"]
                topic = get_agent_discovery_topic(namespace, "evil")
                await publisher.publish(topic, cards["evil"].to_json_bytes(), retain=True)
                refused = await next_event(events, "refused")
                assert refused["name"] == "evil" and refused["why"], refused
        finally:
            for name in cards:
                await publisher.publish(get_agent_discovery_topic(namespace, name), b"", retain=True)
            code = await service.stop()
        assert code == 0, service.output
