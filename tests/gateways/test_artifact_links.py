"""The HTTP gateway's signed download links (issue 39, item 3) on a real gateway and broker.

A link is a bearer capability for clients that cannot send credentials: it works with none,
for one version of one artifact, for ``link_ttl_s``, with ``Range``. A request to it that
carries another user's credentials (an API key, a browser session) is refused, and so is an
expired link, with a message naming the fix.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from agents import Agent, AgentService, TaskContext
from gateways.http.server import HttpGateway
from gateways.http.settings import HttpGatewaySettings
from mesh.a2a import FilePart, FileWithUri, Message, create_agent_message, get_text_from_message
from mesh.artifacts import ArtifactRef, ArtifactSettings
from mesh.broker import BrokerSettings
from tests.gateways.signin.test_signin import sign_in

ALICE, BOB = "alice-key-0123456789", "bob-key-0123456789"
KEYS = [{"name": "alice", "secret": ALICE}, {"name": "bob", "secret": BOB}]


class Saver(Agent):
    """``save NAME``: saves a new version of NAME (its bytes name the version) and answers with
    its URI as a file part; ``save NAME bare`` answers the URI without its version (the latest)."""

    name = "saver"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.contents: dict[str, bytes] = {}

    async def handle(self, message: Message, ctx: TaskContext) -> Message:
        _, name, *bare = get_text_from_message(message).split()
        data = f"{name} saved as number {len(self.contents) + 1}\n".encode() * 5000
        uri = await ctx.save_artifact(name, data, "application/x-test")
        self.contents[uri] = data
        answered = ArtifactRef.parse(uri)
        if bare:
            answered = ArtifactRef(answered.context_id, answered.name)
        return create_agent_message([FilePart(file=FileWithUri(uri=answered.uri, name=name))])


Start = Callable[[], Awaitable[tuple[HttpGateway, Saver]]]


@pytest.fixture
async def saver_and_gateway(broker_settings: BrokerSettings, namespace: str, tmp_path: Path) -> AsyncIterator[Start]:
    """The saver and a gateway (API keys for alice and bob) sharing one embedded store."""
    running: list[Any] = []

    async def start() -> tuple[HttpGateway, Saver]:
        artifacts = ArtifactSettings(path=str(tmp_path / "artifacts"))
        agent = Saver()
        service = AgentService(agent, broker=broker_settings, namespace=namespace, artifacts=artifacts)
        await service.start()
        running.append(service)
        settings = HttpGatewaySettings.model_validate({"port": 0, "auth": {"mode": "api_key", "keys": KEYS}})
        gateway = HttpGateway(settings, broker=broker_settings, namespace=namespace, artifacts=artifacts)
        await gateway.start()
        running.append(gateway)
        await gateway.runtime.registry.wait_for("saver", 5)
        return gateway, agent

    yield start
    for component in reversed(running):
        await component.stop()


async def _call(http: httpx.AsyncClient, gateway: HttpGateway, method: str, params: dict[str, Any]) -> Any:
    body = {"jsonrpc": "2.0", "id": "r1", "method": method, "params": params}
    answer = await http.post(f"{gateway.public_url}/a2a/agents/saver", json=body, headers={"X-API-Key": ALICE})
    answer.raise_for_status()
    return answer.json()["result"]


async def _save(http: httpx.AsyncClient, gateway: HttpGateway, text: str, context: str | None = None) -> Any:
    parts = [{"kind": "text", "text": text}]
    message: dict[str, Any] = {"role": "user", "messageId": os.urandom(8).hex(), "parts": parts}
    if context is not None:
        message["contextId"] = context
    task = await _call(http, gateway, "message/send", {"message": message})
    assert task["status"]["state"] == "completed", task
    return task


def _answered_link(task: dict[str, Any]) -> str:
    """The link in place of the URI the agent answered with."""
    [part] = task["status"]["message"]["parts"]
    link: str = part["file"]["uri"]
    assert link.startswith("http"), link
    return link


async def test_a_link_works_without_credentials_for_one_version_and_refuses_another_users(
    saver_and_gateway: Start,
) -> None:
    gateway, saver = await saver_and_gateway()
    async with httpx.AsyncClient(timeout=30) as http:
        first = await _save(http, gateway, "save a.bin")
        link = _answered_link(first)
        v1 = saver.contents[f"artifact://{first['contextId']}/a.bin?version=1"]
        query = parse_qs(urlsplit(link).query)
        assert query["version"] == ["1"] and query["user"] == ["alice"]

        # A bearer capability: no credentials needed, and Range works on it.
        plain = await http.get(link)
        assert plain.status_code == 200 and plain.content == v1
        part = await http.get(link, headers={"Range": "bytes=10-19"})
        assert part.status_code == 206 and part.content == v1[10:20]
        assert part.headers["content-range"] == f"bytes 10-19/{len(v1)}"
        assert (await http.get(link, headers={"X-API-Key": ALICE})).content == v1  # the owner's own key too

        # Another user's API key is refused, and so is their browser session; a wrong key is a 401.
        foreign = await http.get(link, headers={"X-API-Key": BOB})
        assert foreign.status_code == 403 and foreign.json()["reason"] == "link_of_another_user", foreign.text
        assert "ask the gateway for a link of your own" in foreign.json()["error"]
        browser = await sign_in(gateway.public_url, {"key": BOB})
        try:
            assert (await browser.get(link)).status_code == 403
        finally:
            await browser.aclose()
        assert (await http.get(link, headers={"X-API-Key": "wrong"})).status_code == 401

        # One version: version 2 exists, and the link for version 1 never fetches it.
        second = await _save(http, gateway, "save a.bin", first["contextId"])
        v2 = saver.contents[f"artifact://{first['contextId']}/a.bin?version=2"]
        assert _answered_link(second) != link and (await http.get(_answered_link(second))).content == v2
        assert (await http.get(link)).content == v1
        assert (await http.get(link.replace("version=1", "version=2"))).status_code == 401  # no valid link
        assert (await http.get(link.replace("version=1", "version=2"), headers={"X-API-Key": BOB})).status_code == 404
        assert int(query["expires"][0]) <= time.time() + 120 + 1  # short-lived: 120 s by default


async def test_a_link_to_the_latest_version_is_pinned_to_the_version_latest_when_it_was_made(
    saver_and_gateway: Start,
) -> None:
    gateway, saver = await saver_and_gateway()
    async with httpx.AsyncClient(timeout=30) as http:
        first = await _save(http, gateway, "save b.bin bare")
        link = _answered_link(first)
        [part] = first["status"]["message"]["parts"]
        assert part["metadata"]["artifactUri"] == f"artifact://{first['contextId']}/b.bin"  # what the agent sent
        await _save(http, gateway, "save b.bin", first["contextId"])  # version 2 is now the latest
        downloaded = await http.get(link)
        assert downloaded.status_code == 200
        assert downloaded.content == saver.contents[f"artifact://{first['contextId']}/b.bin?version=1"]
        assert parse_qs(urlsplit(link).query)["version"] == ["1"]


async def test_an_expired_link_is_refused_with_a_message_naming_the_fix(saver_and_gateway: Start) -> None:
    gateway, saver = await saver_and_gateway()
    async with httpx.AsyncClient(timeout=30) as http:
        task = await _save(http, gateway, "save c.bin")
        link = _answered_link(task)
        data = saver.contents[f"artifact://{task['contextId']}/c.bin?version=1"]
        assert (await http.get(link)).status_code == 200
        gateway.artifacts.clock = lambda: time.time() + gateway.artifacts.link_ttl_s + 5  # its lifetime is over
        expired = await http.get(link)
        assert expired.status_code == 403 and expired.json()["reason"] == "link_expired", expired.text
        assert "ask the gateway for a fresh link" in expired.json()["error"]
        assert "tasks/get" in expired.json()["error"]
        assert (await http.get(link, headers={"Range": "bytes=0-9"})).status_code == 403
        assert (await http.get(link, headers={"X-API-Key": BOB})).status_code == 403
        assert (await http.get(link, headers={"X-API-Key": ALICE})).content == data  # the owner's key still works
        # The fix the message names: the task again, with a fresh link in its answer.
        again = await _call(http, gateway, "tasks/get", {"id": task["id"]})
        fresh = _answered_link(again)
        assert fresh != link and (await http.get(fresh)).content == data
