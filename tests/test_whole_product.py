"""The whole product, run as a user runs it (DESIGN, "The default mesh is the whole product").

``mesh up`` starts exactly as the README says: the venv's console script, no flag, a fresh
``HOME`` (so a fresh state directory, ``$HOME/.local/state/mesh``) and an environment without
``MESH_STATE_DIR`` (conftest sets it for the rest of the suite), ``XDG_STATE_HOME``,
``MESH_BROKER_URL``, ``MESH_NAMESPACE`` or ``MESH_BROKER_PASSWORD_FILE``. The broker's port is
mesh up's own choice (1883, or beside it when something listens there). The only deviation:
when 127.0.0.1:8080 is taken, ``MESH_HTTP_PORT`` names a free port for the gateway. The API key
is read from the file the banner names (``export MESH_API_KEY="$(cat ...)"``). Every later
command gets the same ``HOME`` and no flag for the broker or credentials: it must find them,
and the CA under ``--secure``, through the state directory.

On that mesh, each client a user has, for real (``tests/whole_product_clients.py``):

1. the README's tour (its ``console`` blocks on the example agents), ``mesh agents``,
   ``mesh task list`` / ``get``;
2. a user's own agent (``mesh run mine.yaml``, an EchoAgent named ``mine``, as docs/agents.md
   shows): ``mesh send``; HTTP through the official a2a-sdk client; the chat's HTTP API after
   signing in with the API key; the dashboard's feed (``/ui/api/events``) showing a task sent to
   it from the CLI and one sent from the dashboard's own send box, with their answers;
3. ``mesh mcp`` through the official MCP SDK; 4. ``mesh acp echo`` through the official ACP SDK;
5. ``mesh doctor``; 6. a workflow served by ``mesh run``, and artifacts (an agent's file saved by
``mesh send --save-artifacts`` and downloaded through the gateway; a file attached in the chat
and downloaded again); 7. an LLM agent on pydantic-ai's test model;
8. (its own ``mesh up --model test``) the assistant calling a ``mesh run`` agent as a tool; (its
own ``mesh up --model demo``) the demo model's plan, tool calls and answer, as the README shows;
10. ``mesh eval`` of docs/eval.md's example (passing, then a regression against its baseline), and
a ``schedules:`` file run by ``mesh run`` whose tasks the dashboard, ``mesh task get`` and its user's chat show;
11. a remote A2A agent (``mesh run remote.yaml``, a ``remote:`` entry for an a2a-sdk server the
test starts): ``mesh send``, ``mesh agents``, the gateway with the a2a-sdk client, the chat;
12. two replicas of a ``mesh run`` agent sharing their tasks in the tests' PostgreSQL (``store:``),
``mesh doctor --store``, and ``mesh task get`` answered by either replica.

Plain ``mesh up`` and ``mesh up --secure`` (TLS) run the same checks, one module-scoped mesh
per variant (its own event loop scope: the module's); the last check of each stops everything
with Ctrl-C. Every wait has a deadline and waits on lines, events or a bounded retry.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import json
import re
import uuid
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
import pytest_asyncio
from a2a.client import ClientConfig, create_client
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from acp import spawn_agent_process, text_block
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from mesh.a2a import TaskIdParams, request_bytes
from mesh.broker import BrokerSettings, TlsOptions
from mesh.brokertools.localbroker import free_port, port_is_free
from mesh.config.credentials import private_client_id, probe_client_id
from mesh.properties import MessageProperties
from mesh.store import StoreUrl
from mesh.store.postgres import connect as connect_store
from mesh.transport import MqttTransport
from tests.gateways.acp_client import Editor, RecordingClient
from tests.gateways.mcp_client import McpClient, Recorder
from tests.mesh.cli_process import Result, Service, spawn
from tests.postgres import PostgresServer
from tests.support import alive
from tests.test_readme import (
    CONSOLE_BLOCK,
    README,
    ROOT,
    Step,
    check_output,
    line_pattern,
    page_files,
    readme_steps,
)
from tests.whole_product_clients import (
    BIN,
    INPUT_REQUIRED,
    MESH,
    Feed,
    eventually,
    run,
    shown,
    signed_in,
    sse_post,
    stop,
    task_id_of,
    user_env,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

# (`"insecure": ("--insecure",)` runs the same checks on the open mesh, for comparison: all pass there.)
VARIANTS = {"plain": (), "secure": ("--secure",)}
#: What the commands' environment must not carry (they find it all through the state directory).
FORBIDDEN_ENV = ("MESH_STATE_DIR", "XDG_STATE_HOME", "MESH_BROKER_URL", "MESH_NAMESPACE", "MESH_BROKER_PASSWORD_FILE")
GATEWAY_PORT = 8080
#: A component started later is enrolled and trusted by every running registry "within seconds".
AGENT_SEEN_S = 10.0
STARTUP_S = 90.0  # mesh up, or a mesh run importing pydantic-ai, on a busy 2-core machine

# The files a user writes into a project folder of their own (not the repository).
MINE = """\
# mine.yaml: an agent of the user's own, beside mesh up (docs/agents.md)
agents:
  - class: agents.builtin.echo:EchoAgent
    name: mine
"""
FLOWS = """\
# flows.yaml: a workflow (docs/workflows.md) over the example agents
agents:
  - name: pipeline
    description: Repeats an expression through echo, then computes it with the calculator.
    workflow:
      input_schema: {type: object, properties: {expression: {type: string}}, required: [expression]}
      nodes:
        - id: said
          agent: echo
          input: "{{ input.expression }}"
        - id: computed
          agent: calculator
          input: "{{ said.output.text }}"
      output:
        echoed: "{{ said.output.text }}"
        result: "{{ computed.output.text }}"
