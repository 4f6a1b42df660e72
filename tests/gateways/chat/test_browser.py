"""The chat in a real headless Chromium (Debian's chromium and chromium-driver via Selenium),
against the real gateway, broker and agents: sign-in, streaming, questions, cancel, files, the
work shown, each user's own conversations, CSRF. Screenshots of each state go to
``tmp_path/shots`` (at 1440 px wide, and 375 px for the phone layout).

Selenium's calls block, so they run in a thread while the agents and the gateway run on the
test's event loop. Every wait is on a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agents.builtin import CountdownAgent
from agents.workflow import WorkflowAgent, load_workflow
from gateways.http.server import HttpGateway
from tests.agents.workflow_agents import Upper
from tests.conftest import ServeAgent
from tests.gateways.browser import headless_chromium, needs_chromium
from tests.gateways.chat_agents import Gate, Reader, assistant
from tests.gateways.conftest import StartGateway
from tests.gateways.dashboard.test_browser import until
from tests.gateways.signin.test_signin import USERS

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

pytestmark = needs_chromium

WIDE, PHONE = (1440, 900), (375, 740)


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with headless_chromium(1440, 900) as driver:
        yield driver


@dataclass
class Chat:
    gateway: HttpGateway
    browser: WebDriver
    gate: Gate
    reader: Reader
    shots: Path

    @property
    def base(self) -> str:
        return self.gateway.public_url

    def run(self, script: str, *args: Any) -> Any:
        return self.browser.execute_script(script, *args)

    async def shot(self, name: str, size: tuple[int, int] = WIDE) -> Path:
        path = self.shots / f"{name}.png"

        def take() -> None:
            if tuple(self.browser.get_window_size().values()) != size:
                self.browser.set_window_size(*size)
            self.browser.save_screenshot(str(path))

        await asyncio.to_thread(take)
        return path

    async def sign_in(self, user: str, password: str | None = None) -> None:
        def fill() -> None:
            self.browser.get(f"{self.base}/chat")
            self.browser.find_element(By.ID, "user").send_keys(user)
            self.browser.find_element(By.ID, "password").send_keys(password or USERS[user])
            self.browser.find_element(By.ID, "signin-button").click()

        await asyncio.to_thread(fill)
        if password is None:
            await self.ready()

    async def ready(self) -> None:
        await until(lambda: self.run("return document.body.dataset.ready === 'true'"), 10, "the chat page")

    async def type(self, text: str, *, enter: bool = True) -> None:
        def fill() -> None:
            field = self.browser.find_element(By.ID, "composer-text")
            field.send_keys(text)
            if enter:
                field.send_keys(Keys.ENTER)

        await asyncio.to_thread(fill)

    def answers(self) -> list[dict[str, str]]:
        script = """return [...document.querySelectorAll('.turn.agent')].map(t => ({
            state: t.dataset.state, text: t.querySelector('.text').innerText,
            extra: t.querySelector('.extra').innerText}))"""
        result: list[dict[str, str]] = self.run(script)
        return result

    async def answer(self, check: Callable[[dict[str, str]], bool], what: str, timeout: float = 10) -> dict[str, str]:
        def last() -> dict[str, str] | None:
            answers = self.answers()
            return answers[-1] if answers and check(answers[-1]) else None

        return await until(last, timeout, what)

    async def new_conversation(self, agent: str) -> None:
        def pick() -> None:
            self.browser.find_element(By.ID, "new-chat").click()
            Select(self.browser.find_element(By.ID, "agent")).select_by_value(agent)

        await asyncio.to_thread(pick)


@pytest.fixture
async def chat(
    browser: WebDriver, serve_agent: ServeAgent, start_gateway: StartGateway, tmp_path: Path
) -> AsyncIterator[Chat]:
    gate = Gate()
    reader = Reader()
    await serve_agent(assistant(gate))
    await serve_agent(reader)
    await serve_agent(CountdownAgent(interval_s=0.3))
    gateway = await start_gateway(
        default_agent="assistant",
        wait_for=("assistant", "reader", "countdown"),
        auth={"mode": "basic", "users": USERS},
        chat_store=str(tmp_path / "chat.sqlite"),
    )
    shots = tmp_path / "shots"
    shots.mkdir()
    await asyncio.to_thread(browser.set_window_size, *WIDE)
    await asyncio.to_thread(browser.get, f"{gateway.public_url}/signin")
    await asyncio.to_thread(browser.delete_all_cookies)
    yield Chat(gateway, browser, gate, reader, shots)
    gate.open.set()
    await asyncio.to_thread(browser.get, "about:blank")  # no stream left open on the gateway


async def test_sign_in_refuses_a_wrong_password_and_signs_out(chat: Chat) -> None:
    await chat.sign_in("ada", "not-her-password")
    error = await until(lambda: chat.run("return document.querySelector('.error')?.innerText"), 5, "the refusal")
    assert "Wrong user name or password" in error
    await chat.shot("signin-refused")
    await chat.shot("signin-refused-phone", PHONE)
    await asyncio.to_thread(chat.browser.set_window_size, *WIDE)

    await chat.sign_in("ada")
    assert chat.run("return document.getElementById('who').innerText") == "ada"
    assert chat.run("return document.cookie") == ""  # the session cookie is HTTP-only
    await chat.shot("signed-in-empty")
    await asyncio.to_thread(chat.browser.find_element(By.ID, "signout").click)
    await until(lambda: "/signin" in chat.browser.current_url, 5, "the sign-in page after signing out")
    await asyncio.to_thread(chat.browser.get, f"{chat.base}/chat")
    await until(lambda: chat.browser.find_elements(By.ID, "password"), 5, "the sign-in page again")


async def test_answers_stream_keep_context_and_come_back_after_a_reload(chat: Chat, tmp_path: Path) -> None:
    await chat.sign_in("ada")
    # The browser's own clock when the first words show, for the latency measured below.
    chat.run("""window.firstWordsAt = null;
        new MutationObserver((_, observer) => {
          if (document.querySelector('.turn.agent .text')?.innerText.includes('First words')) {
            window.firstWordsAt = performance.timeOrigin + performance.now(); observer.disconnect(); }
        }).observe(document.getElementById('turns'), {subtree: true, childList: true, characterData: true});""")
    await chat.type("slow")
    streaming = await chat.answer(lambda a: "First words" in a["text"], "the first words")
    assert streaming["state"] == "working" and "the rest" not in streaming["text"]  # before the task ended
    assert chat.gate.first_words_at is not None
    shown_at = await until(lambda: chat.run("return window.firstWordsAt"), 5, "the observer's time")
    latency_ms = shown_at - chat.gate.first_words_at * 1000
    (tmp_path / "first-token-latency-ms.txt").write_text(f"{latency_ms:.1f}\n")
    print(f"first answer token shown {latency_ms:.1f} ms after the model produced it")
    assert 0 <= latency_ms < 2000  # a generous bound; the figure is reported, not asserted tightly
    await chat.shot("streaming")
    # A reload mid-answer: the page shows what came and follows the rest (tasks/resubscribe).
    await asyncio.to_thread(chat.browser.refresh)
    await chat.ready()
    resumed = await chat.answer(lambda a: a["state"] == "working" and "First words" in a["text"], "the answer so far")
    assert resumed["text"].strip() == "First words"
    await until(lambda: chat.run("return !document.getElementById('stop').hidden"), 5, "the answer followed again")
    await chat.shot("streaming-after-reload")
    chat.gate.open.set()
    answer = await chat.answer(lambda a: a["state"] == "completed", "the end")
    assert answer["text"].strip() == "First words and the rest."

    # Shift+Enter is a new line, not a send; Enter sends.
    def two_lines() -> str:
        field = chat.browser.find_element(By.ID, "composer-text")
        field.send_keys("I am Ada", Keys.SHIFT + Keys.ENTER + Keys.NULL, "truly")
        return str(field.get_attribute("value"))

    assert await asyncio.to_thread(two_lines) == "I am Ada\ntruly"
    assert len(chat.answers()) == 1
    await chat.type("")
    await chat.answer(lambda a: a["state"] == "completed" and "truly" in a["text"], "the second answer")
    await chat.type("Who am I?")
    answer = await chat.answer(lambda a: "Who am I?" in a["text"] and a["state"] == "completed", "the third answer")
    assert "slow | I am Ada truly | Who am I?" in answer["text"].replace("\n", " ")  # the context kept
    await chat.shot("conversation")

    await asyncio.to_thread(chat.browser.refresh)
    await chat.ready()
    assert [a["state"] for a in chat.answers()] == ["completed"] * 3
    assert "Who am I?" in chat.answers()[-1]["text"]
    titles = chat.run("return [...document.querySelectorAll('#conversations .conversation')].map(b => b.innerText)")
    assert titles == ["slow"]
    await chat.shot("restored-after-reload")
    await chat.shot("restored-phone", PHONE)
    # At 375 px the conversations are behind the menu button.
    assert not chat.browser.find_element(By.ID, "sidebar").is_displayed()
    await asyncio.to_thread(chat.browser.find_element(By.ID, "menu").click)
    await until(lambda: chat.browser.find_element(By.ID, "sidebar").is_displayed(), 5, "the sidebar on a phone")
    assert chat.browser.find_element(By.ID, "menu").get_attribute("aria-expanded") == "true"
    await chat.shot("sidebar-phone", PHONE)


async def test_a_question_is_answered_inline_and_tool_steps_show(chat: Chat) -> None:
    await chat.sign_in("ada")
    await chat.type("ask")
    await chat.answer(lambda a: a["state"] == "input-required" and "Which city?" in a["extra"], "the question")
    await chat.shot("input-required")

    def reply() -> None:
        field = chat.browser.find_element(By.CSS_SELECTOR, ".answer-form input")
        field.send_keys("Lisbon")
        chat.browser.find_element(By.CSS_SELECTOR, ".answer-form button").click()

    await asyncio.to_thread(reply)
    answer = await chat.answer(lambda a: a["state"] == "completed", "the answer after the reply")
    assert answer["text"].strip() == "You chose Lisbon."
    assert chat.run("return document.querySelector('.turn.agent:last-child .text strong').innerText") == "Lisbon"
    assert chat.answers()[0]["state"] == "answered" and not chat.browser.find_elements(By.CSS_SELECTOR, ".answer-form")

    await chat.type("weather Oslo")
    answer = await chat.answer(lambda a: a["state"] == "completed", "the weather answer")
    assert "Oslo: 21 °C, sunny" in answer["text"]
    step = chat.browser.find_element(By.CSS_SELECTOR, '.turn.agent:last-child details[data-tool="weather"]')
    assert step.get_attribute("data-state") == "completed"
    await asyncio.to_thread(step.find_element(By.TAG_NAME, "summary").click)
    body = step.find_element(By.CSS_SELECTOR, ".step-body").text
    assert '"city": "Oslo"' in body and "21 °C, sunny" in body
    await chat.shot("tool-steps")
    await chat.shot("tool-steps-phone", PHONE)


async def test_a_tool_call_waits_for_approve_or_deny_with_its_arguments_and_usage_shows(chat: Chat) -> None:
    await chat.sign_in("ada")
    await chat.type("book Oslo")
    await chat.answer(lambda a: a["state"] == "input-required" and "Run book?" in a["extra"], "the approval")
    box = chat.browser.find_element(By.CSS_SELECTOR, '.turn.agent:last-child .approval[data-tool="book"]')
    assert '"city": "Oslo"' in box.find_element(By.CSS_SELECTOR, "pre").text
    await chat.shot("approval")
    await asyncio.to_thread(box.find_element(By.CSS_SELECTOR, "button.approve").click)
    answer = await chat.answer(lambda a: a["state"] == "completed", "the answer after Approve")
    assert answer["text"].strip() == "Booking: booked Oslo"
    assert re.search(r"\d+ tokens \(\d+ in, \d+ out\)", answer["extra"]), answer
    assert not chat.browser.find_elements(By.CSS_SELECTOR, ".approval button")  # answered: no buttons left

    await chat.type("book Rome")
    await chat.answer(lambda a: a["state"] == "input-required" and "Run book?" in a["extra"], "the second approval")
    deny = chat.browser.find_element(By.CSS_SELECTOR, ".turn.agent:last-child .approval button.deny")
    await asyncio.to_thread(deny.click)
    answer = await chat.answer(lambda a: a["state"] == "completed", "the answer after Deny")
    assert answer["text"].strip() == "Booking: The user denied this call: denied in the chat"
    total = chat.browser.find_element(By.ID, "usage-total").text
    assert re.fullmatch(r"This conversation: \d+ tokens \(\d+ in, \d+ out\)", total), total
    await chat.shot("approval-denied")


async def test_escape_cancels_a_running_task(chat: Chat) -> None:
    await chat.sign_in("ada")
    await chat.new_conversation("countdown")
    await chat.type("50")
    await chat.answer(lambda a: "Progress" in chat.run("return document.body.innerText"), "the countdown's progress")
    await chat.shot("running")
    await asyncio.to_thread(chat.browser.find_element(By.TAG_NAME, "body").send_keys, Keys.ESCAPE)
    await chat.answer(lambda a: a["state"] == "canceled", "the task canceled")
    await until(lambda: chat.run("return document.getElementById('stop').hidden"), 5, "the Stop button to go")
    await chat.shot("canceled")


async def test_a_file_reaches_the_agent_and_stays_with_its_owner(chat: Chat, tmp_path: Path) -> None:
    await chat.sign_in("ada")
    await chat.new_conversation("reader")
    notes = tmp_path / "notes.txt"
    notes.write_text("secret plan\nsecond line\n")
    await asyncio.to_thread(chat.browser.find_element(By.ID, "file").send_keys, str(notes))
    await until(lambda: chat.run("return document.querySelector('.chip')?.innerText"), 5, "the attachment chip")
    await chat.type("please read")
    answer = await chat.answer(lambda a: a["state"] == "completed", "the reader's answer")
    assert "got notes.txt: 24 bytes, first line: secret plan" in answer["text"]
    assert chat.reader.users == ["ada"]
    await until(
        lambda: (
            chat.run("return [...document.querySelectorAll('img.artifact-image')].every(i => i.naturalWidth == 48)")
            and chat.run("return document.querySelectorAll('img.artifact-image').length") == 1
        ),
        5,
        "the picture shown inline",
    )
    links: list[str] = await until(
        lambda: chat.run("return [...document.querySelectorAll('a.download')].map(a => a.getAttribute('href'))"),
        5,
        "the download links",
    )
    assert len(links) == 3  # the upload, the report, the picture (not the hostile javascript: one)
    # Nothing an agent writes becomes markup or a script link.
    answer_text = chat.run("return document.querySelector('.turn.agent:last-child .text').innerText")
    assert answer_text.endswith("<b>bold?</b> <img src=x onerror=alert(1)> click")
    assert chat.run("return document.querySelectorAll('.turn.agent .text b, .turn.agent .text img').length") == 0
    assert chat.run("return document.querySelectorAll('a[href^=\"javascript\"]').length") == 0
    assert "evil.html: javascript:alert(1)" in chat.run(
        "return document.querySelector('.turn.agent:last-child').innerText"
    )
    assert await asyncio.to_thread(chat.run, _FETCH_STATUS, links[0]) == 200
    await chat.shot("files")
    ada_cookie = {c["name"]: c["value"] for c in chat.browser.get_cookies()}["mesh_session"]
    conversation = chat.browser.current_url.partition("#")[2]
    async with httpx.AsyncClient(base_url=chat.base, timeout=30, cookies={"mesh_session": ada_cookie}) as http:
        ada_statuses = {(await http.get(link)).status_code for link in links}
        ada_statuses.add((await http.get(f"/chat/api/conversations/{conversation}")).status_code)

    await asyncio.to_thread(chat.browser.find_element(By.ID, "signout").click)
    await until(lambda: "/signin" in chat.browser.current_url, 5, "signed out")
    await chat.sign_in("bob")
    assert chat.run("return document.querySelectorAll('#conversations .conversation').length") == 0
    await asyncio.to_thread(chat.browser.get, f"{chat.base}/chat#{conversation}")
    await chat.ready()
    assert chat.answers() == []  # not his
    for link in links:
        status = await asyncio.to_thread(chat.run, _FETCH_STATUS, link)
        who = chat.run("return document.body.dataset.user + ' ' + location.href")
        assert status == 404, (link, who, chat.browser.get_cookies())
    await chat.shot("second-user")
    bob_cookie = {c["name"]: c["value"] for c in chat.browser.get_cookies()}["mesh_session"]

    # Over plain HTTP, cookies swapped: Bob's gets none of Ada's things (as if they did not exist);
    # Ada's was good until she signed out, and is dead after.
    async with httpx.AsyncClient(base_url=chat.base, timeout=30) as http:
        for cookie, status in ((bob_cookie, 404), (ada_cookie, 401)):
            http.cookies.set("mesh_session", cookie)
            assert (await http.get(f"/chat/api/conversations/{conversation}")).status_code == status
            assert {(await http.get(link)).status_code for link in links} == {status}
            http.cookies.clear()
        assert ada_statuses == {200}


async def test_a_cross_site_post_without_the_token_is_refused(chat: Chat) -> None:
    await chat.sign_in("ada")
    # Another site (localhost is not 127.0.0.1's site) posting a form to the gateway.
    attacker = await _attacker_site(f"{chat.base}/chat/api/conversations")
    try:
        await asyncio.to_thread(chat.browser.get, attacker.url)
        body = await until(
            lambda: chat.browser.current_url.startswith(chat.base) and chat.run("return document.body.innerText"),
            5,
            "the gateway's answer to the forged form",
        )
        # SameSite=Strict: the cookie did not even go with it, so the gateway saw nobody.
        assert "authentication required" in body and "Conversations" not in body
    finally:
        await attacker.close()
    await asyncio.to_thread(chat.browser.get, f"{chat.base}/chat")
    await chat.ready()
    # From the page's own origin but without the token: refused too.
    status = await asyncio.to_thread(
        chat.run,
        """return fetch('api/conversations', {method: 'POST', headers: {'content-type': 'application/json'},
            body: JSON.stringify({agent: 'assistant'})}).then(r => r.status)""",
    )
    assert status == 403
    assert chat.run("return document.querySelectorAll('#conversations .conversation').length") == 0
    await chat.shot("csrf-refused-page")


_FETCH_STATUS = "return fetch(arguments[0], {credentials: 'same-origin'}).then(r => r.status)"


@dataclass
class _Site:
    server: asyncio.Server
    url: str
    writers: list[asyncio.StreamWriter]

    async def close(self) -> None:
        self.server.close()
        for writer in self.writers:  # the browser may hold a connection open (3.11 leaves it)
            writer.close()
        await self.server.wait_closed()


async def _attacker_site(target: str) -> _Site:
    """A page on ``localhost`` that posts a JSON-looking form to ``target`` as soon as it loads."""
    page = (
        "<!doctype html><form id=f method=post enctype=text/plain action='" + target + "'>"
        '<input name=\'{"agent":"assistant","x":"\' value=\'"}\'></form>'
        "<script>document.getElementById('f').submit()</script>"
    ).encode()
    writers: list[asyncio.StreamWriter] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writers.append(writer)
        try:
            await reader.readuntil(b"\r\n\r\n")
            head = f"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {len(page)}\r\n"
            writer.write(head.encode() + b"Connection: close\r\n\r\n" + page)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return _Site(server, f"http://localhost:{port}/", writers)


async def test_a_workflows_nodes_show_as_steps_of_the_answer(
    chat: Chat, serve_agent: ServeAgent, browser: WebDriver
) -> None:
    await serve_agent(Upper())
    graph = load_workflow(
        """
        nodes:
          - {id: shout, agent: upper, input: "{{ input.text }}"}
          - {id: again, agent: upper, input: "{{ shout.output.text }} twice"}
        """,
        name="flow",
    )
    await serve_agent(WorkflowAgent(name="flow", graph=graph))
    await chat.gateway.runtime.registry.wait_for("flow", 5)
    await chat.sign_in("ada")
    await chat.new_conversation("flow")
    await chat.type("hello")
    await chat.answer(lambda a: a["state"] == "completed", "the workflow's answer")
    steps = chat.run(
        "return [...document.querySelectorAll('.turn.agent details.step')].map(d => [d.dataset.step, d.dataset.state])"
    )
    assert steps == [["node:shout", "completed"], ["node:again", "completed"]]
    assert "HELLO TWICE" in chat.answers()[-1]["text"]
    await asyncio.to_thread(browser.find_element(By.CSS_SELECTOR, '[data-step="node:again"] summary').click)
    await chat.shot("workflow-steps")


_ARTIFACTS = """const turn = [...document.querySelectorAll('.turn.agent')].at(-1);
    return turn && {state: turn.dataset.state,
      words: turn.querySelector('.artifacts').innerText.split(/\\s+/).filter(Boolean),
      boxes: turn.querySelectorAll('.artifacts .artifact').length,
      paragraphs: turn.querySelectorAll('.artifacts p').length}"""
_STORED = """return fetch('api/conversations/' + location.hash.slice(1), {credentials: 'same-origin'})
    .then(r => r.json()).then(c => c.turns.filter(t => t.role === 'agent').at(-1).events)"""


async def test_a_streamed_artifact_shows_once_as_one_block_live_and_after_a_reload(chat: Chat) -> None:
    await chat.sign_in("ada")
    await chat.new_conversation("countdown")
    await chat.type("3")
    seen: list[list[str]] = []

    def finished() -> dict[str, Any] | None:
        shown: dict[str, Any] | None = chat.run(_ARTIFACTS)
        if shown and (not seen or seen[-1] != shown["words"]):
            seen.append(shown["words"])
        return shown if shown and shown["state"] == "completed" else None

    live = await until(finished, 15, "the countdown's end")
    # Live: each piece joins the one artifact as it comes, and the final Task adds nothing.
    assert all(words == ["3", "2", "1", "0"][: len(words)] for words in seen), seen
    assert (live["words"], live["boxes"], live["paragraphs"]) == (["3", "2", "1", "0"], 1, 1), live
    await chat.shot("streamed-artifact")

    await asyncio.to_thread(chat.browser.refresh)
    await chat.ready()
    again = await until(lambda: chat.run(_ARTIFACTS), 5, "the countdown after a reload")
    assert (again["words"], again["boxes"], again["paragraphs"]) == (["3", "2", "1", "0"], 1, 1), again

    # The stored turn holds the artifact once: its pieces merged, not repeated by the final Task.
    events = await asyncio.to_thread(chat.run, _STORED)
    pieces = [e for e in events if e.get("kind") == "artifact-update"]
    assert len(pieces) == 1, pieces
    assert [p["text"] for p in pieces[0]["artifact"]["parts"]] == ["3\n", "2\n", "1\n", "0\n"]
    assert pieces[0]["lastChunk"] is True
    assert [e.get("artifacts") for e in events if e.get("kind") == "task"] == [[]]


async def test_at_375_px_sign_out_stays_on_one_line_and_a_long_user_name_is_ellipsized_with_a_title(
    browser: WebDriver, serve_agent: ServeAgent, start_gateway: StartGateway, tmp_path: Path
) -> None:
    name = "margaret.hamilton-apollo"
    await serve_agent(CountdownAgent(interval_s=0.3))
    gateway = await start_gateway(
        default_agent="countdown",
        auth={"mode": "basic", "users": {name: "pw-0123456789"}},
        chat_store=str(tmp_path / "chat.sqlite"),
    )
    chat = Chat(gateway, browser, Gate(), Reader(), tmp_path)
    await asyncio.to_thread(browser.set_window_size, *PHONE)
    await asyncio.to_thread(browser.get, f"{gateway.public_url}/signin")
    await asyncio.to_thread(browser.delete_all_cookies)
    try:
        await chat.sign_in(name, "pw-0123456789")
        await chat.ready()
        header = chat.run("""
            const lines = el => { const r = document.createRange(); r.selectNodeContents(el);
                                  return new Set([...r.getClientRects()].map(b => Math.round(b.top))).size; };
            const who = document.getElementById('who'), out = document.getElementById('signout');
            const box = who.getBoundingClientRect(), top = document.querySelector('.top');
            return {outLines: lines(out), whoLines: lines(who), whoWidth: box.width, whoRight: box.right,
                    cut: who.scrollWidth > who.clientWidth, ellipsis: getComputedStyle(who).textOverflow,
                    title: who.title, text: who.textContent, overflow: top.scrollWidth - top.clientWidth,
                    outRight: out.getBoundingClientRect().right, width: window.innerWidth};""")
        await chat.shot("header-phone", PHONE)
        assert header["outLines"] == 1, header  # "Sign out" does not wrap
        assert header["overflow"] <= 0 and header["outRight"] <= header["width"], header  # nothing off screen
        assert header["whoLines"] == 1 and header["whoWidth"] >= 40, header  # the name shows, on one line
        assert header["text"] == name and header["title"] == name, header  # the whole name on hover
        if header["cut"]:
            assert header["ellipsis"] == "ellipsis", header
    finally:
        await asyncio.to_thread(browser.set_window_size, *WIDE)
        await asyncio.to_thread(browser.get, "about:blank")
