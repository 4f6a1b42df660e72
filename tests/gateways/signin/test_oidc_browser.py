"""OIDC sign-in in a real headless Chromium: the sign-in page's provider button, the round trip
through the fake provider (tests/gateways/oidc_provider.py) and back into the chat as the
provider's user, and a refused ID token shown on the sign-in page. Screenshots go to
``tmp_path/shots``."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.builtin import EchoAgent
from tests.conftest import ServeAgent
from tests.gateways.browser import headless_chromium, needs_chromium
from tests.gateways.conftest import StartGateway
from tests.gateways.dashboard.test_browser import until
from tests.gateways.oidc_provider import CLIENT_SECRET, FakeProvider
from tests.gateways.signin.test_oidc import SECRET_ENV, oidc_auth

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402

pytestmark = needs_chromium


@pytest.fixture
def browser() -> Iterator[WebDriver]:
    with headless_chromium(1440, 900) as driver:
        yield driver


async def test_a_browser_signs_in_at_the_provider_and_chats_as_its_user(
    serve_agent: ServeAgent,
    start_gateway: StartGateway,
    browser: WebDriver,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(SECRET_ENV, CLIENT_SECRET)
    shots = tmp_path / "shots"
    shots.mkdir()
    await serve_agent(EchoAgent())
    async with FakeProvider() as provider:
        gateway = await start_gateway(default_agent="echo", auth=oidc_auth(provider.issuer, display_name="Test SSO"))
        base = gateway.public_url

        def run(script: str) -> object:
            return browser.execute_script(script)

        await asyncio.to_thread(browser.get, f"{base}/chat")
        button = await until(lambda: browser.find_elements(By.ID, "signin-oidc"), 10, "the provider's button")
        assert button[0].text == "Sign in with Test SSO"
        await asyncio.to_thread(browser.save_screenshot, str(shots / "oidc-signin.png"))

        await asyncio.to_thread(button[0].click)
        await until(lambda: run("return document.body.dataset.ready === 'true'"), 10, "the chat after sign-in")
        assert browser.current_url == f"{base}/chat"
        assert run("return document.body.dataset.user") == "carol"
        cookies = {c["name"]: c for c in await asyncio.to_thread(browser.get_cookies)}
        assert cookies["mesh_session"]["httpOnly"] and cookies["mesh_session"]["sameSite"] == "Strict"
        assert "mesh_oidc" not in cookies  # the started sign-in's state is gone
        await asyncio.to_thread(browser.save_screenshot, str(shots / "oidc-chat.png"))
        answer = await asyncio.to_thread(
            browser.execute_async_script,
            """const done = arguments[arguments.length - 1];
            fetch('/chat/api/conversations').then(r => r.json()).then(done);""",
        )
        assert answer == {"user": "carol", "conversations": []}

        # Signed out, then a token the gateway must refuse: the sign-in page says so.
        await asyncio.to_thread(browser.delete_all_cookies)
        provider.next_audience = "another-client"
        await asyncio.to_thread(browser.get, f"{base}/signin")
        button = await until(lambda: browser.find_elements(By.ID, "signin-oidc"), 10, "the provider's button")
        await asyncio.to_thread(button[0].click)
        alert = await until(lambda: browser.find_elements(By.CSS_SELECTOR, "[role=alert]"), 10, "the refusal")
        assert "the ID token from the identity provider was refused" in alert[0].text and "'aud'" in alert[0].text
        assert "mesh_session" not in {c["name"] for c in await asyncio.to_thread(browser.get_cookies)}
        await asyncio.to_thread(browser.save_screenshot, str(shots / "oidc-refused.png"))
