"""``mesh send --approve``: an LLM agent's tool approvals answered from the command line."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from mesh.a2a import DataPart, Message, Role, Task, TaskState, TaskStatus
from mesh.cli.approvals import decide, pending_approvals
from tests.mesh.cli_process import mesh, start_mesh

SLOW_START_S = 120.0
WAITING = re.compile(r"task (\w+) waits for the approval of 1 tool call\(s\)")


async def test_mesh_send_approves_denies_and_answers_a_waiting_task(
    broker_url: str, namespace: str, tmp_path: Path
) -> None:
    config = tmp_path / "mesh.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            namespace: {namespace}
            broker: {broker_url}
            agents:
              - class: agents.builtin.echo:EchoAgent
              - name: careful
                llm: {{model: demo, peers: [echo], approve: ["peer:echo"], usage_store: ":memory:"}}
            """
        )
    )
    env = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
    run = await start_mesh("run", str(config))
    try:
        await run.wait_for_line("agent careful", timeout=SLOW_START_S)
        approved = await mesh("send", "careful", "echo hi", "--approve", "all", timeout=SLOW_START_S, **env)
        assert approved.code == 0 and "hi" in approved.stdout, approved.stderr
        denied = await mesh("send", "careful", "echo hi", "--approve", "none", timeout=SLOW_START_S, **env)
        assert denied.code == 0 and "denied from the command line" in denied.stdout, (denied.stdout, denied.stderr)
        waiting = await mesh("send", "careful", "echo hello", timeout=SLOW_START_S, **env)  # no terminal: it waits
        found = WAITING.search(waiting.stderr)
        assert waiting.code == 0 and found, waiting.stderr
        answered = await mesh("send", "careful", "--task", found[1], "--approve", "all", timeout=SLOW_START_S, **env)
        assert answered.code == 0 and "hello" in answered.stdout, answered.stderr
        streamed = await mesh("send", "careful", "echo yo", "--stream", "--approve", "all", timeout=SLOW_START_S, **env)
        lines = streamed.stdout.splitlines()
        assert streamed.code == 0 and lines[-1].endswith(" completed"), (streamed.stdout, streamed.stderr)
        assert any(line.startswith("[input-required]") for line in lines)  # the question, then the rest
        assert lines[-2].startswith("[completed]") and "yo" in lines[-2], streamed.stdout
    finally:
        await run.stop()


def test_ask_puts_each_call_to_the_user() -> None:
    calls = [
        {"type": "tool_approval", "tool_call_id": "a", "function_name": "transfer", "arguments": {"amount": 5}},
        {"type": "tool_approval", "tool_call_id": "b", "function_name": "delete", "arguments": {}},
    ]
    task = Task(
        id="t",
        context_id="c",
        status=TaskStatus(
            state=TaskState.input_required,
            message=Message(message_id="m", role=Role.agent, parts=[DataPart(data=c) for c in calls]),
        ),
    )
    assert pending_approvals(task) == calls
    questions: list[str] = []
    said = iter(["y\n", "too risky\n"])

    def ask(question: str) -> str:
        questions.append(question)
        return next(said)

    answers = decide(calls, "ask", agent="bank", ask=ask)
    assert questions[0] == 'bank wants to call transfer({"amount": 5}). Approve? [y/N] '
    assert answers == [
        {"type": "tool_approval_result", "tool_call_id": "a", "approved": True},
        {"type": "tool_approval_result", "tool_call_id": "b", "approved": False, "reason": "too risky"},
    ]
