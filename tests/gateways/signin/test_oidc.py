"""OIDC browser sign-in over plain HTTP: the real gateway and broker, a fake provider on loopback
(tests/gateways/oidc_provider.py), an httpx client with a cookie jar following the redirects."""

from __future__ import annotations

import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from joserfc.jwk import ECKey

from gateways.http.server import HttpGateway
from tests.gateways.chat_agents import Reader
from tests.gateways.conftest import StartGateway
from tests.gateways.oidc_provider import CLIENT_ID, CLIENT_SECRET, FakeProvider
from tests.gateways.signin.test_signin import csrf_of

KEY = "k-0123456789abcdef"
SECRET_ENV = "MESH_TEST_OIDC_SECRET"


@pytest.fixture
async def provider(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeProvider]:
    monkeypatch.setenv(SECRET_ENV, CLIENT_SECRET)
    async with FakeProvider() as fake:
        yield fake


def oidc_auth(issuer: str, **oidc: Any) -> dict[str, Any]:
    """Programs with an API key, people through the provider."""
    settings = {"issuer": issuer, "client_id": CLIENT_ID, "client_secret_env": SECRET_ENV, **oidc}
    return {"mode": "api_key", "keys": [{"secret": KEY, "name": "ops"}], "oidc": settings}


async def start(start_gateway: StartGateway, issuer: str, **oidc: Any) -> HttpGateway:
    return await start_gateway(wait_for=(), auth=oidc_auth(issuer, **oidc))


def refresh_target(page: httpx.Response) -> str:
    match = re.search(r'http-equiv="refresh" content="0;url=([^"]+)"', page.text)
    assert match, page.text
    return match[1]


async def callback_url(client: httpx.AsyncClient, next_path: str = "/chat") -> str:
    """Start a sign-in and let the provider consent: the callback URL it sends the browser to."""
    started = await client.get("/signin/oidc", params={"next": next_path})
    assert started.status_code == 303, started.text
    consent = await client.get(started.headers["location"])
    assert consent.status_code == 302, consent.text
    return consent.headers["location"]


def assert_refused(page: httpx.Response, status: int, *says: str) -> None:
    assert page.status_code == status, page.text
    assert "Sign-in with the identity provider failed" in page.text and 'role="alert"' in page.text
    for text in says:
        assert text in page.text, page.text
    assert "Traceback" not in page.text and "mesh_session=" not in page.headers.get("set-cookie", "")


async def test_signing_in_with_the_provider_makes_a_session_for_the_claims_user(
    serve_agent: Any, start_gateway: StartGateway, provider: FakeProvider
) -> None:
    reader = Reader()
    await serve_agent(reader)
    gateway = await start_gateway(wait_for=("reader",), auth=oidc_auth(provider.issuer, display_name="Test SSO"))
    async with httpx.AsyncClient(base_url=gateway.public_url, timeout=30, follow_redirects=True) as client:
        form = await client.get("/signin", params={"next": "/chat"})
        assert 'id="signin-oidc" href="/signin/oidc?next=/chat">Sign in with Test SSO</a>' in form.text
        assert "API key" in form.text  # the key form stays, for whoever holds one

        done = await client.get("/signin/oidc", params={"next": "/chat"})
        assert done.status_code == 200 and "Signed in as carol" in done.text
        assert str(done.url).startswith(f"{gateway.public_url}/signin/oidc/callback?code=")
        cookie = next(c for c in done.headers.get_list("set-cookie") if c.startswith("mesh_session="))
        assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= {p.strip() for p in cookie.split(";")}
        assert [r.headers["location"].split("?")[0] for r in done.history] == [
            f"{provider.issuer}/auth",
            f"{gateway.public_url}/signin/oidc/callback",
        ]
        # PKCE: the verifier went to the token endpoint (the provider checked it against the challenge).
        [exchange] = provider.token_requests
        assert len(exchange["code_verifier"]) >= 43 and "client_secret" not in exchange

        page = await client.get(refresh_target(done))
        assert page.status_code == 200 and 'data-user="carol"' in page.text
        assert (await client.get("/chat/api/conversations")).json() == {"user": "carol", "conversations": []}
        message = {"kind": "message", "role": "user", "messageId": "m-1", "parts": [{"kind": "text", "text": "hi"}]}
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}
        sent = await client.post("/a2a/agents/reader", json=rpc, headers={"X-CSRF-Token": csrf_of(page)})
        assert sent.status_code == 200 and sent.json()["result"]["status"]["state"] == "completed"
        assert reader.users == ["carol"]  # the agent sees the provider's user

    # Programs keep the API key, and the provider's user is no key.
    async with httpx.AsyncClient(base_url=gateway.public_url, timeout=30) as program:
        assert (await program.get("/a2a/agents", headers={"X-API-Key": KEY})).status_code == 200
        assert (await program.get("/a2a/agents", headers={"X-API-Key": "carol"})).status_code == 401


async def test_another_claim_names_the_user(start_gateway: StartGateway, provider: FakeProvider) -> None:
    gateway = await start(start_gateway, provider.issuer, username_claim="email")
    async with httpx.AsyncClient(base_url=gateway.public_url, timeout=30, follow_redirects=True) as client:
        done = await client.get("/signin/oidc")
        assert (await client.get(refresh_target(done))).status_code == 200
        assert (await client.get("/chat/api/conversations")).json()["user"] == "carol@example.com"
    provider.user = {"preferred_username": "dave"}  # no email claim: refused, saying which claim
    async with httpx.AsyncClient(base_url=gateway.public_url, timeout=30, follow_redirects=True) as client:
        assert_refused(await client.get("/signin/oidc"), 401, "no usable &#39;email&#39; claim")


