"""The examples of the README and of every docs/ page work as written, run in order as a new user
would: commands print what the page says, configs load, code imports.

Every fenced block says what it is; tests/doc_blocks.py holds the table of kinds and markers
(``console``, ``sh``, ``yaml``, ``python``, ``toml``, ``json``, ``text``...; ``illustrative`` and
``fragment`` for what cannot run here, with the reason near the block). docs/install.md has the
short version for contributors.

Each page is walked in its own fresh directory (not the repository: the examples work from any
directory), where its files are written first: the blocks that start with ``# <file name>``,
the page's own and the README's (the docs build on the README's ``weather.py``). Then, in page
order:

- a ``console`` block runs against ``mesh up`` (on a broker of the test's own, the gateway on a
  free port; one per page, started at the page's first command): ``$ COMMAND`` lines run in bash
  (a command ending in ``&`` stays in the background until the test ends), and the lines after
  one are what it must print, stdout and stderr as a terminal shows them. ``<TASK_ID>`` stands
  for a task id (the last one printed is what a later ``<TASK_ID>`` in a command means), ``<ID>``
  for any other id, ``<PORT>`` for a port, ``<S>`` for seconds (``0.03``), and a line ``...`` for
  any lines;
- a ``sh`` block runs as one ``bash -e`` script against the same mesh and must exit 0;
- a ``yaml`` block is a mesh config: :func:`mesh.config.load_config` loads it and
  :func:`mesh.config.sections.build_components` builds its components, as ``mesh run`` does before it
  connects; a variable it needs (``${VAR}`` without a default, a ``*_env:`` value) is set to a
  placeholder when unset; one with a top-level ``cases:`` is an eval file, loaded as ``mesh eval``
  loads it (:func:`mesh.evals.load_suite`);
- a ``python`` block is imported in a subprocess (a ``test_*.py`` file is run by pytest with
  warnings as errors, beside the page's ``# pyproject.toml``); a file that a command of the page
  runs (``python a2a_client.py``) is run by that command instead.

Commands and files name the gateway as ``127.0.0.1:8080`` or ``localhost:8080``, the test's own
port in their place. ``mesh up`` runs as a new user runs it: secured by default (it starts its own
Mosquitto under the mesh's rules); ``MESH_API_KEY`` is set as its banner says. The commands pass
no ``--broker`` and no credentials: they find the broker of ``mesh up`` and their credentials
through its state file.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mesh.broker import BrokerSettings
from mesh.brokertools.localbroker import free_port
from mesh.component import Component
from mesh.config import MeshConfig, load_config
from mesh.config.sections import build_components
from tests.doc_blocks import SHELLS, Block, blocks, commands, mesh_invocations, page_blocks, problems
from tests.mesh.cli_process import start_mesh

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
BIN = Path(sys.executable).parent  # the venv the tests run in: its mesh, its python
TASK_ID = r"[0-9a-f]{32}"
PLACEHOLDERS = {"<TASK_ID>": TASK_ID, "<ID>": r"[\w-]+", "<PORT>": r"\d+", "<S>": r"\d+\.\d\d"}
#: The console blocks, for tests/test_whole_product.py's tour of the README.
CONSOLE_BLOCK = re.compile(r"```console\n(?P<body>.*?)```", re.S)
GATEWAY = re.compile(r"(?:127\.0\.0\.1|localhost):8080\b")
#: Blocks another change owes a fix, by page and a line of theirs: each must still fail (so the
#: entry goes once it is fixed).
OWED: dict[tuple[str, str], str] = {}


@dataclass
class Step:
    command: str
    expected: list[str] | None = field(default_factory=list)  # None: a script, its output not checked


def steps(block: Block) -> list[Step]:
    if block.kind in SHELLS:
        return [Step(script, None) for script in commands(block)]
    found: list[Step] = []
    for line in block.body.splitlines():
        if line.startswith("$ "):
            found.append(Step(line[2:]))
        else:
            expected = found[-1].expected
            assert expected is not None
            expected.append(line)
    return found


def readme_steps(text: str) -> list[Step]:
    return [step for block in blocks(text) if block.runs for step in steps(block)]


def line_source(line: str) -> str:
    """One printed line as the page shows it: its placeholders stand for what varies, the rest is literal."""
    pattern = re.escape(line)
    for placeholder, meaning in PLACEHOLDERS.items():
        pattern = pattern.replace(re.escape(placeholder), meaning)
    return pattern


def line_pattern(line: str) -> re.Pattern[str]:
    return re.compile(line_source(line) + r"\Z")


def output_pattern(expected: list[str]) -> re.Pattern[str]:
    parts = [r"(?:[^\n]*\n)*?" if line == "..." else line_source(line) + r"\n" for line in expected]
    return re.compile("".join(parts) + r"\Z")


def check_output(step: Step, output: str) -> None:
    assert step.expected is not None
    printed = output.rstrip("\n") + "\n" if output.strip() else ""
    mismatch = f"`{step.command}` printed:\n{output}\nthe page says:\n" + "\n".join(step.expected)
    assert output_pattern(step.expected).match(printed), mismatch


def test_the_output_patterns() -> None:
    step = Step("x", ["task <TASK_ID>", "...", "done on <PORT>"])
    check_output(step, f"task {'a' * 32}\nmore\nlines\ndone on 1883\n")
    check_output(step, f"task {'a' * 32}\ndone on 1883")
    for wrong in (f"task {'a' * 32}\ndone on x\n", "task 1\ndone on 1\n", f"task {'a' * 32}\ndone on 1\nextra\n"):
        with pytest.raises(AssertionError):
            check_output(step, wrong)


@contextlib.asynccontextmanager
async def mesh_up(tmp_path: Path, http_port: int) -> AsyncIterator[dict[str, str]]:
    """``mesh up`` as a new user starts it; the environment its examples run in."""
    broker_url = f"mqtt://localhost:{free_port()}"  # nothing there: mesh up starts its secured broker
    env = user_env(tmp_path) | {"MESH_HTTP_PORT": str(http_port)}
    up = await start_mesh("up", "--broker", broker_url, **{k: env[k] for k in ("MESH_STATE_DIR", "MESH_HTTP_PORT")})
    try:
        await up.wait_for_line("mesh up: ready", stream="stdout", timeout=60)
        assert any("under the mesh's rules" in line for line in up.stdout_lines), up.output
        # The gateway's API key, as the banner tells the user to export it.
        exports = [m for line in up.stdout_lines if (m := re.search(r'export MESH_API_KEY="\$\(cat (.+)\)"', line))]
        assert exports, up.output
        env["MESH_API_KEY"] = Path(exports[0][1]).read_text(encoding="utf-8").strip()
        yield env
    finally:
        await up.stop()
    assert "Traceback" not in up.output


def user_env(tmp_path: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("MESH_")},
        "MESH_STATE_DIR": str(tmp_path / "state"),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "PYTHONUNBUFFERED": "1",  # stdout and stderr interleave as on a terminal
    }


def page_files(page: Path) -> dict[str, str]:
    """The files of the page's examples: the README's, then the page's own."""
    owners = [README, page] if page != README else [README]
    return {b.name: b.body for owner in owners for b in page_blocks(owner) if b.name and b.kind != "console"}


