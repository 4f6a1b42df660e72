"""``mesh task list`` (the mesh's tasks/list), the task id printed first, the progress line, and the
CLI under per-user broker rules with nothing but ``--broker mqtt://user:pw@...``."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import shutil
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from agents.builtin.countdown import CountdownAgent
from agents.builtin.echo import EchoAgent
from agents.service import AgentService
from mesh.a2a import InvalidParams, TaskListParams, TaskState
from mesh.broker import BrokerSettings
from mesh.brokertools.brokerfiles import local_broker_config, write_broker_files
from mesh.brokertools.brokerrules import Identity
from mesh.brokertools.localbroker import LocalBroker
from mesh.cli.broker_commands import check_broker_log
from mesh.client import MeshClient
from mesh.config.credentials import password_for
from tests.agents.service_agents import Decider
from tests.conftest import ServeAgent
from tests.mesh.cli_process import mesh, mesh_env, start_mesh


def env_of(broker_url: str, namespace: str) -> dict[str, str]:
    return {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}


async def decided(client: MeshClient, *texts_and_contexts: tuple[str, str]) -> list[str]:
    """Send each text to the decider in its context; the task ids, in order."""
    ids = []
    for text, context in texts_and_contexts:
        task = await client.send("decider", text, context_id=context)
        ids.append(getattr(task, "id", ""))
    return ids


# ---------------------------------------------------------------------- tasks/list


async def test_tasks_list_pages_newest_first_and_filters(
    serve_agent: ServeAgent, broker_settings: BrokerSettings, namespace: str
) -> None:
    await serve_agent(Decider())
    async with MeshClient.connect(broker_settings, namespace) as client:
        ids = await decided(client, ("a", "c1"), ("reject", "c1"), ("b", "c2"), ("auth", "c2"), ("c", "c2"))
        everything = await client.list_tasks("decider")
        assert [t.id for t in everything.tasks] == ids[::-1]  # newest first
        assert (everything.total_size, everything.next_page_token) == (5, "")
        assert all(t.artifacts is None for t in everything.tasks)  # not without includeArtifacts

        completed = await client.list_tasks("decider", status=TaskState.completed)
        assert [t.id for t in completed.tasks] == [ids[4], ids[2], ids[0]]
        in_c2 = await client.list_tasks("decider", context_id="c2")
        assert [t.id for t in in_c2.tasks] == [ids[4], ids[3], ids[2]]
        both = await client.list_tasks("decider", context_id="c2", status=TaskState.auth_required)
        assert [t.id for t in both.tasks] == [ids[3]]

        first = await client.list_tasks("decider", page_size=2, history_length=0)
        assert [t.id for t in first.tasks] == ids[4:2:-1] and first.total_size == 5 and first.next_page_token
        assert all(not t.history for t in first.tasks)
        second = await client.list_tasks("decider", page_size=2, page_token=first.next_page_token)
        third = await client.list_tasks("decider", page_size=2, page_token=second.next_page_token)
        assert [t.id for t in second.tasks + third.tasks] == ids[2::-1] and third.next_page_token == ""

        with pytest.raises(InvalidParams, match="pageToken is not a token this agent issued"):
            await client.list_tasks("decider", page_token="bogus")


def test_tasks_list_pages_are_bounded() -> None:
    assert TaskListParams().page_size == 50
    with pytest.raises(ValueError, match="less than or equal to 100"):
        TaskListParams(page_size=101)


async def test_task_list_command_filters_by_state_and_context(
    serve_agent: ServeAgent, broker_settings: BrokerSettings, broker_url: str, namespace: str
) -> None:
    await serve_agent(Decider())
    async with MeshClient.connect(broker_settings, namespace) as client:
        ids = await decided(client, ("a", "c1"), ("reject", "c1"), ("b", "c2"))
    env = env_of(broker_url, namespace)

    listed = await mesh("task", "list", "decider", **env)
    assert listed.code == 0, listed.stderr
    lines = listed.stdout.splitlines()
    assert lines[0].split() == ["TASK", "STATE", "CONTEXT", "UPDATED", "MESSAGE"]
    assert [line.split()[:3] for line in lines[1:]] == [
        [ids[2], "completed", "c2"],
        [ids[1], "rejected", "c1"],
        [ids[0], "completed", "c1"],
    ]

    rejected = await mesh("task", "list", "decider", "--state", "rejected", "--json", **env)
    assert rejected.code == 0, rejected.stderr
    assert [(t["id"], t["status"]["state"]) for t in json.loads(rejected.stdout)] == [(ids[1], "rejected")]

    in_c1 = await mesh("task", "list", "decider", "--context", "c1", "--state", "completed", "-n", namespace,
                       MESH_BROKER_URL=broker_url)  # fmt: skip
    assert [line.split()[0] for line in in_c1.stdout.splitlines()[1:]] == [ids[0]], in_c1.stderr

    limited = await mesh("task", "list", "decider", "--limit", "2", **env)
    assert len(limited.stdout.splitlines()) == 3 and "(2 of 3 tasks; --limit shows more)" in limited.stderr

    none = await mesh("task", "list", "decider", "--context", "nowhere", **env)
    assert (none.code, none.stdout) == (0, "") and "has no tasks in context 'nowhere'" in none.stderr

    bad = await mesh("task", "list", "decider", "--state", "finished", **env)
    assert bad.code == 2 and "invalid choice: 'finished'" in bad.stderr

    for command in (["list", "decidr"], ["get", "decidr", ids[0]], ["cancel", "decidr", ids[0]]):
        typo = await mesh("task", *command, **env)
        assert typo.code == 4 and "unknown agent 'decidr'" in typo.stderr, typo.stderr
        assert "did you mean 'decider'?" in typo.stderr


# ---------------------------------------------------------------------- the task id first, progress


async def test_the_task_id_comes_first(serve_agent: ServeAgent, broker_url: str, namespace: str) -> None:
    await serve_agent(CountdownAgent())
    env = env_of(broker_url, namespace)
    plain = await mesh("send", "countdown", "1", **env)
    assert plain.code == 0 and plain.stdout.startswith("Liftoff! Counted down from 1.\n"), plain.stderr
    first = plain.stderr.splitlines()[0]
    assert first.startswith("task ")
    task_id = first.removeprefix("task ")
    got = await mesh("task", "get", "countdown", task_id, "--json", **env)  # the id is the task's
    assert json.loads(got.stdout)["status"]["state"] == "completed", got.stderr

    streamed = await mesh("send", "countdown", "1", "--stream", **env)
    lines = streamed.stdout.splitlines()
    assert lines[0].startswith("[task ") and lines[0].endswith("]"), streamed.stdout
    assert lines[-1] == f"{lines[0]} completed"  # the same id the final Task carries

    as_json = await mesh("send", "countdown", "1", "--json", **env)
    assert json.loads(as_json.stdout)["id"] and "task " not in as_json.stderr  # the JSON names it


def run_on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """``mesh ARGS`` with stderr on a pseudo-terminal; (exit code, stdout, what the terminal showed)."""
    import subprocess

    controller, terminal = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mesh.cli", *args],
            stdout=subprocess.PIPE,
            stderr=terminal,
            env=mesh_env(**env),
        )
        os.close(terminal)
        shown = b""
        while True:
            try:
                chunk = os.read(controller, 4096)
            except OSError:  # the process closed the terminal
                break
            if not chunk:
                break
            shown += chunk
        out, _ = proc.communicate(timeout=30)
    finally:
        os.close(controller)
    return proc.returncode, out.decode(), shown.decode(errors="replace")


async def test_a_progress_line_on_a_terminal_only(serve_agent: ServeAgent, broker_url: str, namespace: str) -> None:
    await serve_agent(CountdownAgent())
    env = env_of(broker_url, namespace)
    code, out, shown = await asyncio.to_thread(run_on_a_terminal, ["send", "countdown", "2"], env)
    assert code == 0 and out.startswith("Liftoff! Counted down from 2.\n"), shown
    assert "waiting for countdown… " in shown and " s, working" in shown  # the state from the agent's progress
    assert shown.rstrip("\r\n").endswith("\r\x1b[K")  # erased at the end
    # The task id line erases the progress line before it: never "… s, senttask <id>".
    task_line = re.search(r"(.)task [0-9a-f-]{8,}\r?\n", shown, re.S)
    assert task_line is not None and task_line.group(1) == "\x1b[K"[-1], repr(shown)
    assert "senttask" not in shown and "workingtask" not in shown
    piped = await mesh("send", "countdown", "1", **env)
    assert "waiting for" not in piped.stderr and "\x1b" not in piped.stderr


# ---------------------------------------------------------------------- per-user broker rules


@pytest.fixture
def ruled_broker(make_broker: Callable[..., LocalBroker], broker_dir: Path, namespace: str) -> Iterator[LocalBroker]:
    """A broker of the test's own under the generated rules of agent ``echo`` and client ``alice``."""
    identities = [Identity("agent", "echo", namespace), Identity("client", "alice", namespace)]
    files = write_broker_files(broker_dir, identities)
    extra_config, copied = local_broker_config(files)
    try:
        broker = make_broker(extra_config)
        check_broker_log(broker, files.dynsec)
        yield broker
    finally:
        if copied is not None:
            shutil.rmtree(copied, ignore_errors=True)


