"""The chat's API over plain HTTP (the real gateway, broker and agents): turns kept in context and
in the gateway's SQLite store across a restart, each user's conversations and files their own."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import httpx

from gateways.http.server import HttpGateway
from gateways.http.settings import HttpGatewaySettings
from mesh.broker import BrokerSettings
from tests.conftest import ServeAgent
from tests.gateways.chat_agents import Gate, Reader, assistant
from tests.gateways.conftest import StartGateway
from tests.gateways.signin.test_signin import USERS, csrf_of, sign_in

BASIC = {"mode": "basic", "users": USERS}


async def signed_in(base: str, user: str) -> httpx.AsyncClient:
    client = await sign_in(base, {"user": user, "password": USERS[user]})
    client.headers["X-CSRF-Token"] = csrf_of(await client.get("/chat"))
    return client


async def say(client: httpx.AsyncClient, conversation: str, text: str, **extra: Any) -> list[tuple[str, Any]]:
    """Send ``text``; the SSE events of the answer, as (name, data)."""
    events: list[tuple[str, Any]] = []
    path = f"/chat/api/conversations/{conversation}/messages"
    async with client.stream("POST", path, json={"text": text, **extra}) as response:
        assert response.status_code == 200, await response.aread()
        name = ""
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                events.append((name, json.loads(line[5:])))
    return events


def final_text(events: list[tuple[str, Any]]) -> str:
    for name, item in reversed(events):
        if name == "item" and item.get("kind") == "status-update" and item.get("final"):
            return "".join(p.get("text", "") for p in item["status"]["message"]["parts"])
    raise AssertionError(f"no final status in {events}")


async def test_turns_keep_their_context_and_survive_a_gateway_restart(
    serve_agent: ServeAgent, broker_settings: BrokerSettings, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(assistant(Gate()))
    store = tmp_path / "chat.sqlite"
    settings = HttpGatewaySettings.model_validate({"port": 0, "auth": BASIC, "chat_store": str(store)})
    gateway = HttpGateway(settings, broker=broker_settings, namespace=namespace)
    await gateway.start()
    try:
        await gateway.runtime.registry.wait_for("assistant", 5)
        ada = await signed_in(gateway.public_url, "ada")
        made = (await ada.post("/chat/api/conversations", json={"agent": "assistant"})).json()
        assert final_text(await say(ada, made["id"], "I am Ada")) == "I am Ada"
        assert final_text(await say(ada, made["id"], "Who am I?")) == "I am Ada | Who am I?"
        await ada.aclose()
    finally:
        await gateway.stop()

    gateway = HttpGateway(settings, broker=broker_settings, namespace=namespace)  # the same file
    await gateway.start()
    try:
        ada = await signed_in(gateway.public_url, "ada")
        (listed,) = (await ada.get("/chat/api/conversations")).json()["conversations"]
        assert listed["title"] == "I am Ada" and listed["agent"] == "assistant"
        turns = (await ada.get(f"/chat/api/conversations/{made['id']}")).json()["turns"]
        assert [t["role"] for t in turns] == ["user", "agent", "user", "agent"]
        assert turns[2]["text"] == "Who am I?" and turns[3]["state"] == "completed"
        assert any(e.get("final") for e in turns[3]["events"])
        await ada.aclose()
    finally:
        await gateway.stop()


async def test_another_user_sees_no_conversation_and_downloads_no_file_of_the_first(
    serve_agent: ServeAgent, start_gateway: StartGateway
) -> None:
    reader = Reader()
    await serve_agent(reader)
    gateway = await start_gateway(wait_for=("reader",), auth=BASIC)
    base = gateway.public_url
    ada, bob = await signed_in(base, "ada"), await signed_in(base, "bob")
    page = await ada.get("/chat")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    made = (await ada.post("/chat/api/conversations", json={"agent": "reader"})).json()
    upload = {"name": "notes.txt", "mimeType": "text/plain", "bytes": base64.b64encode(b"secret plan\nmore").decode()}
    events = await say(ada, made["id"], "read this", files=[upload])
    assert "got `notes.txt`: 16 bytes, first line: secret plan" in final_text(events)
    assert reader.users == ["ada"]  # the agent saw the real user, not the gateway

    links = [
        p["file"]["uri"]
        for name, item in events
        if name == "item" and item.get("kind") == "artifact-update"
        for p in item["artifact"]["parts"]
        if not p["file"]["uri"].startswith("javascript:")  # the reader's hostile one, kept as it came
    ]
    (user_turn, _) = (await ada.get(f"/chat/api/conversations/{made['id']}")).json()["turns"]
    links.append(user_turn["files"][0]["url"])
    assert len(links) == 3 and all(link.startswith("/a2a/artifacts/") and "sig=" not in link for link in links)
    for link in links:
        assert (await ada.get(link)).status_code == 200
        assert (await bob.get(link)).status_code == 404  # bob's session: not his
    assert (await ada.get(links[-1])).content == b"secret plan\nmore"

    assert (await bob.get("/chat/api/conversations")).json()["conversations"] == []
    assert (await bob.get(f"/chat/api/conversations/{made['id']}")).status_code == 404
    refused = await bob.post(f"/chat/api/conversations/{made['id']}/messages", json={"text": "hi"})
    assert refused.status_code == 404
    # Ada's cookie in Bob's hands is Ada (a cookie is a credential), but Bob's cookie with Ada's
    # page token is refused: the token belongs to its session.
    bob.headers["X-CSRF-Token"] = ada.headers["X-CSRF-Token"]
    assert (await bob.post("/chat/api/conversations", json={"agent": "reader"})).status_code == 403
    await ada.aclose()
    await bob.aclose()


async def test_approvals_answer_a_waiting_tool_call_and_a_bad_one_is_refused(
    serve_agent: ServeAgent, start_gateway: StartGateway
) -> None:
    await serve_agent(assistant(Gate()))
    gateway = await start_gateway(wait_for=("assistant",), auth=BASIC)
    ada = await signed_in(gateway.public_url, "ada")
    try:
        made = (await ada.post("/chat/api/conversations", json={"agent": "assistant"})).json()
        asked = await say(ada, made["id"], "book Lima")
        final = next(item for name, item in reversed(asked) if name == "item" and item.get("final"))
        assert final["status"]["state"] == "input-required"
        [part] = final["status"]["message"]["parts"]
        assert part["data"]["function_name"] == "book" and part["data"]["arguments"] == {"city": "Lima"}
        path = f"/chat/api/conversations/{made['id']}/messages"
        bad = await ada.post(path, json={"text": "Approved book", "approvals": [{"approved": True}]})
        assert bad.status_code == 400 and bad.json()["error"].startswith('"approvals" must go with "taskId"')
        answer = {"tool_call_id": part["data"]["tool_call_id"], "approved": True}
        done = await say(ada, made["id"], "Approved book", taskId=final["taskId"], approvals=[answer])
        assert final_text(done) == "Booking: booked Lima"
    finally:
        await ada.aclose()
