"""``mesh mcp``: the official ``mcp`` SDK's client reaching mesh agents as tools, over stdio and streamable HTTP."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError

from agents import Agent, InputRequired, Reply
from agents.builtin.calculator import CalculatorAgent
from agents.builtin.countdown import CountdownAgent
from agents.builtin.echo import EchoAgent
from agents.service import AgentService
from mesh.a2a import TaskState, get_text_from_message
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.discovery.registry import DiscoveryRegistry
from mesh.trust import generate_keys
from mesh.trust.config import TrustSettings, resolve
from tests.agents.test_trust import Whoami
from tests.conftest import ServeAgent, TransportFactory
from tests.gateways.chat_agents import booker
from tests.gateways.mcp_client import mesh_mcp, mesh_mcp_http
from tests.mesh.cli_process import mesh_env
from tests.support import Inbox, start_agent_process

TRANSPORTS = ["stdio", "http"]
TOKEN = "mcp-test-token-0123456789abcdef"


class Greeter(Agent):
    """Asks for a name, then greets: input-required, then the continuation."""

    name = "greeter"
    description = "Greets you by name (asks for it first)."

    async def handle(self, message, ctx):  # type: ignore[no-untyped-def]
        answer = yield InputRequired("What is your name?")
        yield Reply(f"Hello, {get_text_from_message(answer)}!")


class Broken(Agent):
    name = "broken"
    description = "Always fails."

    async def handle(self, message, ctx):  # type: ignore[no-untyped-def]
        raise RuntimeError("the flux capacitor is empty")


class Stats(Agent):
    name = "stats"
    description = "Answers with text and a data part."

    async def handle(self, message, ctx):  # type: ignore[no-untyped-def]
        return Reply(text="two words", data={"words": len(get_text_from_message(message).split())})


def _text(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_tools_list_and_calls_to_echo_calculator_and_a_data_agent(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path, transport: str
) -> None:
    await serve_agent(EchoAgent())
    await serve_agent(CalculatorAgent())
    await serve_agent(Stats())
    async with mesh_mcp(broker_url, namespace, tmp_path, transport=transport) as client:
        tools = {tool.name: tool for tool in await client.wait_for_tools("echo", "calculator", "stats")}
        echo = tools["echo"]
        assert echo.description is not None and "Repeats what it is told" in echo.description
        assert "Examples: 'hello'" in echo.description
        assert echo.input_schema["required"] == ["message"]
        assert set(echo.input_schema["properties"]) == {"message", "context_id", "task_id", "skill"}
        assert echo.input_schema["properties"]["skill"]["enum"] == ["echo"]

        result = await client.session.call_tool("echo", {"message": "hello mesh"})
        assert not result.is_error
        assert _text(result) == "hello mesh"
        assert result.meta is not None and result.meta["mesh/state"] == "completed"

        sum_ = await client.session.call_tool("calculator", {"message": "2 + 3 * 4"})
        assert not sum_.is_error and "14" in _text(sum_)

        stats = await client.session.call_tool("stats", {"message": "a b c"})
        assert _text(stats) == "two words"
        assert stats.structured_content == {"words": 3}

        bad = await client.session.call_tool("echo", {"message": "hi", "skill": "dance"})
        assert bad.is_error and "no skill 'dance'" in _text(bad)
    assert "Traceback" not in client.stderr_text()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_streaming_agent_sends_progress_in_order_and_its_artifact(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path, transport: str
) -> None:
    await serve_agent(CountdownAgent(interval_s=0.01))
    async with mesh_mcp(broker_url, namespace, tmp_path, transport=transport) as client:
        await client.wait_for_tools("countdown")
        progress: list[tuple[float, str | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, message))

        result = await client.session.call_tool("countdown", {"message": "3"}, progress_callback=on_progress)
        assert not result.is_error
        assert "Liftoff! Counted down from 3." in _text(result)
        statuses = [message for _, message in progress if message and message.endswith("...")]
        assert statuses == ["3...", "2...", "1..."]
        values = [value for value, _ in progress]
        assert values == sorted(values) and len(set(values)) == len(values)  # strictly increasing
        artifacts = [b.resource for b in result.content if isinstance(b, types.EmbeddedResource)]
        assert [a.text for a in artifacts if isinstance(a, types.TextResourceContents)] == ["3\n2\n1\n0"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_input_required_returns_the_question_and_the_task_id_to_answer_with(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path, transport: str
) -> None:
    await serve_agent(Greeter())
    async with mesh_mcp(broker_url, namespace, tmp_path, transport=transport) as client:
        await client.wait_for_tools("greeter")
        first = await client.session.call_tool("greeter", {"message": "hello"})
        assert not first.is_error
        assert "What is your name?" in _text(first)
        structured: Any = first.structured_content
        assert structured["state"] == "input-required"
        task_id = structured["task_id"]
        assert task_id and task_id in _text(first)
        second = await client.session.call_tool("greeter", {"message": "Ada", "task_id": task_id})
        assert _text(second) == "Hello, Ada!"
        assert second.meta is not None and second.meta["mesh/taskId"] == task_id


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_agents_joining_and_leaving_change_the_list_with_list_changed(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path, transport: str
) -> None:
    await serve_agent(EchoAgent())
    async with mesh_mcp(broker_url, namespace, tmp_path, transport=transport) as client:
        await client.wait_for_tools("echo")
        before = client.recorder.list_changes()
        greeter = await serve_agent(Greeter())
        await client.recorder.wait_for_list_change(before)
        await client.wait_for_tools("greeter")
        before = client.recorder.list_changes()
        await greeter.stop()  # its card is cleared: the agent is gone
        await client.recorder.wait_for_list_change(before)
        await client.wait_for_tools("greeter", present=False)
        assert "echo" in await client.tool_names()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_failing_and_missing_agents_give_is_error_with_the_reason(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path, transport: str
) -> None:
    await serve_agent(Broken())
    async with mesh_mcp(broker_url, namespace, tmp_path, transport=transport) as client:
        await client.wait_for_tools("broken")
        result = await client.session.call_tool("broken", {"message": "go"})
        assert result.is_error
        assert "task failed" in _text(result)
        empty = await client.session.call_tool("broken", {"message": ""})
        assert empty.is_error and "non-empty string 'message'" in _text(empty)
        with pytest.raises(Exception, match="unknown tool 'nobody'"):
            await client.session.call_tool("nobody", {"message": "hi"})
    assert "Traceback" not in client.stderr_text()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_cancelling_a_call_mid_stream_cancels_the_task_on_the_mesh(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path, transport: str
) -> None:
    import anyio

    await serve_agent(CountdownAgent(interval_s=0.2))
    async with mesh_mcp(broker_url, namespace, tmp_path, transport=transport) as client:
        await client.wait_for_tools("countdown")
        started = anyio.Event()

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            started.set()

        async with anyio.create_task_group() as group:

            async def call() -> None:
                await client.session.call_tool("countdown", {"message": "50"}, progress_callback=on_progress)

            group.start_soon(call)
            with anyio.fail_after(15):
                await started.wait()
            group.cancel_scope.cancel()  # the SDK sends notifications/cancelled
        async with MeshClient.connect(broker_url, namespace) as mesh:
            with anyio.fail_after(15):
                while True:
                    tasks = (await mesh.list_tasks("countdown")).tasks
                    if tasks and tasks[0].status.state == TaskState.canceled:
                        break
                    await anyio.sleep(0.05)  # the cancel travels mcp -> mesh -> agent
            task = await mesh.get_task("countdown", tasks[0].id)
            assert task.status.state == TaskState.canceled


async def test_agents_patterns_filter_the_tools(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(EchoAgent())
    await serve_agent(CalculatorAgent())
    async with mesh_mcp(broker_url, namespace, tmp_path, "--agents", "calc*", "nothing") as client:
        await client.wait_for_tools("calculator")
        assert await client.tool_names() == ["calculator"]


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_kill_9_of_an_agent_ends_its_call_with_is_error_and_removes_its_tool(
    make_transport: TransportFactory, broker_url: str, namespace: str, tmp_path: Path, transport: str
) -> None:
    import anyio

    proc = await start_agent_process(broker_url, namespace, "blocker", agent="Blocker")
    try:
        async with mesh_mcp(broker_url, namespace, tmp_path, transport=transport) as client:
            await client.wait_for_tools("blocker")
            requests = Inbox()  # what reached the agent's request topic
            await (await make_transport()).subscribe(f"{namespace}/a2a/v1/agent/request/blocker", requests)
            results: list[types.CallToolResult] = []
            async with anyio.create_task_group() as group:

                async def call() -> None:
                    results.append(await client.session.call_tool("blocker", {"message": "wait"}))

                group.start_soon(call)
                await requests.wait_for(1)
                before = client.recorder.list_changes()
                proc.kill()  # kill -9: only the broker's will clears its card
                await proc.wait()
            [result] = results
            assert result.is_error
            assert "agent 'blocker' went away" in _text(result) and "AgentGone" in _text(result)
            await client.recorder.wait_for_list_change(before)
            await client.wait_for_tools("blocker", present=False)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_with_a_trust_store_only_signed_agents_are_tools(
    serve_agent: ServeAgent,
    make_transport: TransportFactory,
    broker_settings: BrokerSettings,
    broker_url: str,
    namespace: str,
    tmp_path: Path,
) -> None:
    keys = tmp_path / "keys"
    generate_keys(keys, ["signed", "mcp-main"])
    signed = AgentService(
        EchoAgent(name="signed"),
        broker=broker_settings,
        namespace=namespace,
        trust=resolve(TrustSettings(keys=keys), "signed", keys),
    )
    await signed.start()
    try:
        await serve_agent(EchoAgent())  # unsigned
        async with mesh_mcp(broker_url, namespace, tmp_path, "--keys", str(keys), "--id", "mcp-main") as client:
            await client.wait_for_tools("signed")
            assert await client.tool_names() == ["signed"]
            result = await client.session.call_tool("signed", {"message": "trusted"})
            assert _text(result) == "trusted"
            # With --id and its key, the gateway's own card is signed: a trusting registry accepts it.
            verifier = resolve(TrustSettings(keys=keys), "observer", keys).card_verifier()
            registry = DiscoveryRegistry(await make_transport(), namespace, verifier=verifier)
            await registry.start()
            try:
                assert (await registry.wait_for("mcp-main", 10, kind="gateway")).card.signatures
            finally:
                await registry.stop()
        async with mesh_mcp(broker_url, namespace, tmp_path) as client:  # no trust store: both
            await client.wait_for_tools("signed", "echo")
    finally:
        await signed.stop()


async def test_http_behind_the_gateways_auth_settings(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(Whoami())
    config = tmp_path / "mesh.yaml"
    config.write_text(
        f"gateways:\n  - kind: http\n    auth: {{mode: bearer, tokens: [{{name: ada, secret: {TOKEN}}}]}}\n"
    )
    async with (
        mesh_mcp_http(broker_url, namespace, tmp_path, "--config", str(config)) as url,
        httpx.AsyncClient() as http,
    ):
        refused = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert refused.status_code == 401
        assert refused.headers["www-authenticate"].startswith("Bearer")
        wrong = await http.post(url, json={}, headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
    async with mesh_mcp(
        broker_url,
        namespace,
        tmp_path,
        "--config",
        str(config),
        transport="http",
        headers={"Authorization": f"Bearer {TOKEN}"},
    ) as client:
        await client.wait_for_tools("whoami")
        result = await client.session.call_tool("whoami", {"message": "who am I?"})
        assert json.loads(_text(result))["user"] == "ada"  # the authenticated caller reaches the agent


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_2026_client_lists_calls_and_hears_of_changes_on_subscriptions_listen(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path, transport: str
) -> None:
    """The SDK's high-level Client negotiates the 2026-07-28 protocol (no handshake, listen streams)."""
    await serve_agent(EchoAgent())
    if transport == "stdio":
        server = StdioServerParameters(
            command=sys.executable,
            args=["-m", "mesh.cli", "mcp", "--broker", broker_url, "--namespace", namespace],
            env=mesh_env(),
        )
        async with Client(server) as client:
            await _modern_session(client, serve_agent)
    else:
        async with mesh_mcp_http(broker_url, namespace, tmp_path) as url, Client(url) as client:
            await _modern_session(client, serve_agent)