async def test_the_cli_works_under_per_user_rules_with_only_a_broker_url(
    ruled_broker: LocalBroker, broker_dir: Path, namespace: str
) -> None:
    passwords = str(broker_dir / "credentials")
    agent_settings = BrokerSettings.from_url(ruled_broker.url, password_file=passwords).for_identity("echo")
    service = AgentService(EchoAgent(), broker=agent_settings, namespace=namespace)
    await service.start()
    try:
        user_url = ruled_broker.url.replace("mqtt://", f"mqtt://alice:{quote(password_for(passwords, 'alice'))}@")
        sent = await mesh("send", "echo", "under rules", "--broker", user_url, "-n", namespace, "--timeout", "10")
        assert (sent.code, sent.stdout) == (0, "under rules\n"), sent.stderr
        task_id = sent.stderr.splitlines()[0].removeprefix("task ")
        listed = await mesh("task", "list", "echo", "--broker", user_url, "-n", namespace)
        assert listed.code == 0 and task_id in listed.stdout, listed.stderr
        streamed = await mesh("send", "echo", "streamed", "--stream", "--broker", user_url, "-n", namespace)
        assert streamed.code == 0 and "[completed]" in streamed.stdout, streamed.stderr
        # A client id the rules do not give alice (they bind her user to ids of her own): refused
        # at once, by the CONNACK, not a hang.
        other = await mesh(
            "send", "echo", "x", "--broker", user_url, "-n", namespace, "--client-id", "bob", "--timeout", "3"
        )
        assert other.code == 3 and "refused the connection of broker user 'alice': Not authorized" in other.stderr, (
            other.stderr
        )
        bad = await mesh("send", "echo", "x", "--broker", user_url, "-n", namespace, "--client-id", "a/b")
        assert bad.code == 2 and "--client-id" in bad.stderr and "Traceback" not in bad.stderr
    finally:
        await service.stop()


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])
async def test_ctrl_c_cancels_the_task_and_says_so(
    serve_agent: ServeAgent, broker_settings: BrokerSettings, broker_url: str, namespace: str, stream: bool
) -> None:
    await serve_agent(CountdownAgent())
    env = env_of(broker_url, namespace)
    sending = await start_mesh("send", "countdown", "30", *(["--stream"] if stream else []), **env)
    line = await sending.wait_for_line("task ", stream="stdout" if stream else "stderr")
    task_id = line.split("task ")[1].strip(" []\n")
    assert await sending.stop(signal.SIGINT) == 130
    assert f"mesh: interrupted: task {task_id} canceled" in sending.output, sending.output
    assert "Traceback" not in sending.output
    async with MeshClient.connect(broker_settings, namespace) as client:
        assert (await client.get_task("countdown", task_id)).status.state is TaskState.canceled
