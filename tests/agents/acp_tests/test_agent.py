"""An ACP agent (written with the ACP SDK) served as a mesh agent, on the real broker."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from agents import Agent, AgentSettings, Reply
from agents.acp import ClientPolicy
from mesh.a2a import DataPart, Message, Task, TaskState, TaskStatusUpdateEvent, get_text_from_message
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from tests.agents.acp_agents import SCRIPT, coder
from tests.conftest import ServeAgent
from tests.mesh.cli_process import mesh, start_mesh


def text(task: Task) -> str:
    message = task.status.message
    return get_text_from_message(message) if message is not None else ""


@pytest.fixture
async def client(broker_settings: BrokerSettings, namespace: str) -> Any:
    async with MeshClient.connect(broker_settings, namespace) as client:
        yield client


async def test_mesh_send_reaches_an_acp_agent_configured_in_yaml(
    broker_url: str, namespace: str, tmp_path: Path
) -> None:
    config = tmp_path / "coder.yaml"
    config.write_text(
        f"namespace: {namespace}\n"
        "agents:\n"
        "  - name: coder\n"
        "    acp:\n"
        f"      command: [{sys.executable}, {SCRIPT}]\n"
        "      policy: {read: true, write: false}\n"
    )
    service = await start_mesh("run", str(config), "--broker", broker_url)
    try:
        await service.wait_for_line("ACP agent coder")
        sent = await mesh("send", "coder", "echo hello mesh", "--broker", broker_url, "--namespace", namespace)
        assert (sent.code, sent.stdout.strip()) == (0, "hello mesh"), sent.stderr
    finally:
        assert await service.stop() == 0


async def test_stream_shows_tool_calls_as_data_parts_with_their_status(
    serve_agent: ServeAgent, client: MeshClient, tmp_path: Path
) -> None:
    await serve_agent(coder(tmp_path))
    items = [item async for item in client.stream("coder", "echo hi there")]
    *events, final = items
    assert isinstance(final, Task) and final.status.state is TaskState.completed
    assert text(final) == "hi there"
    tools = [
        part.data["toolCall"]
        for event in events
        if isinstance(event, TaskStatusUpdateEvent) and event.status.message is not None
        for part in event.status.message.parts
        if isinstance(part, DataPart) and "toolCall" in part.data
    ]
    assert [(t["toolCallId"], t["status"]) for t in tools] == [("t1", "pending"), ("t1", "completed")]
    assert tools[0]["title"] == "echo"


async def test_each_context_is_one_acp_session(serve_agent: ServeAgent, client: MeshClient, tmp_path: Path) -> None:
    await serve_agent(coder(tmp_path))
    first = await client.send("coder", "count", context_id="ctx-a")
    again = await client.send("coder", "count", context_id="ctx-a")
    other = await client.send("coder", "count", context_id="ctx-b")
    assert [text(t) for t in (first, again, other)] == ["1", "2", "1"]


async def test_cancel_sends_session_cancel(serve_agent: ServeAgent, client: MeshClient, tmp_path: Path) -> None:
    await serve_agent(coder(tmp_path))
    stream = client.stream("coder", "slow 400", context_id="ctx-c")
    task_id = None
    async for item in stream:
        if isinstance(item, TaskStatusUpdateEvent) and item.status.message is not None:
            task_id = item.task_id
            break
    assert task_id is not None
    canceled = await client.cancel_task("coder", task_id)
    assert canceled.status.state is TaskState.canceled
    await stream.aclose()
    # The next prompt of the context waits for the canceled turn to end on the agent.
    assert text(await client.send("coder", "count", context_id="ctx-c")) == "2"
    assert (tmp_path / "marker").read_text() == "cancelled"


async def test_permission_requests_and_files_are_answered_by_the_policy(
    serve_agent: ServeAgent, client: MeshClient, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("inside the directory")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"
    outside.write_text("secret")
    await serve_agent(coder(tmp_path))
    answers = {
        prompt: text(await client.send("coder", prompt))
        for prompt in (
            "permission read",
            "permission edit",
            "permission execute",
            "permission other",
            f"read {tmp_path / 'notes.txt'}",
            f"read {outside}",
            f"write {tmp_path / 'new.txt'}",
        )
    }
    assert answers["permission read"] == "yes"
    assert answers["permission edit"] == answers["permission execute"] == answers["permission other"] == "no"
    assert answers[f"read {tmp_path / 'notes.txt'}"] == "inside the directory"
    assert answers[f"read {outside}"].startswith("refused:") and "outside" in answers[f"read {outside}"]
    assert answers[f"write {tmp_path / 'new.txt'}"].startswith("refused:")
    assert not (tmp_path / "new.txt").exists()


async def test_terminals_are_refused_by_default(serve_agent: ServeAgent, client: MeshClient, tmp_path: Path) -> None:
    await serve_agent(coder(tmp_path))
    answer = text(await client.send("coder", "terminal echo hi"))
    assert answer.startswith("refused:") and "terminal: true" in answer


async def test_terminals_run_in_the_directory_when_the_policy_allows_them(
    serve_agent: ServeAgent, client: MeshClient, tmp_path: Path
) -> None:
    await serve_agent(coder(tmp_path, policy=ClientPolicy(directory=tmp_path, terminal=True)))
    assert text(await client.send("coder", "terminal echo hi")) == "0: hi"
    assert text(await client.send("coder", "terminal pwd")) == f"0: {tmp_path.resolve()}"
    assert text(await client.send("coder", "permission execute")) == "yes"


async def test_writes_are_allowed_when_the_policy_says_so(
    serve_agent: ServeAgent, client: MeshClient, tmp_path: Path
) -> None:
    await serve_agent(coder(tmp_path, policy=ClientPolicy(directory=tmp_path, write=True)))
    assert text(await client.send("coder", "permission edit")) == "yes"
    assert text(await client.send("coder", f"write {tmp_path / 'new.txt'}")) == "wrote"
    assert (tmp_path / "new.txt").read_text() == "written"


async def test_a_crash_fails_the_task_at_once_and_the_agent_is_restarted(
    serve_agent: ServeAgent, client: MeshClient, tmp_path: Path
) -> None:
    await serve_agent(coder(tmp_path))
    crashed = await client.send("coder", "crash")
    assert crashed.status.state is TaskState.failed
    assert "exited with status 3" in text(crashed) and "crashing on purpose" in text(crashed)
    again = await client.send("coder", "echo back again")
    assert (again.status.state, text(again)) == (TaskState.completed, "back again")


async def test_refusal_fails_the_task(serve_agent: ServeAgent, client: MeshClient, tmp_path: Path) -> None:
    await serve_agent(coder(tmp_path))
    refused = await client.send("coder", "refuse")
    assert refused.status.state is TaskState.failed and "refused" in text(refused)


class Delegator(Agent):
    name = "lead"

    async def handle(self, message: Message, ctx: Any) -> Reply:
        task = await ctx.delegate("coder", get_text_from_message(message))
        return Reply(f"coder said: {text(task)}")


async def test_another_agent_delegates_to_the_acp_agent(
    serve_agent: ServeAgent, client: MeshClient, tmp_path: Path
) -> None:
    await serve_agent(coder(tmp_path))
    await serve_agent(Delegator(), AgentSettings())
    await client.wait_for_agent("coder", timeout=5)
    answer = await client.send("lead", "echo delegated")
    assert text(answer) == "coder said: delegated"
