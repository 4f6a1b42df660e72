"""Browser sign-in over plain HTTP: sessions, their cookie, CSRF, sign-out (the real gateway and broker)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from agents.builtin import EchoAgent
from tests.conftest import ServeAgent
from tests.gateways.chat_agents import Reader
from tests.gateways.conftest import StartGateway

USERS = {"ada": "ada-password", "bob": "bob-password"}
KEY = "k-0123456789abcdef"


def form_token(page: httpx.Response) -> str:
    match = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert match, page.text
    return match[1]


def csrf_of(page: httpx.Response) -> str:
    match = re.search(r'<meta name="csrf-token" content="([^"]+)"', page.text)
    assert match, page.text
    return match[1]


async def sign_in(base: str, fields: dict[str, str], *, next_path: str = "/chat") -> httpx.AsyncClient:
    """A client of its own (its cookie jar) signed in with ``fields``; the page's CSRF token in
    ``client.headers`` is left to the caller."""
    client = httpx.AsyncClient(base_url=base, timeout=30)
    form = await client.get("/signin", params={"next": next_path})
    assert form.status_code == 200
    answer = await client.post("/signin", data={"csrf": form_token(form), "next": next_path, **fields})
    assert answer.status_code == 303, answer.text
    return client


async def test_a_browser_signs_in_with_a_password_gets_a_strict_cookie_and_signs_out(
    serve_agent: ServeAgent, start_gateway: StartGateway
) -> None:
    await serve_agent(EchoAgent())
    gateway = await start_gateway(default_agent="echo", auth={"mode": "basic", "users": USERS})
    base = gateway.public_url
    async with httpx.AsyncClient(base_url=base, timeout=30) as anonymous:
        page = await anonymous.get("/chat", headers={"accept": "text/html"})
        assert page.status_code == 303 and page.headers["location"] == "/signin?next=/chat"
        assert (await anonymous.get("/chat/api/conversations")).status_code == 401

    client = httpx.AsyncClient(base_url=base, timeout=30)
    form = await client.get("/signin")
    wrong = await client.post("/signin", data={"csrf": form_token(form), "user": "ada", "password": "nope"})
    assert wrong.status_code == 401 and "Wrong user name or password" in wrong.text
    assert "mesh_session" not in wrong.headers.get("set-cookie", "")
    form = await client.get("/signin")
    right = await client.post(
        "/signin", data={"csrf": form_token(form), "user": "ada", "password": USERS["ada"], "next": "/chat"}
    )
    assert right.status_code == 303 and right.headers["location"] == "/chat"
    cookie = next(c for c in right.headers.get_list("set-cookie") if c.startswith("mesh_session="))
    assert {"HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=28800"} <= {p.strip() for p in cookie.split(";")}
    assert "Secure" not in cookie  # plain HTTP here

    page = await client.get("/chat")
    assert page.status_code == 200 and 'data-user="ada"' in page.text
    token = csrf_of(page)
    assert (await client.get("/chat/api/conversations")).json() == {"user": "ada", "conversations": []}
    # A state-changing request without the token: refused before any route sees it.
    refused = await client.post("/chat/api/conversations", json={"agent": "echo"})
    assert refused.status_code == 403 and "CSRF" in refused.text
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": _message("hi")}}
    assert (await client.post("/a2a", json=rpc)).status_code == 403
    sent = await client.post("/a2a", json=rpc, headers={"X-CSRF-Token": token})
    assert sent.status_code == 200 and sent.json()["result"]["status"]["state"] == "completed"
    created = await client.post("/chat/api/conversations", json={"agent": "echo"}, headers={"X-CSRF-Token": token})
    assert created.status_code == 201

    assert (await client.post("/signout")).status_code == 403  # no token: not another site's sign-out
    out = await client.post("/signout", headers={"X-CSRF-Token": token})
    assert out.status_code == 303 and out.headers["location"] == "/signin"
    assert (await client.get("/chat/api/conversations")).status_code == 401
    await client.aclose()


async def test_an_api_key_signs_in_and_a_bad_form_or_redirect_is_refused(
    serve_agent: ServeAgent, start_gateway: StartGateway
) -> None:
    await serve_agent(EchoAgent())
    gateway = await start_gateway(
        default_agent="echo", auth={"mode": "api_key", "keys": [{"secret": KEY, "name": "ops"}]}
    )
    base = gateway.public_url
    client = await sign_in(base, {"key": KEY})
    assert (await client.get("/chat/api/conversations")).json()["user"] == "ops"
    await client.aclose()

    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        form = await client.get("/signin")
        assert 'type="password"' in form.text and "API key" in form.text
        assert "The gateway&#39;s operator gives out its keys (its config&#39;s auth.keys)." in form.text  # where from
        bad = await client.post("/signin", data={"csrf": form_token(form), "key": "wrong"})
        assert bad.status_code == 401 and "not valid" in bad.text
        # A form posted from elsewhere has no matching sign-in token.
        forged = await client.post("/signin", data={"csrf": "forged", "key": KEY})
        assert forged.status_code == 403 and "mesh_session" not in forged.headers.get("set-cookie", "")
        form = await client.get("/signin")
        away = await client.post("/signin", data={"csrf": form_token(form), "key": KEY, "next": "//evil.example/x"})
        assert away.status_code == 303 and away.headers["location"] == "/chat"
        # A credential header still wins over a cookie (HTTP clients as before).
        assert (await client.get("/a2a/agents", headers={"X-API-Key": "wrong"})).status_code == 401


async def test_the_sign_in_page_says_where_the_key_is_as_the_config_tells_it(
    serve_agent: ServeAgent, start_gateway: StartGateway, tmp_path: Path
) -> None:
    from mesh.cli.up_edge import up_api_key, with_api_key
    from mesh.config import MeshConfig

    # mesh up's gateways: the file its banner names, and the export line for scripts.
    key = up_api_key("ns", tmp_path)
    config = MeshConfig(
        namespace="ns", sections={"gateways": [{"kind": "http", "port": 0}]}, source=tmp_path / "x.yaml"
    )
    [up_config] = with_api_key([config], key)
    auth = up_config.sections["gateways"][0]["auth"]
    await serve_agent(EchoAgent())
    gateway = await start_gateway(default_agent="echo", auth=auth)
    async with httpx.AsyncClient(base_url=gateway.public_url, timeout=30) as client:
        page = (await client.get("/signin")).text
    assert f"mesh up keeps this gateway&#39;s API key in {key.path}" in page
    assert f"export MESH_API_KEY=&quot;$(cat {key.path})&quot;" in page
    assert key.secret not in page


@pytest.mark.parametrize("path", ["/chat/api/conversations"])
async def test_with_authentication_off_nobody_signs_in_but_posts_still_need_the_token(
    serve_agent: ServeAgent, start_gateway: StartGateway, path: str
) -> None:
    await serve_agent(EchoAgent())
    gateway = await start_gateway(default_agent="echo")
    async with httpx.AsyncClient(base_url=gateway.public_url, timeout=30) as client:
        assert (await client.get("/signin")).headers["location"] == "/chat"
        page = await client.get("/chat")
        assert page.status_code == 200 and 'data-user="anonymous"' in page.text
        assert (await client.post(path, json={"agent": "echo"})).status_code == 403
        made = await client.post(path, json={"agent": "echo"}, headers={"X-CSRF-Token": csrf_of(page)})
        assert made.status_code == 201


def _message(text: str) -> dict[str, object]:
    return {"kind": "message", "role": "user", "messageId": "m-1", "parts": [{"kind": "text", "text": text}]}


async def test_the_dashboard_sends_as_the_signed_in_user(serve_agent: ServeAgent, start_gateway: StartGateway) -> None:
    reader = Reader()
    await serve_agent(reader)
    gateway = await start_gateway(wait_for=("reader",), auth={"mode": "basic", "users": USERS})
    client = await sign_in(gateway.public_url, {"user": "bob", "password": USERS["bob"]}, next_path="/ui")
    page = await client.get("/ui")
    assert page.status_code == 200 and '<a class="chat-link" href="/chat">' in page.text
    body = {"agent": "reader", "text": "hello"}
    assert (await client.post("/ui/api/send", json=body)).status_code == 403  # no CSRF token
    async with client.stream("POST", "/ui/api/send", json=body, headers={"X-CSRF-Token": csrf_of(page)}) as sent:
        lines = [line async for line in sent.aiter_lines() if line.startswith("event:")]
    assert lines[-1] == "event: end" and "event: item" in lines
    assert reader.users == ["bob"]  # the agent saw the user, not the dashboard's own client
    await client.aclose()