async def _modern_session(client: Client, serve_agent: ServeAgent) -> None:
    import anyio

    assert client.session.protocol_version == "2026-07-28"
    with anyio.fail_after(15):
        while "echo" not in {tool.name for tool in (await client.list_tools()).tools}:
            async with client.listen(tools_list_changed=True) as changes:
                if "echo" in {tool.name for tool in (await client.list_tools()).tools}:
                    break
                await changes.__anext__()
    result = await client.call_tool("echo", {"message": "hello 2026"})
    assert _text(result) == "hello 2026"
    async with client.listen(tools_list_changed=True) as changes:
        await serve_agent(CountdownAgent(interval_s=0.01))
        with anyio.fail_after(15):
            while "countdown" not in {tool.name for tool in (await client.list_tools()).tools}:
                await changes.__anext__()  # a ToolsListChanged event
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    done = await client.call_tool("countdown", {"message": "2"}, progress_callback=on_progress)
    assert "Liftoff! Counted down from 2." in _text(done)
    assert [m for m in progress if m and m.endswith("...")] == ["2...", "1..."]


class Painter(Agent):
    """Saves a binary picture and a text note as artifacts (by URI, not inline)."""

    name = "painter"
    description = "Paints a picture and writes a note."

    async def handle(self, message, ctx):  # type: ignore[no-untyped-def]
        await ctx.save_artifact("art/picture.png", PICTURE, "image/png")
        await ctx.save_artifact("note.md", "# Note\n\nçà va\n".encode(), "text/markdown")
        await ctx.save_artifact("secret.txt", b"saved, never linked", "text/plain", emit=False)
        return Reply("painted")