def owed(page: Path, block: Block) -> str | None:
    return next((why for (name, line), why in OWED.items() if name == page.name and line in block.body), None)


def test_the_readme_and_the_docs_have_examples_to_run() -> None:
    assert len(readme_steps(README.read_text(encoding="utf-8"))) >= 8
    assert readme_steps("```console illustrative\n$ mesh send nowhere x\n```\n") == []
    assert [s.command for s in readme_steps("```sh\nmesh send echo hi\n```\n")] == ["mesh send echo hi\n"]
    ran = [page.name for page in PAGES if any(b.runs for b in page_blocks(page))]
    assert {"README.md", "workflows.md", "gateways.md", "artifacts.md"} <= set(ran), ran
    for (name, line), why in OWED.items():
        assert any(line in b.body for b in page_blocks(ROOT / "docs" / name)), f"{name}: no block has {line!r} ({why})"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_block_says_what_it_is_and_is_well_formed(page: Path) -> None:
    """Info strings, reasons for markers, syntax (python, toml, json, sh) and every ``mesh`` command."""
    found = [problem for block in page_blocks(page) for problem in problems(block)]
    assert not found, f"{page.name}:\n" + "\n".join(found)


def test_the_block_checks_see_drift() -> None:
    def problems_of(text: str) -> list[str]:
        return [problem for block in blocks(text) for problem in problems(block)]

    assert problems_of("```\nx\n```\n")  # no kind
    assert problems_of("```console illustrative\n$ mesh agents\n```\n")  # no reason near it
    assert not problems_of("Illustrative: another machine.\n\n```console illustrative\n$ mesh agents\n```\n")
    assert problems_of("```console\n$ mesh send echo hi --no-such-option\n```\n")
    assert problems_of("```sh\nX=1 .venv/bin/mesh sned echo hi && ls\n```\n")
    assert problems_of("```sh\nif then\n```\n")
    assert problems_of("```python\n\nprose\n```toml\n[a]\n```\n")  # an empty fence swallowing the rest
    assert problems_of("```python\nawait x\n```\n")
    assert not problems_of("A fragment:\n```python fragment\nawait x\n```\n")
    assert problems_of("```toml\n[a\n```\n")
    assert problems_of('```json\n{"a": 1,}\n```\n')
    assert not problems_of('```json\n{"a": 1}\n{"b": 2}\n```\n')
    assert mesh_invocations("curl x # mesh no\nA=1 mesh send e 'a\nb' | jq; .venv/bin/mesh up") == [
        ["send", "e", "a\nb"],
        ["up"],
    ]


