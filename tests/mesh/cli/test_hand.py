"""The command line in the hand: message text from words, stdin or a file; names suggested;
--version; a closed pipe ends it quietly."""

from __future__ import annotations

import asyncio
import shlex
import signal
import sys
from pathlib import Path

from agents.builtin.countdown import CountdownAgent
from agents.builtin.echo import EchoAgent
from mesh.version import __version__
from tests.conftest import ServeAgent
from tests.mesh.cli_process import mesh, mesh_env, start_mesh


async def test_send_takes_several_words_stdin_or_a_file(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(EchoAgent())
    env = {"MESH_BROKER_URL": broker_url, "MESH_NAMESPACE": namespace}
    words = await mesh("send", "echo", "hello", "big", "world", **env)
    assert (words.code, words.stdout) == (0, "hello big world\n"), words.stderr

    long_text = "line one\n" + "x" * 50_000
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "mesh.cli", "send", "echo", "-",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=mesh_env(**env),
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(long_text.encode()), 30)
    assert (proc.returncode, out.decode()) == (0, long_text + "\n"), err.decode()

    text_file = tmp_path / "question.txt"
    text_file.write_text("from a file")
    from_file = await mesh("send", "echo", f"@{text_file}", **env)
    assert (from_file.code, from_file.stdout) == (0, "from a file\n"), from_file.stderr
    missing = await mesh("send", "echo", f"@{tmp_path / 'nope.txt'}", **env)
    assert missing.code == 2 and "cannot read the message text from" in missing.stderr
    assert "Traceback" not in missing.stderr


async def test_a_misspelled_agent_gets_a_suggestion(serve_agent: ServeAgent, broker_url: str, namespace: str) -> None:
    await serve_agent(EchoAgent())
    typo = await mesh("send", "ecko", "hi", "--wait", "0.5", MESH_BROKER_URL=broker_url, MESH_NAMESPACE=namespace)
    assert typo.code == 4 and "did you mean 'echo'?" in typo.stderr, typo.stderr


async def test_version() -> None:
    version = await mesh("--version")
    assert (version.code, version.stdout.strip()) == (0, f"mesh {__version__}")


async def test_a_closed_pipe_ends_the_command_quietly(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(CountdownAgent())
    command = shlex.join([sys.executable, "-m", "mesh.cli", "send", "countdown", "3", "--stream", "--json"])
    errors = tmp_path / "stderr.txt"
    proc = await asyncio.create_subprocess_shell(
        f"set -o pipefail; {command} 2>{errors} | head -1",
        stdout=asyncio.subprocess.PIPE,
        env=mesh_env(MESH_BROKER_URL=broker_url, MESH_NAMESPACE=namespace),
        executable="/bin/bash",
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    assert out.count(b"\n") == 1
    assert proc.returncode == 0, errors.read_text()
    assert "Traceback" not in errors.read_text() and "BrokenPipe" not in errors.read_text()


async def test_run_takes_a_namespace_over_the_files(broker_url: str, namespace: str, tmp_path: Path) -> None:
    config = tmp_path / "agents.yaml"
    config.write_text(
        f"namespace: elsewhere\nbroker: {broker_url}\nagents:\n  - class: agents.builtin.echo:EchoAgent\n"
    )
    run = await start_mesh("run", str(config), "--namespace", namespace)
    try:
        await run.wait_for_line("running agent echo")
        sent = await mesh("send", "echo", "here", MESH_BROKER_URL=broker_url, MESH_NAMESPACE=namespace)
        assert (sent.code, sent.stdout) == (0, "here\n"), sent.stderr
    finally:
        assert await run.stop(signal.SIGTERM) == 0, run.output
    bad = await mesh("run", str(config), "--namespace", "a/#")
    assert bad.code == 2 and "--namespace" in bad.stderr and "Traceback" not in bad.stderr
