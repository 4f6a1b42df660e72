"""The examples of the README and of every docs/ page, run in order as a new user would, print
what the page says.

With ``mesh up`` running (on a broker of the test's own, the gateway on a free port; one per
page), every ``console`` block of the page runs in order, in a fresh directory: ``$ COMMAND`` lines run in
bash (a command ending in ``&`` stays in the background until the test ends), and the lines after
one are what it must print, stdout and stderr as a terminal shows them. ``<TASK_ID>`` stands for
a task id (the last one printed is what a later ``<TASK_ID>`` in a command means), ``<ID>`` for
any other id. The files the examples need (``weather.py``, ``agents.yaml``, ``a2a_client.py``)
are the page's own blocks that start with ``# <file name>``.

A block whose info string is ``console illustrative`` is not run: it shows output of a machine
or a set-up the test cannot reproduce (the page says why), and GitHub still renders it as a
console session. Only a block opened by exactly ```` ```console ```` is run.

``mesh up`` runs as a new user runs it: secured by default (it starts its own Mosquitto under
the mesh's rules, here on a free port); ``MESH_API_KEY`` is set as its banner says, for the
examples that call the HTTP gateway. The commands pass no ``--broker`` and no credentials:
they find the broker of ``mesh up`` and their credentials through its state file, and ``mesh
run`` gets broker users for its components from it.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mesh.brokertools.localbroker import free_port
from tests.mesh.cli_process import Service, start_mesh

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent  # the venv the tests run in: its mesh, its python
TASK_ID = r"[0-9a-f]{32}"
FILE_BLOCK = re.compile(r"```(?:python|yaml)\n# (?P<name>[\w.]+)[^\n]*\n(?P<body>.*?)```", re.S)
CONSOLE_BLOCK = re.compile(r"```console\n(?P<body>.*?)```", re.S)


@dataclass
class Step:
    command: str
    expected: list[str] = field(default_factory=list)


def readme_steps(text: str) -> list[Step]:
    steps: list[Step] = []
    for block in CONSOLE_BLOCK.finditer(text):
        for line in block["body"].splitlines():
            if line.startswith("$ "):
                steps.append(Step(line[2:]))
            else:
                steps[-1].expected.append(line)
    return steps


def readme_files(text: str) -> dict[str, str]:
    return {match["name"]: match["body"] for match in FILE_BLOCK.finditer(text)}


def line_pattern(expected: str) -> re.Pattern[str]:
    pattern = re.escape(expected).replace(re.escape("<TASK_ID>"), TASK_ID).replace(re.escape("<ID>"), r"[\w-]+")
    return re.compile(pattern + r"\Z")


def check_output(step: Step, output: str) -> None:
    printed = output.rstrip("\n").splitlines()
    mismatch = f"`{step.command}` printed:\n{output}\nthe page says:\n" + "\n".join(step.expected)
    assert len(printed) == len(step.expected), mismatch
    for line, expected in zip(printed, step.expected, strict=True):
        assert line_pattern(expected).match(line), mismatch


@pytest.fixture
async def mesh_up(tmp_path: Path) -> AsyncIterator[tuple[Service, dict[str, str]]]:
    broker_url = f"mqtt://localhost:{free_port()}"  # nothing there: mesh up starts its secured broker
    http_port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("MESH_")},
        "MESH_STATE_DIR": str(tmp_path / "state"),
        "MESH_HTTP_PORT": str(http_port),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",  # stdout and stderr interleave as on a terminal
    }
    up = await start_mesh("up", "--broker", broker_url, **{k: env[k] for k in ("MESH_STATE_DIR", "MESH_HTTP_PORT")})
    try:
        await up.wait_for_line("mesh up: ready", stream="stdout", timeout=60)
        assert any("under the mesh's rules" in line for line in up.stdout_lines), up.output
        # The gateway's API key, as the banner tells the user to export it.
        exports = [m for line in up.stdout_lines if (m := re.search(r'export MESH_API_KEY="\$\(cat (.+)\)"', line))]
        assert exports, up.output
        env["MESH_API_KEY"] = Path(exports[0][1]).read_text(encoding="utf-8").strip()
        yield up, env
    finally:
        await up.stop()


def runnable_pages() -> list[Path]:
    return [page for page in PAGES if readme_steps(page.read_text(encoding="utf-8"))]


def test_the_readme_and_the_docs_have_examples_to_run() -> None:
    assert README in runnable_pages()
    assert len(readme_steps(README.read_text(encoding="utf-8"))) >= 8
    illustrative = re.compile(r"^```console illustrative$", re.M)
    assert readme_steps("```console illustrative\n$ mesh send nowhere x\n```\n") == []
    for page in PAGES:  # every page that shows output it does not run says why, near the block
        text = page.read_text(encoding="utf-8")
        if illustrative.search(text):
            assert "illustrative" in prose_only(text), f"{page.name}: say why its examples are not run"


def prose_only(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


@pytest.mark.parametrize("page", runnable_pages(), ids=lambda page: page.name)
@pytest.mark.timeout(300)  # a dozen commands, each a new process, on a machine that may be busy
async def test_the_examples_print_what_the_page_says(
    page: Path, mesh_up: tuple[Service, dict[str, str]], tmp_path: Path
) -> None:
    up, env = mesh_up
    text = page.read_text(encoding="utf-8")
    project = tmp_path / "project"  # not the repository: the examples work from any directory
    project.mkdir()
    gateway = f"127.0.0.1:{env['MESH_HTTP_PORT']}"
    for name, body in readme_files(text).items():
        (project / name).write_text(body.replace("127.0.0.1:8080", gateway))
    steps = readme_steps(text)
    background: list[asyncio.subprocess.Process] = []
    task_id = ""
    try:
        for step in steps:
            command = step.command.replace("<TASK_ID>", task_id).replace(".venv/bin/", f"{BIN}/")
            if command.rstrip().endswith("&"):
                proc = await asyncio.create_subprocess_exec(
                    "bash",
                    "-c",
                    f"exec {command.rstrip().removesuffix('&')}",
                    cwd=project,
                    env=env,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                    start_new_session=True,
                )
                background.append(proc)
                await _wait_for_ready(proc)
                continue
            proc = await asyncio.create_subprocess_exec(
                "bash",
                "-c",
                command,
                cwd=project,
                env=env,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            out, _ = await asyncio.wait_for(proc.communicate(), 60)
            output = out.decode()
            assert proc.returncode == 0, f"`{command}` exited {proc.returncode}:\n{output}"
            check_output(step, output)
            task_id = (re.findall(TASK_ID, output) or [task_id])[-1]
    finally:
        for proc in background:
            if proc.returncode is None:
                os.killpg(proc.pid, signal.SIGTERM)
            await proc.wait()
    assert "Traceback" not in up.output


async def _wait_for_ready(proc: asyncio.subprocess.Process) -> None:
    """Until ``mesh run`` says it runs (its last start-up line), or fails."""
    assert proc.stderr is not None
    seen: list[str] = []
    async with asyncio.timeout(60):
        while line := (await proc.stderr.readline()).decode():
            seen.append(line)
            if "Ctrl-C stops" in line:
                asyncio.get_running_loop().create_task(proc.stderr.read())  # keep the pipe drained
                return
    raise AssertionError("the background command ended before it was ready:\n" + "".join(seen))