def runnable_pages() -> list[Path]:
    def runs(block: Block) -> bool:
        return block.runs or (block.kind in ("yaml", "python") and not block.marker)

    return [page for page in PAGES if any(runs(block) for block in page_blocks(page))]


@pytest.mark.parametrize("page", runnable_pages(), ids=lambda page: page.name)
@pytest.mark.timeout(300)  # a dozen commands, each a new process, on a machine that may be busy
async def test_the_examples_work_as_the_page_says(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    http_port = free_port()
    gateway = f"127.0.0.1:{http_port}"
    for name, body in page_files(page).items():
        (project / name).write_text(GATEWAY.sub(gateway, body), encoding="utf-8")
    in_order = page_blocks(page)
    scripts = {name for b in in_order if b.runs for c in commands(b) for name in re.findall(r"[\w-]+\.py", c)}
    agents = mesh_up_agents()
    async with contextlib.AsyncExitStack() as stack:
        env: dict[str, str] | None = None  # the mesh's, from the page's first command on
        runner = Runner(project, stack)
        for block in in_order:
            if owed(page, block):
                with pytest.raises(Exception):  # noqa: B017 - whatever the failure, it is still there
                    await check_block(block, project, user_env(tmp_path), monkeypatch, scripts, Agents())
            elif block.runs:
                if env is None:
                    env = await stack.enter_async_context(mesh_up(tmp_path, http_port))
                for step in steps(block):
                    await runner.run(step, env, gateway)
            else:
                await check_block(block, project, env or user_env(tmp_path), monkeypatch, scripts, agents)
    assert not agents.not_served(), "\n".join(agents.not_served())


async def check_block(
    block: Block, project: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, scripts: set[str], agents: Agents
) -> None:
    """A block that is not a command: a config is loaded and built, a module imported (a script that
    a command of the page runs is left to it)."""
    if block.marker:
        return
    if block.kind == "yaml":
        load_and_build(block, project, monkeypatch, agents)
    elif block.kind == "python" and (block.name or "") not in scripts:
        await import_module(block, project, env)


@dataclass
class Agents:
    """Who a page's configs serve and whom their workflows call, as (namespace, name)."""

    served: set[tuple[str, str]] = field(default_factory=set)
    called: dict[tuple[str, str], Block] = field(default_factory=dict)

    def add(self, config: MeshConfig, components: list[Component], block: Block | None = None) -> None:
        self.served |= {(config.namespace, c.name) for c in components if c.kind == "agent"}
        if block is None:
            return
        for entry in config.sections.get("agents", []):  # built: the shapes are checked
            for node in entry.get("workflow", {}).get("nodes", []):
                if target := node.get("agent") or node.get("workflow"):
                    self.called[(config.namespace, target)] = block

    def not_served(self) -> list[str]:
        return [
            f"{block}: its workflow calls {name!r} in namespace {namespace!r}; neither mesh up nor the page serves it"
            for (namespace, name), block in self.called.items()
            if (namespace, name) not in self.served
        ]


def mesh_up_agents() -> Agents:
    """The agents plain ``mesh up`` serves (its config, agents/builtin/mesh-up.yaml)."""
    agents = Agents()
    config = load_config(ROOT / "agents" / "builtin" / "mesh-up.yaml")
    agents.add(config, build_components(config, BrokerSettings.from_url("mqtt://localhost:1883")))
    assert ("mesh", "calculator") in agents.served, agents.served
    return agents


def load_and_build(block: Block, project: Path, monkeypatch: pytest.MonkeyPatch, agents: Agents) -> None:
    """What ``mesh run`` does with the file before it connects: load it, build its components."""
    path = project / (block.name or f"block-{block.line}.yaml")
    path.write_text(block.body, encoding="utf-8")
    if re.search(r"^cases:", block.body, re.M):  # an eval file (docs/eval.md), not a mesh config
        from mesh.evals import load_suite

        load_suite(path)
        return
    needed = re.findall(r"\$\{(\w+)\}", block.body) + re.findall(r"\w+_env:\s*[\"']?(\w+)", block.body)
    for name in needed:
        if not os.environ.get(name):
            monkeypatch.setenv(name, f"placeholder-{name.lower()}-0123456789abcdef")
    modules, path_before = set(sys.modules), list(sys.path)
    try:
        config = load_config(path)
        agents.add(config, build_components(config, BrokerSettings.from_url("mqtt://localhost:1883")), block)
    finally:  # the modules it imported from the scratch directory (weather, sizes) leave with it
        for name in set(sys.modules) - modules:
            if str(getattr(sys.modules[name], "__file__", None) or "").startswith(str(project)):
                del sys.modules[name]
        sys.path[:] = path_before


async def import_module(block: Block, project: Path, env: dict[str, str]) -> None:
    name = block.name or f"block_{block.line}.py"
    (project / name).write_text(block.body, encoding="utf-8")
    if name.startswith("test_"):
        argv = ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "error", name]
    else:
        argv = ["-c", f"import {name.removesuffix('.py')}"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *argv, cwd=project, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, f"{block}: `python {' '.join(argv)}` exited {proc.returncode}:\n{out.decode()}"


class Runner:
    """Runs a page's commands in its directory; remembers the last task id and the background ones."""

    def __init__(self, project: Path, stack: contextlib.AsyncExitStack) -> None:
        self.project = project
        self.task_id = ""
        self.background: list[asyncio.subprocess.Process] = []
        stack.push_async_callback(self._stop_background)

    async def run(self, step: Step, env: dict[str, str], gateway: str) -> None:
        command = step.command.replace("<TASK_ID>", self.task_id).replace(".venv/bin/", f"{BIN}/")
        command = GATEWAY.sub(gateway, command)
        if step.expected is None:
            command = f"set -e -o pipefail\n{command}"
        elif command.rstrip().endswith("&"):
            proc = await asyncio.create_subprocess_exec(
                "bash",
                "-c",
                f"exec {command.rstrip().removesuffix('&')}",
                cwd=self.project,
                env=env,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
            self.background.append(proc)
            await _wait_for_ready(proc)
            return
        proc = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=self.project,
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
        output = out.decode()
        assert proc.returncode == 0, f"`{command}` exited {proc.returncode}:\n{output}"
        if step.expected is not None:
            check_output(step, output)
        self.task_id = (re.findall(TASK_ID, output) or [self.task_id])[-1]

    async def _stop_background(self) -> None:
        for proc in self.background:
            if proc.returncode is None:
                os.killpg(proc.pid, signal.SIGTERM)
            await proc.wait()


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
