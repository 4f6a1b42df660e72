"""``mesh acp``: an editor (the ACP SDK's client) reaching mesh agents on the real broker."""

from __future__ import annotations

import asyncio
import json
import socket
import sys
from asyncio.subprocess import PIPE
from pathlib import Path
from typing import Any

import pytest
from acp import RequestError, image_block, text_block

from agents import Agent, AgentSettings, InputRequired, Reply
from agents.builtin.countdown import CountdownAgent
from agents.builtin.echo import EchoAgent
from agents.builtin.orchestrator import OrchestratorAgent
from mesh.a2a import get_text_from_message
from tests.conftest import ServeAgent
from tests.gateways.acp_client import mesh_acp
from tests.gateways.chat_agents import booker
from tests.mesh.cli_process import mesh_env


class Greeter(Agent):
    """Asks for a name, then greets: input-required, then the continuation."""

    name = "greeter"

    async def handle(self, message, ctx):  # type: ignore[no-untyped-def]
        answer = yield InputRequired("What is your name?")
        yield Reply(f"Hello, {get_text_from_message(answer)}!")


async def test_initialize_new_session_and_a_prompt_to_echo(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(EchoAgent())
    await serve_agent(CountdownAgent(interval_s=0.01))
    async with mesh_acp(broker_url, namespace, "echo", tmp_path) as editor:
        init = await editor.initialize()
        assert init.protocol_version == 1
        assert init.agent_info is not None and init.agent_info.name == "echo"
        session = await editor.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        assert session.modes is not None and session.modes.current_mode_id == "echo"
        # The modes are the agents seen so far, the command line's first (the rest may still arrive).
        assert session.modes.available_modes[0].id == "echo"
        result = await editor.conn.prompt(session_id=session.session_id, prompt=[text_block("hi there")])
        assert result.stop_reason == "end_turn"
        assert "".join(editor.client.texts()) == "hi there"
    assert "Traceback" not in editor.stderr_text()


async def test_countdown_streams_its_chunks_in_order(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(CountdownAgent(interval_s=0.01))
    async with mesh_acp(broker_url, namespace, "countdown", tmp_path) as editor:
        await editor.initialize()
        session = await editor.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        result = await editor.conn.prompt(session_id=session.session_id, prompt=[text_block("3")])
        assert result.stop_reason == "end_turn"
        assert editor.client.texts("agent_thought_chunk") == ["3...", "2...", "1..."]
        assert editor.client.texts() == ["3\n", "2\n", "1\n", "0\n", "Liftoff! Counted down from 3."]


async def test_input_required_ends_the_turn_and_the_next_prompt_continues_the_task(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(Greeter())
    async with mesh_acp(broker_url, namespace, "greeter", tmp_path) as editor:
        await editor.initialize()
        session = await editor.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        first = await editor.conn.prompt(session_id=session.session_id, prompt=[text_block("hello")])
        assert first.stop_reason == "end_turn"
        assert editor.client.texts() == ["What is your name?"]
        second = await editor.conn.prompt(session_id=session.session_id, prompt=[text_block("Ada")])
        assert second.stop_reason == "end_turn"
        assert editor.client.texts() == ["What is your name?", "Hello, Ada!"]


async def test_cancel_mid_stream_ends_the_turn_cancelled(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(CountdownAgent(interval_s=0.2))
    async with mesh_acp(broker_url, namespace, "countdown", tmp_path) as editor:
        await editor.initialize()
        session = await editor.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        prompt = asyncio.create_task(editor.conn.prompt(session_id=session.session_id, prompt=[text_block("50")]))
        await editor.client.wait_for("agent_thought_chunk")
        await editor.conn.cancel(session_id=session.session_id)
        result = await asyncio.wait_for(prompt, 30)
        assert result.stop_reason == "cancelled"
        assert len(editor.client.texts("agent_thought_chunk")) < 50


async def test_set_mode_switches_the_agent(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(EchoAgent())
    await serve_agent(CountdownAgent(interval_s=0.01))
    async with mesh_acp(broker_url, namespace, "echo", tmp_path) as editor:
        await editor.initialize()
        session = await editor.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        await editor.conn.set_session_mode(session_id=session.session_id, mode_id="countdown")
        await editor.client.wait_for("current_mode_update")
        result = await editor.conn.prompt(session_id=session.session_id, prompt=[text_block("1")])
        assert result.stop_reason == "end_turn"
        assert editor.client.texts()[-1] == "Liftoff! Counted down from 1."
        with pytest.raises(RequestError) as refused:
            await editor.conn.set_session_mode(session_id=session.session_id, mode_id="nobody")
        assert "unknown agent 'nobody'" in str(refused.value)


async def test_an_unknown_agent_is_a_clear_error(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(EchoAgent())
    async with mesh_acp(broker_url, namespace, "nosuch", tmp_path, "--wait", "0.5") as editor:
        with pytest.raises(RequestError) as refused:
            await editor.initialize()
        assert refused.value.code == -32002
        assert "unknown agent 'nosuch'" in str(refused.value) and "echo" in str(refused.value)
    assert "Traceback" not in editor.stderr_text()


async def test_an_unreachable_broker_is_a_clear_error(namespace: str, tmp_path: Path) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with mesh_acp(f"mqtt://127.0.0.1:{port}", namespace, "echo", tmp_path) as editor:
        with pytest.raises(RequestError) as refused:
            await asyncio.wait_for(editor.initialize(), 30)
        assert "cannot reach the mesh" in str(refused.value)
    assert "Traceback" not in editor.stderr_text()


async def test_failed_task_is_a_jsonrpc_error_with_the_agents_message(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    class Broken(Agent):
        name = "broken"

        async def handle(self, message, ctx):  # type: ignore[no-untyped-def]
            raise ValueError("the disk is full")

    await serve_agent(Broken(), AgentSettings())
    async with mesh_acp(broker_url, namespace, "broken", tmp_path) as editor:
        await editor.initialize()
        session = await editor.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        with pytest.raises(RequestError) as failed:
            await editor.conn.prompt(session_id=session.session_id, prompt=[text_block("x")])
        assert "the disk is full" in str(failed.value)


async def test_sessions_are_listed_and_loaded_with_their_history(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(EchoAgent())
    async with mesh_acp(broker_url, namespace, "echo", tmp_path) as editor:
        await editor.initialize()
        session = await editor.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        await editor.conn.prompt(session_id=session.session_id, prompt=[text_block("remember me")])
    async with mesh_acp(broker_url, namespace, "echo", tmp_path) as later:  # the editor restarted
        init = await later.initialize()
        assert init.agent_capabilities is not None and init.agent_capabilities.load_session
        listed = await later.conn.list_sessions(cwd=str(tmp_path))
        assert [(s.session_id, s.title) for s in listed.sessions] == [(session.session_id, "remember me")]
        await later.conn.load_session(cwd=str(tmp_path), session_id=session.session_id, mcp_servers=[])
        replay = [(u.session_update, u.content.text) for u in later.client.updates if hasattr(u, "content")]
        assert replay == [("user_message_chunk", "remember me"), ("agent_message_chunk", "remember me")]
        result = await later.conn.prompt(session_id=session.session_id, prompt=[text_block("and more")])
        assert result.stop_reason == "end_turn" and later.client.texts()[-1] == "and more"


async def test_an_image_is_refused_when_the_agents_card_does_not_accept_images(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(EchoAgent())
    async with mesh_acp(broker_url, namespace, "echo", tmp_path) as editor:
        init = await editor.initialize()
        assert init.agent_capabilities is not None and init.agent_capabilities.prompt_capabilities is not None
        assert init.agent_capabilities.prompt_capabilities.image is False
        session = await editor.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        with pytest.raises(RequestError) as refused:
            await editor.conn.prompt(
                session_id=session.session_id,
                prompt=[image_block("aGk=", "image/png")],  # type: ignore[list-item]
            )
        assert "does not accept images" in str(refused.value)


async def test_a_delegation_shows_as_a_tool_call(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(CountdownAgent(interval_s=0.01))
    await serve_agent(OrchestratorAgent())  # last: the countdown's retained card reaches it first
    async with mesh_acp(broker_url, namespace, "orchestrator", tmp_path) as editor:
        await editor.initialize()
        session = await editor.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        result = await editor.conn.prompt(session_id=session.session_id, prompt=[text_block("countdown 2")])
        assert result.stop_reason == "end_turn"
        [call] = [u for u in editor.client.updates if u.session_update == "tool_call"]
        assert call.title == "Delegated to countdown" and call.status == "in_progress"
        updates = [u for u in editor.client.updates if u.session_update == "tool_call_update"]
        assert {u.tool_call_id for u in updates} == {call.tool_call_id}
        assert updates[-1].status == "completed"
        assert "countdown: Liftoff! Counted down from 2." in "".join(editor.client.texts())


async def test_an_agent_gone_since_the_session_began_is_a_clear_error(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    echo = await serve_agent(EchoAgent())
    async with mesh_acp(broker_url, namespace, "echo", tmp_path, "--wait", "0.5") as editor:
        await editor.initialize()
        session = await editor.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        await echo.stop()
        with pytest.raises(RequestError) as gone:
            await asyncio.wait_for(
                editor.conn.prompt(session_id=session.session_id, prompt=[text_block("anyone?")]), 30
            )
        assert "echo" in str(gone.value)


async def test_stdout_carries_protocol_lines_only(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(EchoAgent())
    args = ["acp", "echo", "--broker", broker_url, "--namespace", namespace, "--log-level", "debug"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mesh.cli", *args, stdin=PIPE, stdout=PIPE, stderr=PIPE, env=mesh_env()
    )
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": "/", "mcpServers": []}},
        {"jsonrpc": "2.0", "id": 3, "method": "no/such/method", "params": {}},
    ]
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(line) + "\n" for line in lines).encode() + b"this is not json\n")
    by_id: dict[Any, Any] = {}
    async with asyncio.timeout(30):
        while len(by_id) < 4:  # the three answers and the parse error
            answer = json.loads(await proc.stdout.readline())  # every line is JSON-RPC
            assert answer["jsonrpc"] == "2.0"
            by_id[answer.get("id")] = answer
    proc.stdin.close()
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0 and out == b"", err.decode()
    assert by_id[1]["result"]["agentInfo"]["name"] == "echo"
    assert by_id[3]["error"]["code"] == -32601
    assert by_id[None]["error"]["code"] == -32700  # the line that is no JSON
    assert b"skipped an ACP line that is no JSON" in err and b"Traceback" not in err  # logs: stderr


async def test_a_tool_approval_is_a_permission_request_and_the_turn_goes_on(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(booker())
    async with mesh_acp(broker_url, namespace, "booker", tmp_path) as editor:
        await editor.initialize()
        session = await editor.conn.new_session(cwd=str(tmp_path), mcp_servers=[])
        editor.client.permission = "allow"
        result = await editor.conn.prompt(session_id=session.session_id, prompt=[text_block("book")])
        assert result.stop_reason == "end_turn"
        [asked] = editor.client.permission_requests
        assert asked["tool_call"].tool_call_id == "b1" and asked["tool_call"].raw_input == {"city": "Oslo"}
        assert [o.kind for o in asked["options"]] == ["allow_once", "reject_once"]
        assert editor.client.texts()[-1] == "result: booked Oslo"
        editor.client.permission = "reject"
        result = await editor.conn.prompt(session_id=session.session_id, prompt=[text_block("book again")])
        assert result.stop_reason == "end_turn"
        assert editor.client.texts()[-1] == "result: The user denied this call: rejected in the editor"
    assert "Traceback" not in editor.stderr_text()
