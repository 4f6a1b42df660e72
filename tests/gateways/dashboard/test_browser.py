"""The dashboard in a real headless Chromium (Debian's chromium and chromium-driver, driven by
Selenium; nothing is downloaded), against agents on the session broker.

Selenium's calls block, so they run in a thread while the agents and the dashboard's server
run on the test's event loop. Every wait is on a condition with a deadline.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pytest

from agents.builtin import CountdownAgent, EchoAgent, OrchestratorAgent
from agents.workflow import WorkflowAgent, load_workflow
from gateways.dashboard import Dashboard
from gateways.http.dashboard import DashboardServer
from mesh.a2a import TaskState
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.schedules import ScheduleSpec
from mesh.schedules.store import SqliteScheduleStore
from tests.agents.workflow_agents import Holder, Upper
from tests.conftest import ServeAgent
from tests.gateways.browser import headless_chromium, needs_chromium
from tests.gateways.chat_agents import booker
from tests.support import within

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.support.ui import Select  # noqa: E402

T = TypeVar("T")

pytestmark = needs_chromium


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    with headless_chromium(1400, 1000) as driver:
        yield driver


@pytest.fixture
async def dashboard_url(broker_settings: BrokerSettings, namespace: str) -> AsyncIterator[str]:
    # The test's own schedules' record (its namespace's SQLite file), read every half second.
    schedules = SqliteScheduleStore.of(namespace)
    server = DashboardServer(Dashboard(broker_settings, namespace, schedules=schedules, schedules_every_s=0.5), port=0)
    await server.start()
    yield server.url
    await server.stop()


async def until(check: Callable[[], T | None], timeout: float, what: str) -> T:
    """``check()`` (run in a thread: it drives the browser) once it is truthy, or fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        result = await asyncio.to_thread(check)
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        await asyncio.sleep(0.02)


def texts(driver: WebDriver, selector: str, attribute: str | None = None) -> list[str]:
    """The text (or ``attribute``) of what ``selector`` matches, read in one go: the page
    redraws as the mesh changes, so element references go stale."""
    script = (
        "return [...document.querySelectorAll(arguments[0])]"
        ".map(e => arguments[1] ? e.getAttribute(arguments[1]) : e.innerText)"
    )
    result: list[str] = driver.execute_script(script, selector, attribute)
    return result


def cards(driver: WebDriver) -> list[str]:
    return texts(driver, "#agents [data-agent]", "data-agent")


async def open_page(browser: WebDriver, url: str, agents: set[str]) -> None:
    await asyncio.to_thread(browser.get, url)
    await until(lambda: agents <= set(cards(browser)), 5, f"the cards of {sorted(agents)}")


async def send_from_page(browser: WebDriver, agent: str, text: str) -> None:
    def fill() -> None:
        Select(browser.find_element(By.ID, "send-agent")).select_by_value(agent)
        field = browser.find_element(By.ID, "send-text")
        field.clear()
        field.send_keys(text)
        browser.find_element(By.ID, "send-button").click()

    await asyncio.to_thread(fill)


async def test_the_page_lists_the_agents_and_follows_one_that_comes_and_goes(
    browser: WebDriver, dashboard_url: str, serve_agent: ServeAgent
) -> None:
    await serve_agent(EchoAgent())
    await open_page(browser, dashboard_url, {"echo"})

    service = await serve_agent(CountdownAgent())  # started: its card is on the broker
    await until(lambda: "countdown" in cards(browser), within(1.0), "the countdown card")
    (tile,) = await asyncio.to_thread(texts, browser, '[data-agent="countdown"]')
    assert "streaming" in tile and "unsigned" in tile and "Countdown" in tile

    await service.stop()  # clean: its card is cleared
    await until(lambda: "countdown" not in cards(browser), within(2.0), "the countdown card to leave")
    assert cards(browser) == ["echo"]