"""
REPORTER_PY = '''\
"""An agent that answers with a file (docs/artifacts.md's Reporter): quarterly.txt, beside it."""

from pathlib import Path

from agents import Agent, Reply


class Reporter(Agent):
    name = "reporter"
    description = "Writes the quarterly report as a file"

    async def handle(self, message, ctx):
        uri = await ctx.save_artifact("report.txt", Path(__file__).with_name("quarterly.txt"), "text/plain")
        yield Reply(f"done: {uri}")
'''
REPORT = "".join(f"line {i} of the quarterly report\n" for i in range(20000))  # ~600 kB
REPORTER = """\
agents:
  - class: reporter:Reporter
"""
LLM = """\
# llm.yaml: an LLM agent (docs/llm-agents.md) on pydantic-ai's test model, which calls every tool it has
agents:
  - name: thinker
    description: Answers with pydantic-ai's test model.
    llm:
      model: test
      instructions: You answer briefly.
"""

CAREFUL = """\
# careful.yaml: an LLM agent whose calls of echo need a person's yes (docs/llm-agents.md, approve:)
agents:
  - name: careful
    description: Calls echo, once someone approves.
    llm:
      model: demo
      peers: [echo]
      approve: ["peer:echo"]
"""


@dataclass
class Product:
    """A running ``mesh up`` and what a user has around it: their HOME, a project folder, a shell."""

    variant: str
    home: Path
    project: Path
    env: dict[str, str]
    up: Service
    gateway: str
    api_key: str | None
    broker_pid: int | None
    services: dict[str, Service] = field(default_factory=dict)

    @property
    def headers(self) -> dict[str, str]:
        return {"X-API-Key": self.api_key} if self.api_key else {}

    async def mesh(self, *args: str, timeout: float = 60.0) -> Result:
        """``mesh ARGS`` in the project folder, as the user types it."""
        return await run([str(MESH), *args], env=self.env, cwd=self.project, timeout=timeout)

    async def shell(self, command: str) -> Result:
        """``command`` in bash, stdout and stderr as a terminal shows them (in ``stdout``)."""
        return await run(["bash", "-c", command], env=self.env, cwd=self.project, merged=True)

    async def serve(self, config: str, files: dict[str, str]) -> Service:
        """``mesh run CONFIG`` (its files written into the project first), once per mesh: until it
        says it runs; a later call finds it still running."""
        if (service := self.services.get(config)) is not None:
            assert service.proc.returncode is None, f"mesh run {config} has exited:\n{service.output}"
            return service
        for name, text in files.items():
            (self.project / name).write_text(text)
        service = await spawn([str(MESH), "run", config], env=self.env, cwd=self.project)
        self.services[config] = service
        await service.wait_for_line("Ctrl-C stops", timeout=STARTUP_S)
        return service


@contextlib.asynccontextmanager
async def mesh_up(root: Path, *flags: str) -> AsyncIterator[Product]:
    """``mesh up FLAGS`` in a fresh HOME; every process started for it stopped at the end."""
    home, project = root / "home", root / "project"
    home.mkdir()
    project.mkdir()
    extra = {} if port_is_free("127.0.0.1", GATEWAY_PORT) else {"MESH_HTTP_PORT": str(free_port())}
    env = user_env(home, **extra)
    assert not [name for name in FORBIDDEN_ENV if name in env], env
    up = await spawn([str(MESH), "up", *flags], env=env, cwd=project)
    product: Product | None = None
    try:
        await up.wait_for_line("mesh up: ready", stream="stdout", timeout=STARTUP_S)
        banner = "".join(up.stdout_lines)
        gateway = re.search(r"^\s+gateways\s+http (http://\S+)$", banner, re.M)
        assert gateway, f"the banner names no HTTP gateway:\n{up.output}"
        export = re.search(r'export MESH_API_KEY="\$\(cat (.+)\)"', banner)
        if "--insecure" not in flags:  # secured by default: its own broker, under the mesh's rules
            assert "under the mesh's rules" in banner, f"not the secured mesh up:\n{up.output}"
            assert export, f"the banner says nothing of the API key:\n{up.output}"
        if "--secure" in flags:
            assert re.search(r"^\s+broker\s+mqtts://", banner, re.M), f"no TLS broker:\n{up.output}"
        api_key = Path(export[1]).read_text(encoding="utf-8").strip() if export else None
        if api_key:
            env["MESH_API_KEY"] = api_key  # as the banner says to
        state = home / ".local" / "state" / "mesh" / "up" / "mesh.json"
        assert state.is_file(), f"no state file at {state} (the state dir of a fresh HOME):\n{up.output}"
        record = json.loads(state.read_text(encoding="utf-8"))
        product = Product(
            variant=" ".join(("mesh up", *flags)),
            home=home,
            project=project,
            env=env,
            up=up,
            gateway=gateway[1],
            api_key=api_key,
            broker_pid=record.get("broker_pid"),
        )
        yield product
    finally:
        for service in product.services.values() if product is not None else ():
            await stop(service)
        await stop(up)


@pytest_asyncio.fixture(scope="module", loop_scope="module", params=list(VARIANTS), ids=list(VARIANTS))
async def product(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Product]:
    async with mesh_up(tmp_path_factory.mktemp(f"whole-product-{request.param}"), *VARIANTS[request.param]) as made:
        yield made


async def mine(product: Product) -> Service:
    return await product.serve("mine.yaml", {"mine.yaml": MINE})


# ---------------------------------------------------------------- 8. mesh up --model (its own mesh)


@pytest.mark.timeout(180)
async def test_the_model_assistant_calls_a_mesh_run_agent_as_a_tool(tmp_path_factory: pytest.TempPathFactory) -> None:
    """``mesh up --model test``: the assistant has every agent as a tool, ``mine`` (started after it)
    too; pydantic-ai's TestModel calls every tool it has (and ``ask_user``, so the task asks first)."""
    async with mesh_up(tmp_path_factory.mktemp("whole-product-model"), "--model", "test") as product:
        await mine(product)
        asked: list[str] = []

        async def calls_mine() -> tuple[bool, str]:
            sent = await product.mesh("send", "assistant", "Who can help?", "--stream")
            called = re.findall(r'"type":"tool_call","function_name":"([^"]+)"', sent.stdout)
            found = re.match(r"\[task ([0-9a-f]{32})\]", sent.stdout)
            if sent.code == 0 and found and sent.stdout.rstrip().endswith("input-required"):
                asked.append(found[1])
            return "mine" in called, shown(f"step 1: mesh send assistant --stream (tools called: {called})", sent)

        await eventually(
            calls_mine, timeout=AGENT_SEEN_S, what="step 1: the assistant calls `mine` as a tool", every=0.5
        )
        assert asked, "step 1: the assistant's task did not turn input-required (TestModel calls ask_user)"
        answered = await product.mesh("send", "assistant", "go on", "--task", asked[-1])
        step = "step 2: the answer to the assistant's question ends the task with every tool's result"
        assert answered.code == 0, shown(step, answered)
        try:
            results = json.loads(answered.stdout)
        except ValueError:
            raise AssertionError(shown(step + " (as JSON)", answered)) from None
        assert results.get("mine", {}).get("agent") == "mine", shown(step, answered)
        assert results["mine"].get("state") == "completed", shown(step, answered)
        assert {"echo", "calculator"} <= results.keys(), shown(step, answered)

        stopped = {name: (await stop(service), service) for name, service in product.services.items()}
        code = await stop(product.up)
    for name, (exit_code, service) in stopped.items():
        assert exit_code == 0 and "Traceback" not in service.output, f"mesh run {name}:\n{service.output}"
    assert code == 0 and "Traceback" not in product.up.output, f"mesh up --model test, Ctrl-C:\n{product.up.output}"


DEMO_ASK = "what is 7 times 6, then count down from 3"


def illustration_pattern(line: str) -> re.Pattern[str]:
    """A line of an illustrative block as a pattern: ``<TASK_ID>``, ``<ID>``, and ``...`` for the rest of a result."""
    return re.compile(line_pattern(line).pattern.replace(re.escape("..."), ".*"))


@pytest.mark.timeout(180)
async def test_the_demo_model_assistant_plans_calls_calculator_then_countdown_and_answers(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """``mesh up --model demo``: the README's illustration of ``mesh send assistant ... --stream``
    is what it prints (the plan, each tool call and result, the answer with 42 and the countdown);
    the chat shows the same tool calls; a request it cannot map says what the model is."""
    async with mesh_up(tmp_path_factory.mktemp("whole-product-demo"), "--model", "demo") as product:
        command = f'mesh send assistant "{DEMO_ASK}" --stream'
        expected = readme_illustration(command)
        assert expected, f"the README shows no `{command}`"
        sent = await product.mesh("send", "assistant", DEMO_ASK, "--stream")
        step = "step 1: mesh send assistant --stream prints what the README shows"
        printed = sent.stdout.rstrip("\n").splitlines()
        assert sent.code == 0 and len(printed) == len(expected), shown(step, sent)
        for line, shows in zip(printed, expected, strict=True):
            assert illustration_pattern(shows).match(line), shown(f"{step}: {line!r} is not {shows!r}", sent)
        assert "42" in printed[-2] and "Liftoff! Counted down from 3." in printed[-2], shown(step, sent)

        async with signed_in(product.gateway, product.api_key) as browser:
            made = await new_conversation(browser, "assistant", "step 2: a chat conversation with the assistant")
            path = f"/chat/api/conversations/{made['id']}/messages"
            status, events = await sse_post(browser, path, {"text": DEMO_ASK})
            step = f"step 3: the chat streams the tool calls and the answer: {status} {events}"
            assert status == 200 and events and events[-1][0] == "end", step
            data = [
                part["data"]
                for name, item in events
                if name == "item" and item.get("kind") == "status-update"
                for part in (item["status"].get("message") or {}).get("parts", [])
                if part.get("kind") == "data"
            ]
            called = [d["function_name"] for d in data if d.get("type") == "tool_call"]
            assert called == ["calculator", "countdown"], step
            assert final_text(events) == "7*6 = 42; countdown: Liftoff! Counted down from 3. (3 2 1 0).", step

        plain = await product.mesh("send", "assistant", "write me a poem")
        step = "step 4: a request it cannot map: it says what it is and what it can do"
        assert plain.code == 0, shown(step, plain)
        for said in ("no provider, no network, no API key", "calculator, countdown, echo, orchestrator"):
            assert said in plain.stdout, shown(step, plain)
        code = await stop(product.up)
    assert code == 0 and "Traceback" not in product.up.output, f"mesh up --model demo, Ctrl-C:\n{product.up.output}"


# ---------------------------------------------------------------- 1. the README's tour


def tour_steps() -> list[Step]:
    """The README tour's console blocks that use the example agents (not the ones that start a
    ``mesh run`` of a file of their own: tests/test_readme.py runs those)."""
    section = README.read_text(encoding="utf-8").split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
    steps: list[Step] = []
    for block in CONSOLE_BLOCK.finditer(section):
        if "mesh run" not in block["body"]:
            steps += readme_steps(block[0])
    return steps


def readme_illustration(command: str) -> list[str]:
    """What the README's illustrative block shows after ``$ COMMAND``."""
    text = README.read_text(encoding="utf-8")
    lines = text[text.index(f"$ {command}\n") :].splitlines()[1:]
    return lines[: next(i for i, line in enumerate(lines) if line.startswith(("$ ", "```")))]


def columns(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


async def test_the_readme_tour_prints_what_the_readme_says(product: Product) -> None:
    steps = tour_steps()
    commands = " | ".join(step.command for step in steps)
    for needed in ("send echo hi", "send calculator", "countdown 3 --stream", "--task <TASK_ID>", "orchestrator"):
        assert needed in commands, f"the README's tour has no `{needed}` any more: {commands}"
    task_id = ""
    for step in steps:
        command = step.command.replace("<TASK_ID>", task_id).replace(".venv/bin/", f"{BIN}/")
        result = await product.shell(command)
        assert result.code == 0, shown(f"tour: `{command}`", result)
        try:
            check_output(step, result.stdout)
        except AssertionError as exc:
            raise AssertionError(f"tour on {product.variant}: {exc}") from None
        task_id = (re.findall(r"[0-9a-f]{32}", result.stdout) or [task_id])[-1]


async def test_mesh_agents_and_mesh_task_list_and_get(product: Product) -> None:
    listed = await product.mesh("agents")
    assert listed.code == 0, shown("mesh agents", listed)
    rows = {columns(line)[0]: columns(line) for line in listed.stdout.splitlines() if line.strip()}
    header, *examples = readme_illustration("mesh agents")
    assert rows.get("NAME") == columns(header), shown("mesh agents: the README's header", listed)
    for example in examples:  # calculator and echo, as the README shows them (but the age)
        name, *shown_columns, _age = columns(example)
        row = rows.get(name)
        assert row is not None and row[1:-1] == shown_columns, shown(f"mesh agents: {name} as the README shows", listed)
        assert re.fullmatch(r"\d+s ago", row[-1]), shown(f"mesh agents: {name}'s LAST SEEN", listed)
    assert {"echo", "calculator", "countdown", "orchestrator"} <= rows.keys(), shown("mesh agents", listed)

    sent = await product.mesh("send", "countdown", "2")
    assert sent.code == 0 and sent.stdout.startswith("Liftoff! Counted down from 2."), shown("mesh send", sent)
    task = task_id_of(sent)
    tasks = await product.mesh("task", "list", "countdown")
    assert tasks.code == 0, shown("mesh task list countdown", tasks)
    row = next((columns(line) for line in tasks.stdout.splitlines() if line.startswith(task)), None)
    assert row is not None and row[1] == "completed", shown(f"mesh task list countdown: {task} completed", tasks)
    assert row[-1] == "Liftoff! Counted down from 2.", shown("mesh task list countdown: its message", tasks)
    got = await product.mesh("task", "get", "countdown", task)
    fields = dict(line.split(None, 1) for line in got.stdout.splitlines()[:4] if " " in line)
    assert got.code == 0 and fields.get("task") == task, shown("mesh task get countdown ID", got)
    assert fields.get("state") == "completed", shown("mesh task get countdown ID: state", got)
    assert fields.get("message") == "Liftoff! Counted down from 2.", shown("mesh task get countdown ID: message", got)


# ---------------------------------------------------------------- 2. a user's own agent


async def test_a_mesh_run_agent_answers_mesh_send(product: Product) -> None:
    await mine(product)
    sent = await product.mesh("send", "mine", "hi")
    assert (sent.code, sent.stdout) == (0, "hi\n"), shown("mesh send mine hi", sent)
    listed = await product.mesh("agents")
    assert any(line.startswith("mine ") for line in listed.stdout.splitlines()), shown("mesh agents lists mine", listed)


async def a2a_sdk_send(url: str, headers: dict[str, str], text: str) -> tuple[str, str]:
    """docs/gateways.md's a2a_client.py: the official a2a-sdk client at an agent's endpoint."""
    async with httpx.AsyncClient(headers=headers, timeout=30) as http:
        client = await create_client(url, ClientConfig(streaming=False, httpx_client=http), relative_card_path="card")
        async with client:
            message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=text)])
            responses = [r async for r in client.send_message(SendMessageRequest(message=message))]
    status = responses[-1].task.status
    return TaskState.Name(status.state), "".join(part.text for part in status.message.parts)


async def test_a_mesh_run_agent_over_http_with_the_a2a_sdk(product: Product) -> None:
    await mine(product)
    base = product.gateway
    # Step 1: the docs' own example, on an example agent of mesh up.
    try:
        answer = await a2a_sdk_send(f"{base}/a2a/agents/echo", product.headers, "hi from a2a-sdk")
    except Exception as exc:
        raise AssertionError(f"step 1: a2a-sdk to {base}/a2a/agents/echo: {exc!r}") from exc
    assert answer == ("TASK_STATE_COMPLETED", "hi from a2a-sdk"), f"step 1: a2a-sdk to echo: {answer}"

    # Step 2: the gateway lists the user's agent (it came after the gateway, and must be trusted).
    async with httpx.AsyncClient(headers=product.headers, timeout=30) as http:

        async def listed() -> tuple[bool, str]:
            response = await http.get(f"{base}/a2a/agents")
            names = [a.get("name") for a in response.json().get("agents", [])] if response.status_code == 200 else []
            return "mine" in names, f"GET /a2a/agents: {response.status_code} {names or response.text[:2000]}"

        await eventually(listed, timeout=AGENT_SEEN_S, what="step 2: the gateway lists the mesh run agent `mine`")

    # Step 3: the a2a-sdk client at mine's endpoint.
    try:
        answer = await a2a_sdk_send(f"{base}/a2a/agents/mine", product.headers, "hi mine, from a2a-sdk")
    except Exception as exc:
        raise AssertionError(f"step 3: a2a-sdk to {base}/a2a/agents/mine: {exc!r}") from exc
    assert answer == ("TASK_STATE_COMPLETED", "hi mine, from a2a-sdk"), f"step 3: a2a-sdk to mine: {answer}"


def final_text(events: list[tuple[str, Any]]) -> str | None:
    """The text of the answer's final status in a chat's (or the dashboard's send) SSE items."""
    for name, item in reversed(events):
        if name == "item" and item.get("kind") == "status-update" and item.get("final"):
            return "".join(p.get("text", "") for p in (item["status"].get("message") or {}).get("parts", []))
        if name == "item" and item.get("kind") == "task":
            return "".join(p.get("text", "") for p in (item["status"].get("message") or {}).get("parts", []))
    return None


async def new_conversation(browser: httpx.AsyncClient, agent: str, step: str) -> dict[str, Any]:
    async def created() -> tuple[bool, str]:
        response = await browser.post("/chat/api/conversations", json={"agent": agent})
        made.append(response)
        return response.status_code == 201, f"POST /chat/api/conversations: {response.status_code} {response.text}"

    made: list[httpx.Response] = []
    await eventually(created, timeout=AGENT_SEEN_S, what=step)
    conversation: dict[str, Any] = made[-1].json()
    return conversation


async def test_a_mesh_run_agent_in_the_chat(product: Product) -> None:
    await mine(product)
    async with signed_in(product.gateway, product.api_key) as browser:  # step 1: /signin with the key
        made = await new_conversation(browser, "mine", "step 2: a chat conversation with `mine`")
        path = f"/chat/api/conversations/{made['id']}/messages"
        status, events = await sse_post(browser, path, {"text": "hi from the chat"})
        step = f"step 3: a turn in the chat with mine: {status} {events}"
        assert status == 200 and events and events[-1][0] == "end", step
        assert final_text(events) == "hi from the chat", step
        listed = (await browser.get("/chat/api/conversations")).json()
        titles = {c["id"]: c.get("title") for c in listed.get("conversations", [])}
        assert titles.get(made["id"]) == "hi from the chat", f"step 4: the conversation is listed: {listed}"


def dashboard_tasks(feed: Feed) -> dict[str, dict[str, Any]]:
    """The tasks the page knows so far, by task id: header and events (snapshot, then changes)."""
    tasks: dict[str, dict[str, Any]] = {}
    for kind, data in feed.events:
        if kind == "snapshot":
            for task in data.get("tasks", []):
                tasks[task["taskId"]] = {"task": task, "events": list(task.get("events", []))}
        elif kind == "task":
            seen = tasks.setdefault(data["task"]["taskId"], {"events": []})
            seen["task"] = data["task"]
            seen["events"].append(data["event"])
    return tasks


def dashboard_agents(feed: Feed) -> set[str]:
    names: set[str] = set()
    for kind, data in feed.events:
        if kind == "snapshot":
            names |= {c["name"] for c in data.get("cards", []) if c.get("kind") == "agent"}
        elif kind == "card" and data.get("kind") == "agent":
            names.add(data["name"])
        elif kind == "gone":
            names.discard(data.get("name", ""))
    return names


async def test_the_dashboard_shows_tasks_sent_to_a_mesh_run_agent_with_their_answers(product: Product) -> None:
    await mine(product)
    async with signed_in(product.gateway, product.api_key, next_path="/ui") as browser:  # step 1: /ui
        feed = Feed()
        async with browser.stream("GET", "/ui/api/events") as response:
            assert response.status_code == 200, f"step 2: GET /ui/api/events: {response.status_code}"
            reader = asyncio.get_running_loop().create_task(feed.follow(response))
            try:
                snapshot = await feed.wait_for(
                    lambda: next((data for kind, data in feed.events if kind == "snapshot"), None),
                    timeout=15,
                    what="step 2: the feed's snapshot",
                )
                await feed.wait_for(
                    lambda: "mine" in dashboard_agents(feed),
                    timeout=AGENT_SEEN_S,
                    what=f"step 3: the dashboard shows `mine` (refused: {snapshot.get('refused')}, "
                    f"blind spots: {snapshot.get('blindSpots')})",
                )
                cli_text = f"from the CLI {uuid.uuid4().hex[:8]}"
                sent = await product.mesh("send", "mine", cli_text)
                assert sent.code == 0, shown("step 4: mesh send mine", sent)
                cli_task = task_id_of(sent)
                box_text = f"from the send box {uuid.uuid4().hex[:8]}"
                status, items = await sse_post(browser, "/ui/api/send", {"agent": "mine", "text": box_text})
                step = f"step 5: the dashboard's send box to mine: {status} {items}"
                assert status == 200 and items and items[-1] == ("end", {}), step
                assert final_text(items) == box_text, step
                box_task = next(
                    (data.get("id") for kind, data in reversed(items) if kind == "item" and data.get("kind") == "task"),
                    None,
                ) or next(data.get("taskId") for kind, data in items if kind == "item" and data.get("taskId"))

                for label, task_id, text in (("6", cli_task, cli_text), ("7", box_task, box_text)):

                    def answered(task_id: str = task_id, text: str = text) -> bool:
                        seen = dashboard_tasks(feed).get(task_id)
                        return (
                            seen is not None
                            and seen.get("task", {}).get("state") == "completed"
                            and any(e.get("kind") != "request" and e.get("text") == text for e in seen["events"])
                        )

                    await feed.wait_for(
                        answered,
                        timeout=AGENT_SEEN_S,
                        what=f"step {label}: the dashboard's task list shows the task {task_id} to mine, "
                        f"completed with its answer {text!r} (known tasks: {dashboard_summary(feed)}; "
                        f"blind spots: {snapshot.get('blindSpots')})",
                    )
            finally:
                reader.cancel()
                with contextlib.suppress(BaseException):
                    await reader


def dashboard_summary(feed: Feed) -> list[tuple[str, str, str]]:
    return [
        (tid, seen.get("task", {}).get("agent", "?"), seen.get("task", {}).get("state", "?"))
        for tid, seen in dashboard_tasks(feed).items()
    ]


# ---------------------------------------------------------------- 3. mesh mcp, 4. mesh acp


def mcp_text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


async def test_mesh_mcp_through_the_mcp_sdk(product: Product) -> None:
    await mine(product)
    stderr = product.project / f"mesh-mcp-{uuid.uuid4().hex[:6]}.stderr"
    params = StdioServerParameters(command=str(MESH), args=["mcp"], env=product.env, cwd=str(product.project))
    recorder = Recorder()
    step = "step 1: mesh mcp starts and initializes"
    try:
        with stderr.open("w") as errlog:
            async with asyncio.timeout(60):
                async with (
                    stdio_client(params, errlog=errlog) as (read, write),
                    ClientSession(read, write, message_handler=recorder.handle) as session,
                ):
                    await session.initialize()
                    client = McpClient(session, recorder, stderr)
                    step = "step 2: tools/list has echo"
                    await client.wait_for_tools("echo", timeout=15)
                    step = "step 3: tools/call echo"
                    echoed = await session.call_tool("echo", {"message": "hi from mcp"})
                    assert not echoed.is_error and mcp_text(echoed) == "hi from mcp", f"{step}: {echoed}"
                    step = "step 4: tools/list has mine (a mesh run agent)"
                    await client.wait_for_tools("mine", "echo", timeout=AGENT_SEEN_S)
                    step = "step 5: tools/call mine"
                    answered = await session.call_tool("mine", {"message": "hi mine, from mcp"})
                    assert not answered.is_error and mcp_text(answered) == "hi mine, from mcp", f"{step}: {answered}"
    except AssertionError:
        raise
    except BaseException as exc:
        raise AssertionError(f"{step}: {exc!r}\n--- mesh mcp's stderr ---\n{stderr.read_text()}") from exc
    assert "Traceback" not in stderr.read_text(), stderr.read_text()


async def test_mesh_acp_through_the_acp_sdk(product: Product) -> None:
    client = RecordingClient()
    stderr = product.project / f"mesh-acp-{uuid.uuid4().hex[:6]}.stderr"
    step = "step 1: mesh acp echo starts; initialize"
    try:
        with stderr.open("wb") as err:
            async with (
                asyncio.timeout(60),
                spawn_agent_process(
                    client,
                    str(MESH),
                    "acp",
                    "echo",
                    env=product.env,
                    cwd=product.project,
                    transport_kwargs={"stderr": err},
                ) as (conn, _process),
            ):
                editor = Editor(conn, client, stderr)
                init = await editor.initialize()
                assert init.agent_info is not None and init.agent_info.name == "echo", f"{step}: {init}"
                step = "step 2: session/new"
                session = await conn.new_session(cwd=str(product.project), mcp_servers=[])
                step = "step 3: session/prompt"
                result = await conn.prompt(session_id=session.session_id, prompt=[text_block("hi from an editor")])
                assert result.stop_reason == "end_turn", f"{step}: {result}"
                assert "".join(client.texts()) == "hi from an editor", f"{step}: {client.updates}"
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- mesh acp's stderr ---\n{stderr.read_text()}") from None
    except BaseException as exc:
        raise AssertionError(f"{step}: {exc!r}\n--- mesh acp's stderr ---\n{stderr.read_text()}") from exc


# ---------------------------------------------------------------- discovery beside SAM (issue 38)


async def test_the_discovery_tree_holds_only_cards_a_sam_gateway_accepts(product: Product) -> None:
    """``mesh watch --raw --json`` (its own roll call included): every non-empty message of the
    discovery tree validates as the A2A 0.3 AgentCard a SAM gateway reads it as; the roll call
    is on its own topic, outside that tree."""
    from a2a.compat.v0_3.types import AgentCard as SamAgentCard

    watch = await spawn([str(MESH), "watch", "--raw", "--json"], env=product.env, cwd=product.project)
    try:
        await watch.wait_for_line('"topic": "mesh/a2a/v1/rollcall"', stream="stdout", timeout=30)
        await watch.wait_for_line('"topic": "mesh/a2a/v1/discovery/agentcards/echo"', stream="stdout", timeout=30)
    finally:
        assert await stop(watch) == 0, watch.output
    refused = []
    for line in watch.stdout_lines:
        message = json.loads(line)
        if "/a2a/v1/discovery/" not in message["topic"] or not message["payloadBytes"]:
            continue
        try:
            SamAgentCard.model_validate(message.get("card"))
        except ValueError as exc:
            refused.append(f"{message['topic']}: {str(exc).splitlines()[0]}")
    assert refused == [], f"not cards in the discovery tree: {refused}\n{watch.output}"


# ---------------------------------------------------------------- 5. mesh doctor


async def test_mesh_doctor(product: Product) -> None:
    doctor = await product.mesh("doctor", timeout=90)
    assert doctor.code == 0, shown("mesh doctor", doctor)


# ---------------------------------------------------------------- 6. workflows and artifacts


async def test_a_workflow_served_by_mesh_run_calls_echo_and_the_calculator(product: Product) -> None:
    await product.serve("flows.yaml", {"flows.yaml": FLOWS})
    sent = await product.mesh("send", "pipeline", "6*7")
    assert (sent.code, sent.stdout) == (0, "6*7\n42\n"), shown("mesh send pipeline 6*7", sent)


async def test_an_agents_file_is_saved_by_mesh_send_and_downloaded_through_the_gateway(product: Product) -> None:
    files = {"reporter.py": REPORTER_PY, "reporter.yaml": REPORTER, "quarterly.txt": REPORT}
    await product.serve("reporter.yaml", files)
    out = product.project / f"out-{uuid.uuid4().hex[:6]}"
    saved = await product.mesh("send", "reporter", "the quarterly report", "--save-artifacts", str(out))
    step = "step 1: mesh send reporter --save-artifacts DIR"
    assert saved.code == 0 and saved.stdout.startswith("done: artifact://"), shown(step, saved)
    assert f"saved {out / 'report.txt'} ({len(REPORT)} bytes)" in saved.stderr, shown(step, saved)
    assert (out / "report.txt").read_text() == REPORT, step

    # Step 2: over HTTP (docs/gateways.md's JSON-RPC), the answer's artifact:// URI as a download link.
    async with httpx.AsyncClient(headers=product.headers, timeout=30) as http:

        async def answered() -> tuple[bool, str]:
            response = await http.post(
                f"{product.gateway}/a2a/agents/reporter",
                json={
                    "jsonrpc": "2.0",
                    "id": "1",
                    "method": "message/send",
                    "params": {
                        "message": {
                            "kind": "message",
                            "role": "user",
                            "messageId": uuid.uuid4().hex,
                            "parts": [{"kind": "text", "text": "the quarterly report"}],
                        }
                    },
                },
            )
            answers.append(response)
            ok = response.status_code == 200 and "result" in response.json()
            return ok, f"POST /a2a/agents/reporter: {response.status_code} {response.text[:2000]}"

        answers: list[httpx.Response] = []
        await eventually(answered, timeout=AGENT_SEEN_S, what="step 2: the gateway calls the mesh run agent reporter")
        task = answers[-1].json()["result"]
        files = [p["file"] for a in task.get("artifacts", []) for p in a.get("parts", []) if p.get("kind") == "file"]
        assert files and files[0].get("uri", "").startswith(("http://", "/")), f"step 2: a download link: {task}"
        link = httpx.URL(product.gateway).join(files[0]["uri"])
        download = await http.get(link)
        step = f"step 3: GET the link {link}: {download.status_code} {download.text[:500]}"
        assert download.status_code == 200 and download.text == REPORT, step
    # The link is a bearer capability of one version (docs/security-model.md): no credentials needed,
    # a Range honoured, a wrong API key refused rather than ignored.
    async with httpx.AsyncClient(timeout=30) as anyone:
        ranged = await anyone.get(link, headers={"Range": "bytes=0-5"})
        assert (ranged.status_code, ranged.text) == (206, REPORT[:6]), f"step 4: the link alone: {ranged}"
        wrong = await anyone.get(link, headers={"X-API-Key": "not-the-key"})
        assert wrong.status_code == 401, f"step 5: the link with a wrong API key: {wrong.status_code} {wrong.text}"


async def test_a_file_attached_in_the_chat_is_stored_and_comes_back(product: Product) -> None:
    content = b"notes for the mesh\n" * 1000
    async with signed_in(product.gateway, product.api_key) as browser:
        made = await new_conversation(browser, "echo", "step 1: a chat conversation with echo")
        upload = {"name": "notes.txt", "mimeType": "text/plain", "bytes": base64.b64encode(content).decode()}
        path = f"/chat/api/conversations/{made['id']}/messages"
        status, events = await sse_post(browser, path, {"text": "here are my notes", "files": [upload]})
        step = f"step 2: a turn with a file: {status} {events}"
        assert status == 200 and events and events[-1][0] == "end", step
        turns = (await browser.get(f"/chat/api/conversations/{made['id']}")).json().get("turns", [])
        files = [f for t in turns if t.get("role") == "user" for f in t.get("files", [])]
        assert files and files[0].get("url", "").startswith("/a2a/artifacts/"), f"step 3: the stored file: {turns}"
        download = await browser.get(files[0]["url"])
        assert download.status_code == 200 and download.content == content, f"step 4: GET {files[0]['url']}: {download}"


# ---------------------------------------------------------------- 7. an LLM agent


async def test_an_llm_agent_on_the_test_model_answers_mesh_send(product: Product) -> None:
    await product.serve("llm.yaml", {"llm.yaml": LLM})
    asked = await product.mesh("send", "thinker", "hello", timeout=90)
    step = "step 1: mesh send thinker (TestModel calls ask_user too: the task asks first)"
    found = INPUT_REQUIRED.search(asked.stderr)
    assert asked.code == 0 and found, shown(step, asked)
    answered = await product.mesh("send", "thinker", "yes", "--task", found[1], timeout=90)
    step = "step 2: the answer to its question completes the run with every tool's result"
    assert answered.code == 0, shown(step, answered)
    try:
        results = json.loads(answered.stdout)
    except ValueError:
        raise AssertionError(shown(step + " (as JSON)", answered)) from None
    assert results.get("ask_user") == "yes", shown(step, answered)


async def test_mesh_send_answers_an_llm_agents_tool_approval_and_mesh_usage_counts_it(product: Product) -> None:
    await product.serve("careful.yaml", {"careful.yaml": CAREFUL})
    waiting = await product.mesh("send", "careful", "echo hi", timeout=90)  # no terminal: the task waits
    step = "step 1: mesh send careful (the call of echo waits for approval)"
    found = re.search(r"task (\w+) waits for the approval of 1 tool call\(s\)", waiting.stderr)
    assert waiting.code == 0 and found, shown(step, waiting)
    done = await product.mesh("send", "careful", "--task", found[1], "--approve", "all", "--json", timeout=90)
    step = "step 2: mesh send --task ID --approve all completes the task with echo's answer and its usage"
    assert done.code == 0, shown(step, done)
    task = json.loads(done.stdout)
    assert task["status"]["state"] == "completed" and "hi" in json.dumps(task["status"]["message"]), shown(step, done)
    llm = task["status"]["message"]["metadata"]["llm"]
    assert llm["modelCalls"] == 2 and llm["inputTokens"] > 0 and llm["outputTokens"] > 0, shown(step, done)
    approved = await product.mesh("send", "careful", "echo there", "--approve", "all", timeout=90)
    assert approved.code == 0 and "there" in approved.stdout, shown("step 3: mesh send --approve all", approved)

    async def counted() -> tuple[bool, str]:  # the agent writes its usage rows within 50 ms of the answer
        usage = await product.mesh("usage", "--by", "agent")
        line = re.search(r"^careful\s+(\d+)\s+(\d+)\s+(\d+)", usage.stdout, re.M)
        return usage.code == 0 and bool(line) and int(line[1] if line else 0) >= 4, shown("", usage)

    await eventually(counted, timeout=30, what="step 4: mesh usage --by agent counts the 4 model calls")


# ---------------------------------------------------------------- 9. mesh send with data and files


async def test_mesh_send_gives_the_workflow_its_input_as_data(product: Product) -> None:
    await product.serve("flows.yaml", {"flows.yaml": FLOWS})
    sent = await product.mesh("send", "pipeline", "--data", '{"expression": "6*7"}')
    assert (sent.code, sent.stdout) == (0, "6*7\n42\n"), shown("mesh send pipeline --data '{...}'", sent)
    (product.project / "input.json").write_text('{"expression": "2*3"}')
    sent = await product.mesh("send", "pipeline", "--data", "@input.json")
    assert (sent.code, sent.stdout) == (0, "2*3\n6\n"), shown("mesh send pipeline --data @input.json", sent)
    bad = await product.mesh("send", "pipeline", "--data", '{"expression": 6*7}')
    step = "mesh send pipeline --data with bad JSON"
    assert bad.code == 2 and "--data is not JSON" in bad.stderr and "Traceback" not in bad.stderr, shown(step, bad)


async def test_mesh_send_attaches_files_inline_and_by_artifact_uri(product: Product) -> None:
    await mine(product)
    (product.project / "some.txt").write_text("some notes\n")
    big = bytes(range(256)) * 5000  # 1.28 MB: past the inline threshold
    (product.project / "big.bin").write_bytes(big)
    sent = await product.mesh("send", "mine", "here", "--file", "some.txt", "--file", "big.bin", "--json")
    step = "mesh send mine here --file some.txt --file big.bin --json"
    assert sent.code == 0, shown(step, sent)
    task = json.loads(sent.stdout)
    assert task["status"]["state"] == "completed", shown(step, sent)
    (asked, *_) = task.get("history") or [{}]
    files = {p["file"]["name"]: p for p in asked.get("parts", []) if p.get("kind") == "file"}
    assert base64.b64decode(files["some.txt"]["file"]["bytes"]) == b"some notes\n", shown(step, sent)
    uri = files["big.bin"]["file"].get("uri", "")
    assert uri == f"artifact://{task['contextId']}/big.bin?version=1", shown(step, sent)
    assert files["big.bin"]["metadata"]["size_bytes"] == len(big), shown(step, sent)
    missing = await product.mesh("send", "mine", "here", "--file", "nope.txt")
    step = "mesh send mine --file nope.txt"
    assert missing.code == 2 and "--file nope.txt: no such file" in missing.stderr, shown(step, missing)


# ---------------------------------------------------------------- A2A conformance (issue 38)


async def test_the_gateway_serves_each_a2a_versions_card_and_streams_a_subscriptions_error(product: Product) -> None:
    """On the default mesh's gateway: the 1.0 card (what a 1.0 client asks for, and what a client
    naming no version gets) has no 0.3 member and validates as a strict 1.0 AgentCard; a 0.3
    client gets the 0.3 card; ``tasks/resubscribe`` of an unknown task answers
    ``text/event-stream`` with the -32001 error."""
    from a2a.compat.v0_3.types import AgentCard as AgentCard03

    from tests.gateways.http_tests.test_http_cards import assert_strict_v1_card

    url = f"{product.gateway}/a2a/agents/echo"
    async with httpx.AsyncClient(headers=product.headers, timeout=30) as http:
        for headers in ({"A2A-Version": "1.0"}, {}):
            card = (await http.get(f"{url}/card", headers=headers)).json()
            step = f"step 1: the 1.0 card at {url}/card (headers {headers})"
            legacy = {"url", "preferredTransport", "protocolVersion", "additionalInterfaces", "security"} & set(card)
            assert not legacy and "stateTransitionHistory" not in card.get("capabilities", {}), f"{step}: {card}"
            assert_strict_v1_card(card)
        card = (await http.get(f"{url}/card", headers={"A2A-Version": "0.3"})).json()
        assert AgentCard03.model_validate(card).url == url, f"step 2: the 0.3 card: {card}"
        body = {"jsonrpc": "2.0", "id": "i38", "method": "tasks/resubscribe", "params": {"id": "no-such-task"}}
        async with http.stream("POST", url, json=body) as response:
            step = f"step 3: tasks/resubscribe of an unknown task at {url}"
            assert response.headers["content-type"].startswith("text/event-stream"), f"{step}: {response.headers}"
            text = (await response.aread()).decode()
    data = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:")]
    assert [d.get("error", {}).get("code") for d in data] == [-32001], f"{step}: {text}"


async def test_calculators_credentials_cannot_cancel_a_cli_task_by_naming_its_answer_topic(product: Product) -> None:
    """The insider of issue 39: holding calculator's credentials (``credentials/calculator`` of the
    state dir, as its name check ``calculator@probe``), a ``tasks/cancel`` for the CLI's running
    task naming the CLI's answer topic does nothing: the ``mesh send`` counts down to the end."""
    record = json.loads((product.home / ".local/state/mesh/up/mesh.json").read_text(encoding="utf-8"))
    tls = TlsOptions(ca_file=record["ca_file"]) if record.get("ca_file") else None
    calculator = BrokerSettings.from_url(record["broker_url"], tls=tls, password_file=record["credentials"])
    calculator = calculator.for_identity("calculator")
    probe = MqttTransport(
        dataclasses.replace(calculator, username="calculator@probe"),
        client_id=probe_client_id(private_client_id("mesh/calculator", calculator.password)),
    )
    sending = await spawn([str(MESH), "send", "countdown", "3", "--stream"], env=product.env, cwd=product.project)
    try:
        task = re.search(r"\[task ([0-9a-f]{32})\]", await sending.wait_for_line("[task ", stream="stdout"))
        assert task, sending.output
        answers = "mesh/a2a/v1/client/response/cli"
        await probe.connect()
        try:
            await probe.publish(
                "mesh/a2a/v1/agent/request/countdown",
                request_bytes("tasks/cancel", "insider-1", TaskIdParams(id=task[1])),
                properties=MessageProperties(reply_to=answers, correlation_data=b"insider-1"),
            )
        finally:
            await probe.close()
        assert await asyncio.wait_for(sending.proc.wait(), 60) == 0, sending.output
        assert "Liftoff! Counted down from 3." in "".join(sending.stdout_lines), sending.output
    finally:
        await stop(sending)


# ---------------------------------------------------------------- 10. mesh eval and schedules


async def test_mesh_eval_of_the_docs_example_passes_and_a_wrong_one_regresses(product: Product) -> None:
    files = page_files(ROOT / "docs" / "eval.md")  # digest.yaml, evals.yaml, wrong.yaml, checks.py
    for name, text in files.items():
        (product.project / name).write_text(text)
    await product.serve("digest.yaml", {})
    passed = await product.mesh("eval", "evals.yaml", "--junit", "report.xml", "--json", "first.json", timeout=120)
    step = "step 1: mesh eval evals.yaml (docs/eval.md) on the example agents and a mesh run workflow"
    assert passed.code == 0 and passed.stdout.splitlines()[-1] == "4 of 4 passed", shown(step, passed)
    report = ET.parse(product.project / "report.xml").getroot()  # noqa: S314 - the test's own report
    assert (report.get("tests"), report.get("failures")) == ("4", "0"), step
    failed = await product.mesh("eval", "wrong.yaml", "--baseline", "first.json", timeout=120)
    step = "step 2: mesh eval wrong.yaml --baseline first.json"
    assert failed.code == 1, shown(step, failed)
    assert 'exact: expected "5", got "4"' in failed.stdout, shown(step, failed)
    assert "regression: adds passed in the baseline and fails now" in failed.stdout, shown(step, failed)


SCHEDULED = """\
# often.yaml: a schedule (docs/schedules.md) on the example calculator
schedules:
  - name: often
    agent: calculator
    message: "{expression}"
    every: 2s
    user: "{user}"
"""


async def test_a_schedule_of_mesh_run_makes_tasks_seen_in_the_dashboard_and_mesh_task_get(product: Product) -> None:
    first = uuid.uuid4().int % 9000 + 1000
    expression, answer = f"{first} + 1", str(first + 1)
    async with signed_in(product.gateway, product.api_key, next_path="/ui") as browser:
        feed = Feed()
        async with browser.stream("GET", "/ui/api/events") as response:
            assert response.status_code == 200, f"step 1: GET /ui/api/events: {response.status_code}"
            reader = asyncio.get_running_loop().create_task(feed.follow(response))
            try:
                await feed.wait_for(lambda: "calculator" in dashboard_agents(feed), timeout=15, what="step 1")
                user = (await browser.get("/chat/api/conversations")).json()["user"]  # the runs go to its chat
                often = SCHEDULED.format(expression=expression, user=user)
                await product.serve("often.yaml", {"often.yaml": often})

                def scheduled() -> str | None:
                    for task_id, seen in dashboard_tasks(feed).items():
                        texts = [str(e.get("text") or "") for e in seen["events"]]
                        done = seen.get("task", {}).get("state") == "completed"
                        # The answer's text, then its data as JSON: "7897 {"expression": ...}".
                        if done and expression in texts and any(t.split(" ")[0] == answer for t in texts):
                            return task_id
                    return None

                task_id = await feed.wait_for(
                    scheduled,
                    timeout=AGENT_SEEN_S * 2,
                    what=f"step 2: the dashboard shows a scheduled task {expression!r} completed with {answer!r} "
                    f"(known tasks: {dashboard_summary(feed)})",
                )
            finally:
                reader.cancel()
                with contextlib.suppress(BaseException):
                    await reader
    got = await product.mesh("task", "get", "calculator", task_id)
    step = f"step 3: mesh task get calculator {task_id} (the scheduler's tasks are the CLI's)"
    assert got.code == 0 and f"message  {answer}" in got.stdout.splitlines(), shown(step, got)
    listed = await product.mesh("schedule", "list", "--json")
    step = "step 4: mesh schedule list --json"
    assert listed.code == 0, shown(step, listed)
    [often] = json.loads(listed.stdout)
    assert often["name"] == "often" and often["last_run"]["outcome"] == "completed", shown(step, listed)
    agents = await product.mesh("agents")
    step = "step 5: mesh agents shows the calculator's next scheduled run"
    assert agents.code == 0, shown(step, agents)
    assert any(
        line.startswith("scheduled: calculator by often (every 2s), next ") for line in agents.stdout.splitlines()
    ), shown(step, agents)
    paused = await product.mesh("schedule", "pause", "often")  # no more ticks for the tests after this one
    assert paused.code == 0, shown("step 6: mesh schedule pause often", paused)
    async with signed_in(product.gateway, product.api_key) as browser:
        step = f"step 7: the chat of the schedule's user ({user!r}) lists its runs"
        conversations = (await browser.get("/chat/api/conversations")).json()["conversations"]
        [mine] = [c for c in conversations if c["title"] == "often (scheduled)"] or [None]
        assert mine is not None and mine["agent"] == "calculator", f"{step}: {conversations}"
        turns = (await browser.get(f"/chat/api/conversations/{mine['id']}")).json()["turns"]
        assert expression in [t.get("text") for t in turns if t["role"] == "user"], f"{step}: {turns}"
        assert task_id in [t.get("taskId") for t in turns if t["role"] == "agent"], f"{step}: {turns}"


# ---------------------------------------------------------------- 11. a remote A2A agent (docs/remote-agents.md)

REMOTE = """\
# remote.yaml: an HTTP A2A agent (an a2a-sdk server) served on the mesh by a proxy
agents:
  - name: weather
    remote:
      card_url: http://127.0.0.1:{port}/.well-known/agent-card.json
"""


async def test_a_remote_a2a_agent_answers_mesh_send_and_the_gateway(product: Product) -> None:
    from tests.agents.remote.server import Weather, serving
    from tests.agents.remote.server import app as remote_app

    port = free_port()
    async with serving(remote_app(port, Weather()), port):
        await product.serve("remote.yaml", {"remote.yaml": REMOTE.format(port=port)})
        sent = await product.mesh("send", "weather", "hello")
        step = "step 1: mesh send weather hello reaches the a2a-sdk server through the proxy"
        assert (sent.code, sent.stdout) == (0, "echo: hello\n"), shown(step, sent)
        listed = await product.mesh("agents")
        step = "step 2: mesh agents lists the remote agent"
        assert any(line.startswith("weather ") for line in listed.stdout.splitlines()), shown(step, listed)
        base = product.gateway
        async with httpx.AsyncClient(headers=product.headers, timeout=30) as http:

            async def listed_there() -> tuple[bool, str]:
                response = await http.get(f"{base}/a2a/agents")
                agents = response.json().get("agents", []) if response.status_code == 200 else []
                names = [a.get("name") for a in agents]
                return "weather" in names, f"GET /a2a/agents: {response.status_code} {names or response.text[:2000]}"

            await eventually(listed_there, timeout=AGENT_SEEN_S, what="step 3: the gateway lists the remote agent")
        answer = await a2a_sdk_send(f"{base}/a2a/agents/weather", product.headers, "hi over http")
        assert answer == ("TASK_STATE_COMPLETED", "echo: hi over http"), f"step 4: a2a-sdk via the gateway: {answer}"
        async with signed_in(product.gateway, product.api_key) as browser:
            made = await new_conversation(browser, "weather", "step 5: a chat conversation with the remote agent")
            path = f"/chat/api/conversations/{made['id']}/messages"
            status, events = await sse_post(browser, path, {"text": "hi from the chat"})
            step = f"step 5: a turn in the chat with the remote agent: {status} {events}"
            assert status == 200 and final_text(events) == "echo: hi from the chat", step


# ---------------------------------------------------------------- 12. replicas sharing their tasks in PostgreSQL

TWINS = """\
# twins.yaml: an agent run as replicas that share their tasks (docs/operations.md)
agents:
  - class: agents.builtin.echo:EchoAgent
    name: twins
    shared_subscription: true
    store: {store}
"""


async def test_replicas_on_postgresql_answer_for_each_others_tasks(
    product: Product, postgres_server: PostgresServer
) -> None:
    """Two ``mesh run twins.yaml`` (``store:`` the test's PostgreSQL, its password in
    ``$MESH_STORE_PASSWORD``): tasks sent with ``mesh send`` go to either; once one replica is
    stopped, ``mesh task get`` answers every task from the other, those the stopped one ran too."""
    (product.project / "twins.yaml").write_text(TWINS.format(store=postgres_server.url))
    env = {**product.env, **postgres_server.env}
    twins = []
    for n in range(2):
        service = await spawn([str(MESH), "run", "twins.yaml"], env=env, cwd=product.project)
        product.services[f"twins.yaml ({n})"] = service
        await service.wait_for_line("Ctrl-C stops", timeout=STARTUP_S)
        twins.append(service)
    doctor = await run([str(MESH), "doctor", "--store", postgres_server.url], env=env, cwd=product.project)
    step = "mesh doctor --store (the password from $MESH_STORE_PASSWORD)"
    assert "store reachable" in doctor.stdout and "task_journal v" in doctor.stdout, shown(step, doctor)
    assert str(postgres_server.password) not in doctor.stdout + doctor.stderr, shown(
        step + ": no password shown", doctor
    )
    sent = []
    for n in range(6):  # the broker hands them round-robin to the two replicas
        result = await run([str(MESH), "send", "twins", f"hello {n}"], env=env, cwd=product.project)
        assert (result.code, result.stdout) == (0, f"hello {n}\n"), shown("mesh send twins", result)
        sent.append(task_id_of(result))
    assert await stop(twins[0]) == 0, twins[0].output
    with connect_store(StoreUrl(postgres_server.url, postgres_server.password)) as db:
        ran_by = {row[0] for row in db.execute("SELECT instance FROM mesh_tasks WHERE id = ANY(%s)", (sent,))}
    assert len(ran_by) == 2, f"the six tasks ran on {ran_by}, not on both replicas"  # so the other answers some
    for n, task in enumerate(sent):
        got = await run([str(MESH), "task", "get", "twins", task], env=env, cwd=product.project)
        fields = dict(line.split(None, 1) for line in got.stdout.splitlines()[:4] if " " in line)
        step = f"mesh task get twins {task}: answered by the replica still running"
        assert got.code == 0 and fields.get("state") == "completed", shown(step, got)
        assert fields.get("message") == f"hello {n}", shown(step, got)


# ---------------------------------------------------------------- the end: Ctrl-C


async def test_ctrl_c_stops_everything_cleanly(product: Product) -> None:
    problems = []
    for config, service in product.services.items():
        code = await stop(service)
        if code != 0 or "Traceback" in service.output:
            problems.append(f"mesh run {config} exited {code}:\n{service.output}")
    code = await stop(product.up)
    if code != 0 or "Traceback" in product.up.output:
        problems.append(f"{product.variant} exited {code} on Ctrl-C:\n{product.up.output}")
    assert not problems, "\n\n".join(problems)
    if product.broker_pid is not None:
        pid = product.broker_pid

        async def gone() -> tuple[bool, str]:
            return not alive(pid), f"the broker mesh up started (pid {pid}) still runs"

        await eventually(gone, timeout=10, what="the broker stops with mesh up")