PICTURE = bytes(range(256)) * 40


@pytest.mark.parametrize(("transport", "store_from"), [("stdio", "env"), ("http", "config")])
async def test_artifacts_come_back_as_resource_links_the_client_reads_through_the_server(
    serve_agent: ServeAgent,
    broker_url: str,
    namespace: str,
    tmp_path: Path,
    transport: str,
    store_from: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MESH_ARTIFACTS", str(tmp_path / "artifacts"))  # the agent's store (and mesh mcp's)
    await serve_agent(Painter())
    extra: tuple[str, ...] = ()
    if store_from == "config":  # the artifacts: of --config wins over MESH_ARTIFACTS
        config = tmp_path / "mesh.yaml"
        config.write_text(f"artifacts:\n  path: {tmp_path / 'artifacts'}\n")
        monkeypatch.setenv("MESH_ARTIFACTS", str(tmp_path / "elsewhere"))
        extra = ("--config", str(config))
    async with mesh_mcp(broker_url, namespace, tmp_path, *extra, transport=transport) as client:
        await client.wait_for_tools("painter")
        result = await client.session.call_tool("painter", {"message": "go"})
        assert not result.is_error, _text(result)
        links = {b.name: b for b in result.content if isinstance(b, types.ResourceLink)}
        assert set(links) == {"art/picture.png", "note.md"}
        context_id = result.meta["mesh/contextId"] if result.meta else None
        assert links["art/picture.png"].uri == f"artifact://{context_id}/art/picture.png?version=1"
        assert links["art/picture.png"].mime_type == "image/png"

        picture = (await client.session.read_resource(links["art/picture.png"].uri)).contents
        assert len(picture) == 1 and isinstance(picture[0], types.BlobResourceContents)
        assert base64.b64decode(picture[0].blob) == PICTURE and picture[0].mime_type == "image/png"
        note = (await client.session.read_resource(links["note.md"].uri)).contents
        assert isinstance(note[0], types.TextResourceContents) and note[0].text == "# Note\n\nçà va\n"

        listed = (await client.session.list_resources()).resources
        assert sorted(r.uri for r in listed) == sorted(link.uri for link in links.values())
        # In the store but never handed to this client, or not there at all: not found alike.
        for uri in (
            f"artifact://{context_id}/secret.txt",
            f"artifact://{context_id}/nothing.txt",
            "file:///etc/passwd",
        ):
            with pytest.raises(MCPError) as refused:
                await client.session.read_resource(uri)
            assert refused.value.error.code == -32002 and "resource not found" in refused.value.error.message
    assert "Traceback" not in client.stderr_text()


@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_a_tool_approval_is_an_elicitation_and_the_call_goes_on(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path, transport: str
) -> None:
    asked: list[types.ElicitRequestParams] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params)
        return types.ElicitResult(action="accept", content={"approve": len(asked) == 1, "reason": "once is enough"})

    await serve_agent(booker())
    async with mesh_mcp(broker_url, namespace, tmp_path, transport=transport, elicitation_callback=elicit) as client:
        await client.wait_for_tools("booker")
        approved = await client.session.call_tool("booker", {"message": "book"})
        assert _text(approved) == "result: booked Oslo"
        assert "wants to call book with {'city': 'Oslo'}" in asked[0].message
        denied = await client.session.call_tool("booker", {"message": "book"})
        assert _text(denied) == "result: The user denied this call: once is enough"


async def test_without_elicitation_the_approval_is_a_question_answered_with_yes(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(booker())
    async with mesh_mcp(broker_url, namespace, tmp_path) as client:
        await client.wait_for_tools("booker")
        first = await client.session.call_tool("booker", {"message": "book"})
        structured: Any = first.structured_content
        assert structured["state"] == "input-required" and "book({'city': 'Oslo'})" in _text(first)
        second = await client.session.call_tool("booker", {"message": "yes", "task_id": structured["task_id"]})
        assert _text(second) == "result: booked Oslo"