async def test_a_task_sent_from_the_page_streams_its_events_into_the_timeline(
    browser: WebDriver, dashboard_url: str, serve_agent: ServeAgent, tmp_path: Path
) -> None:
    await serve_agent(CountdownAgent(interval_s=0.05))
    await open_page(browser, dashboard_url, {"countdown"})

    await send_from_page(browser, "countdown", "3")

    def finished() -> list[str] | None:
        events = texts(browser, "#timeline li[data-event-kind]")
        return events if any("Liftoff" in e for e in events) else None

    events = await until(finished, 10, "the task's final event in the timeline")
    joined = "\n".join(events)
    for step in ("3...", "2...", "1..."):
        assert step in joined
    assert "request" in events[0] and "completed" in events[-1]
    (row,) = await asyncio.to_thread(texts, browser, "#tasks tr.selected")
    assert "countdown" in row and "completed" in row
    output = await until(
        lambda: next((t for t in texts(browser, "#send-output") if "end of stream" in t), None),
        5,
        "the end of the stream in the send panel",
    )
    assert "[working] 3..." in output and "Liftoff" in output

    def rates() -> dict[str, str] | None:
        tile = '[data-agent="countdown"] [data-rate]'
        shown = dict(zip(texts(browser, tile, "data-rate"), texts(browser, tile + " b"), strict=True))
        return shown if shown.get("answers") == "1" else None

    assert await until(rates, 3, "the countdown's rates") == {
        "requests": "1",
        "answers": "1",
        "errors": "0",
        "refusals": "0",
    }
    await asyncio.to_thread(browser.save_screenshot, str(tmp_path / "dashboard-stream.png"))
    assert (tmp_path / "dashboard-stream.png").stat().st_size > 10_000


async def test_a_delegation_shows_as_a_tree(
    browser: WebDriver, dashboard_url: str, serve_agent: ServeAgent, tmp_path: Path
) -> None:
    await serve_agent(EchoAgent())
    await serve_agent(CountdownAgent(interval_s=0.05))
    await serve_agent(OrchestratorAgent())
    await open_page(browser, dashboard_url, {"echo", "countdown", "orchestrator"})

    await send_from_page(browser, "orchestrator", "echo hello and count down from 2")

    def children() -> set[str] | None:
        below = '#tree li[data-tree-node="orchestrator"] > ul > li[data-tree-node]'
        found = set(texts(browser, below, "data-tree-node"))
        done = all("completed" in text for text in texts(browser, below + " > .node"))
        return found if found >= {"echo", "countdown"} and done else None

    assert await until(children, 10, "orchestrator's sub-tasks as a tree") == {"echo", "countdown"}
    assert await asyncio.to_thread(texts, browser, "#tree > ul > li", "data-tree-node") == ["orchestrator"]
    await asyncio.to_thread(browser.save_screenshot, str(tmp_path / "dashboard-tree.png"))
    assert (tmp_path / "dashboard-tree.png").stat().st_size > 10_000


async def test_a_running_workflow_is_drawn_as_its_graph_with_each_nodes_state(
    browser: WebDriver, dashboard_url: str, serve_agent: ServeAgent, tmp_path: Path
) -> None:
    holder = Holder()
    await serve_agent(Upper())
    await serve_agent(holder)
    graph = load_workflow(
        """
        nodes:
          - {id: first, agent: upper, input: "one"}
          - {id: side, agent: upper, input: "two"}
          - {id: second, agent: holder, input: "{{ first.output.text }}"}
          - {id: third, agent: upper, input: "{{ second.output.text }} {{ side.output.text }}"}
        """,
        name="flow",
    )
    await serve_agent(WorkflowAgent(name="flow", graph=graph))
    await open_page(browser, dashboard_url, {"upper", "holder", "flow"})
    await send_from_page(browser, "flow", "go")

    def states() -> dict[str, str]:
        script = (
            "return [...document.querySelectorAll('#workflow [data-workflow-node]')]"
            ".map(e => [e.dataset.workflowNode, e.dataset.state])"
        )
        return dict(browser.execute_script(script))  # one read: the page redraws as events come

    running = {"first": "completed", "side": "completed", "second": "running", "third": "pending"}

    def shows(expected: dict[str, str]) -> bool | None:
        return states() == expected or None

    assert await until(lambda: shows(running), 10, f"the graph with {running}")
    assert len(await asyncio.to_thread(texts, browser, "#workflow line.edge")) == 3
    drawn = await asyncio.to_thread(browser.find_element, By.ID, "workflow")
    await asyncio.to_thread(drawn.screenshot, str(tmp_path / "dashboard-workflow.png"))
    assert (tmp_path / "dashboard-workflow.png").stat().st_size > 2_000
    holder.release.set()
    done = dict.fromkeys(running, "completed")
    assert await until(lambda: shows(done), 10, f"the graph with {done}")