async def test_a_wrong_or_foreign_state_is_refused(start_gateway: StartGateway, provider: FakeProvider) -> None:
    gateway = await start(start_gateway, provider.issuer)
    async with httpx.AsyncClient(base_url=gateway.public_url, timeout=30) as client:
        url = await callback_url(client)
        forged = re.sub(r"state=[^&]+", "state=forged", url)
        assert_refused(await client.get(forged), 400, "state does not match")
        # The right link in another browser (no state cookie): refused too (login CSRF).
        async with httpx.AsyncClient(timeout=30) as other:
            assert_refused(await other.get(url), 400, "state does not match")
        assert provider.token_requests == []  # refused before the code was spent
        # With the cookie's state but no pending sign-in left at the gateway (used once).
        url = await callback_url(client)
        assert (await client.get(url)).status_code == 200
        state = re.search(r"state=([^&]+)", url)
        assert state
        client.cookies.set("mesh_oidc", state[1], path="/signin/oidc")
        assert_refused(await client.get(url), 400, "unknown or expired")


async def test_a_replayed_code_is_refused_by_the_provider(
    start_gateway: StartGateway, provider: FakeProvider, caplog: pytest.LogCaptureFixture
) -> None:
    gateway = await start(start_gateway, provider.issuer)
    async with httpx.AsyncClient(base_url=gateway.public_url, timeout=30) as client:
        first = await callback_url(client)
        assert (await client.get(first)).status_code == 200
        # A new sign-in (its own state), finished with the first one's code.
        second = await callback_url(client)
        code = re.search(r"code=([^&]+)", first)
        assert code
        replayed = re.sub(r"code=[^&]+", f"code={code[1]}", second)
        assert_refused(await client.get(replayed), 401, "refused to exchange the sign-in code", "invalid_grant")
    assert "invalid_grant" in caplog.text  # logged, without the code or the secret
    assert code[1] not in caplog.text and CLIENT_SECRET not in caplog.text


@pytest.mark.parametrize(
    ("spoil", "says"),
    [
        ("signature", "signature does not match"),
        ("audience", "&#39;aud&#39; claim"),
        ("expired", "expired"),
        ("nonce", "&#39;nonce&#39; claim"),
    ],
)
async def test_a_bad_id_token_is_refused(
    start_gateway: StartGateway, provider: FakeProvider, caplog: pytest.LogCaptureFixture, spoil: str, says: str
) -> None:
    gateway = await start(start_gateway, provider.issuer)
    if spoil == "signature":  # another key under the provider's key id
        provider.next_signing_key = ECKey.generate_key("P-256", parameters={"kid": "k1"}, private=True)
    elif spoil == "audience":
        provider.next_audience = "another-client"
    elif spoil == "expired":
        provider.next_exp_delta = -600
    else:
        provider.next_nonce = "a-nonce-from-another-sign-in"
    async with httpx.AsyncClient(base_url=gateway.public_url, timeout=30, follow_redirects=True) as client:
        page = await client.get("/signin/oidc")
        assert_refused(page, 401, "the ID token from the identity provider was refused", says)
        assert (await client.get("/chat/api/conversations")).status_code == 401
    assert "ID token refused" in caplog.text and "eyJ" not in caplog.text  # no token in the log


async def test_an_unreachable_issuer_gives_a_clear_page(start_gateway: StartGateway) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    gateway = await start(start_gateway, f"http://127.0.0.1:{port}/realms/gone", client_secret_env=None)
    async with httpx.AsyncClient(base_url=gateway.public_url, timeout=30) as client:
        page = await client.get("/signin/oidc", params={"next": "/ui"})
        assert_refused(page, 502, f"http://127.0.0.1:{port}/realms/gone could not be reached", "ConnectError")
        assert "Check that the gateway can reach the provider" in page.text
        assert 'name="next" value="/ui"' in page.text  # the key form is still there, coming back to /ui


async def test_rotated_keys_are_fetched_again(start_gateway: StartGateway, provider: FakeProvider) -> None:
    gateway = await start(start_gateway, provider.issuer)
    for _ in range(2):  # the second sign-in uses the cached keys
        async with httpx.AsyncClient(base_url=gateway.public_url, timeout=30, follow_redirects=True) as client:
            assert "Signed in as carol" in (await client.get("/signin/oidc")).text
    assert provider.jwks_fetches == 1
    provider.rotate()
    async with httpx.AsyncClient(base_url=gateway.public_url, timeout=30, follow_redirects=True) as client:
        assert "Signed in as carol" in (await client.get("/signin/oidc")).text
    assert provider.jwks_fetches == 2


async def test_started_sign_ins_are_capped(start_gateway: StartGateway, provider: FakeProvider) -> None:
    gateway = await start(start_gateway, provider.issuer, max_pending=1)
    base = gateway.public_url
    async with (
        httpx.AsyncClient(base_url=base, timeout=30) as first,
        httpx.AsyncClient(base_url=base, timeout=30) as second,
    ):
        dropped = await callback_url(first)
        kept = await callback_url(second)  # the cap drops the first browser's
        assert_refused(await first.get(dropped), 400, "unknown or expired")
        assert "Signed in as carol" in (await second.get(kept)).text