async def test_a_switch_is_drawn_with_an_arrow_per_case(
    browser: WebDriver, dashboard_url: str, serve_agent: ServeAgent, tmp_path: Path
) -> None:
    await serve_agent(Upper())
    graph = load_workflow(
        """
        nodes:
          - {id: first, agent: upper, input: "{{ input.text }}"}
          - id: check
            switch:
              - {when: "{{ first.output.text == 'LOUD' }}", then: shout}
              - {else: quiet}
          - {id: shout, agent: upper, input: "shout"}
          - {id: quiet, agent: upper, input: "quiet"}
        """,
        name="branches",
    )
    await serve_agent(WorkflowAgent(name="branches", graph=graph))
    await open_page(browser, dashboard_url, {"upper", "branches"})
    await send_from_page(browser, "branches", "loud")

    def drawn() -> list[str] | None:
        nodes = texts(browser, "#workflow [data-workflow-node]", "data-workflow-node")
        return nodes if len(nodes) == 4 else None

    assert sorted(await until(drawn, 10, "the switch workflow's graph")) == ["check", "first", "quiet", "shout"]
    cases = await asyncio.to_thread(texts, browser, "#workflow line.edge.case", "data-case")
    assert cases == ["when {{ first.output.text == 'LOUD' }}", "else"]
    assert len(await asyncio.to_thread(texts, browser, "#workflow line.edge")) == 3  # first -> check, and the cases
    script = 'return document.querySelector(`#workflow [data-workflow-node="check"] ${arguments[0]}`).textContent'
    meta, title = [await asyncio.to_thread(browser.execute_script, script, tag) for tag in (".wf-meta", "title")]
    assert meta.endswith("switch 2 cases"), meta  # SVG text has no innerText: textContent
    assert "{{ first.output.text == 'LOUD' }} → shout; else quiet" in title, title
    drawing = await asyncio.to_thread(browser.find_element, By.ID, "workflow")
    await asyncio.to_thread(drawing.screenshot, str(tmp_path / "dashboard-switch.png"))


async def test_a_pending_approval_is_listed_and_the_agents_tokens_show(
    browser: WebDriver,
    dashboard_url: str,
    serve_agent: ServeAgent,
    broker_settings: BrokerSettings,
    namespace: str,
    tmp_path: Path,
) -> None:
    await serve_agent(booker())
    await open_page(browser, dashboard_url, {"booker"})
    async with MeshClient.connect(broker_settings, namespace) as client:
        await answered_after_the_page_lists_it(browser, client, tmp_path)


async def answered_after_the_page_lists_it(browser: WebDriver, client: MeshClient, tmp_path: Path) -> None:
    waiting = await client.send("booker", "book")
    assert waiting.status.state is TaskState.input_required

    def pending() -> list[str] | None:
        found = texts(browser, '#tasks td[data-approval="pending"]')
        return found or None

    [row] = await until(pending, 10, "the pending approval in the task list")
    assert row == 'waiting for approval: book {"city": "Oslo"}'
    await asyncio.to_thread(browser.save_screenshot, str(tmp_path / "dashboard-approval.png"))
    await client.send("booker", "yes", task_id=waiting.id)

    def usage() -> str | None:
        found = texts(browser, '[data-usage="booker"]')
        return found[0] if found else None

    shown = await until(usage, 10, "the agent's tokens on its card")
    assert re.fullmatch(r"\d+ tokens", shown), shown


async def test_an_agents_schedule_shows_on_its_tile_with_its_next_run_then_paused(
    browser: WebDriver, dashboard_url: str, serve_agent: ServeAgent, namespace: str
) -> None:
    await serve_agent(EchoAgent())
    await open_page(browser, dashboard_url, {"echo"})
    store = SqliteScheduleStore.of(namespace)  # the record a running scheduler writes
    spec = ScheduleSpec.model_validate({"name": "often", "agent": "echo", "message": "hi", "every": "5m"})
    tick = int(time.time() * 1000) + 300_000
    await asyncio.to_thread(store.register, "often", spec.model_dump(mode="json"), "often.yaml", tick)
    utc = datetime.fromtimestamp(tick / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    def shown(paused: bool) -> str | None:
        # The text and the mark read in one go: the tiles are redrawn as the rates change.
        script = (
            'const e = document.querySelector(\'[data-agent="echo"] [data-schedule="often"]\');'
            'return e ? [e.innerText, e.getAttribute("data-paused") === "true"] : null'
        )
        found = browser.execute_script(script)
        return str(found[0]) if found and found[1] == paused else None

    line = await until(lambda: shown(False), 10, "the schedule on the echo tile")
    assert "every 5m" in line and f"next {utc}" in line and re.search(r"\((in [45] min)\)", line), line
    await asyncio.to_thread(store.set_paused, "often", True)  # as `mesh schedule pause often` does
    line = await until(lambda: shown(True), 10, "the schedule marked paused")
    assert "often" in line and "paused" in line and "next" not in line, line
