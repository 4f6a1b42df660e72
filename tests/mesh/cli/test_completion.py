"""The command line's shape: completion scripts that load and complete, did-you-mean for commands and options,
and ``--namespace/-n`` with ``$MESH_NAMESPACE`` on every command that talks to the mesh."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agents.builtin.countdown import CountdownAgent
from agents.builtin.echo import EchoAgent
from mesh.cli import build_parser
from mesh.cli.completion import SHELLS
from tests.conftest import ServeAgent
from tests.mesh.cli_process import mesh, mesh_env


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    """Every runnable (sub)command of ``parser`` by its words, e.g. ``("task", "list")``."""
    found: dict[tuple[str, ...], argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(commands(sub, (*path, name)))
    if not found and path:
        found[path] = parser
    return found


def options_of(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {option: action for action in parser._actions for option in action.option_strings}


def test_every_command_that_talks_to_the_mesh_takes_a_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MESH_NAMESPACE", "from/env")
    talking = {words: p for words, p in commands(build_parser()).items() if "--broker" in options_of(p)}
    assert {("send",), ("task", "list"), ("task", "get"), ("task", "cancel"), ("agents",), ("watch",)} <= set(talking)
    assert {("run",), ("up",), ("acp",)} <= set(talking)
    # mesh doctor checks the broker itself, on topics of its own: it belongs to no namespace.
    assert "--namespace" not in options_of(talking.pop(("doctor",)))
    for words, parser in talking.items():
        options = options_of(parser)
        assert "-n" in options and options["-n"] is options.get("--namespace"), words
        assert options["--namespace"].default == "from/env", words  # $MESH_NAMESPACE is the default


async def test_a_mistyped_command_gets_a_suggestion() -> None:
    typo = await mesh("sned", "echo", "hi")
    assert typo.code == 2 and "invalid choice: 'sned'" in typo.stderr and "did you mean 'send'?" in typo.stderr
    sub = await mesh("task", "lsit", "echo")
    assert sub.code == 2 and "did you mean 'list'?" in sub.stderr
    far = await mesh("xyzzy")
    assert far.code == 2 and "did you mean" not in far.stderr


def test_a_mistyped_option_gets_a_suggestion_from_its_own_command(capsys: pytest.CaptureFixture[str]) -> None:
    def refused(*argv: str) -> str:
        with pytest.raises(SystemExit) as ended:
            build_parser().parse_args(argv)
        assert ended.value.code == 2
        return capsys.readouterr().err

    typo = refused("send", "echo", "hi", "--strem")
    assert "usage: mesh send" in typo  # the subcommand's usage, not mesh's
    assert "unrecognized arguments: --strem; did you mean '--stream'?" in typo
    two = refused("task", "list", "echo", "--limt", "3", "--jsn")
    assert "did you mean '--limit' for '--limt', '--json' for '--jsn'?" in two
    assert "did you mean '--namespace'?" in refused("watch", "--namespce=x")
    far = refused("send", "echo", "hi", "--xyz")  # no option is close (the shared "--" does not count)
    assert "unrecognized arguments: --xyz" in far and "did you mean" not in far
    assert build_parser().parse_args(["send", "echo", "hi", "--stream"]).stream  # right ones still parse


async def test_completion_scripts_print_for_each_shell() -> None:
    for shell in SHELLS:
        script = await mesh("completion", shell)
        assert script.code == 0 and "send" in script.stdout and "--namespace" in script.stdout, script.stderr
    bad = await mesh("completion", "tcsh")
    assert bad.code == 2 and "invalid choice: 'tcsh'" in bad.stderr


def bash_completes(script: Path, words: list[str], env: dict[str, str] | None = None) -> list[str]:
    """What the bash script offers for the command line ``words`` (the last one being typed)."""
    line = " ".join(words)
    program = (
        f"source {script}\n"
        f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        f"COMP_LINE={line!r}; COMP_POINT={len(line)}\n"
        "_shtab_mesh mesh; printf '%s\\n' \"${COMPREPLY[@]}\"\n"
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, timeout=30, check=True, env=env)
    return done.stdout.split()


def test_the_bash_script_loads_and_completes(tmp_path: Path) -> None:
    script = tmp_path / "mesh.bash"
    made = subprocess.run(
        [sys.executable, "-m", "mesh.cli", "completion", "bash"],
        capture_output=True,
        text=True,
        env=mesh_env(),
        timeout=60,
    )
    assert made.returncode == 0, made.stderr
    script.write_text(made.stdout)
    checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    assert bash_completes(script, ["mesh", "se"]) == ["send"]
    assert set(bash_completes(script, ["mesh", "task", ""])) == {"list", "get", "cancel"}
    assert "--namespace" in bash_completes(script, ["mesh", "task", "list", "--"])
    assert "--client-id" in bash_completes(script, ["mesh", "send", "--c"])


# How each shell loads the script for the running shell, and what it then offers for `mesh se`.
LOAD_AND_ASK = {
    "zsh": 'autoload -U compinit; compinit -u; eval "$(cat {script})"; print ${{_comps[mesh]}}',
    "fish": 'source {script}; complete -C "mesh se"',
}


@pytest.mark.parametrize(("shell", "expected"), [("zsh", "_shtab_mesh"), ("fish", "send\t")])
def test_the_zsh_and_fish_scripts_load(shell: str, expected: str, tmp_path: Path) -> None:
    binary = shutil.which(shell)
    if binary is None:
        pytest.skip(f"{shell} is not installed")
    script = tmp_path / f"mesh.{shell}"
    made = subprocess.run(
        [sys.executable, "-m", "mesh.cli", "completion", shell],
        capture_output=True,
        text=True,
        env=mesh_env(),
        timeout=60,
    )
    script.write_text(made.stdout)
    checked = subprocess.run([binary, "-n", str(script)], capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stderr
    loaded = subprocess.run(
        [binary, "-c", LOAD_AND_ASK[shell].format(script=script)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**mesh_env(), "HOME": str(tmp_path)},  # no user's rc files or completion caches
    )
    assert expected in loaded.stdout, loaded.stdout + loaded.stderr


async def test_an_agent_argument_completes_to_the_agents_on_the_mesh(
    serve_agent: ServeAgent, broker_url: str, namespace: str, tmp_path: Path
) -> None:
    await serve_agent(EchoAgent())
    await serve_agent(CountdownAgent())
    script = tmp_path / "mesh.bash"
    script.write_text((await mesh("completion", "bash")).stdout)
    # `mesh` as the shell finds it: the one installed next to this Python.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = mesh_env(MESH_BROKER_URL=broker_url, MESH_NAMESPACE=namespace, PATH=path)
    offered = await asyncio.to_thread(bash_completes, script, ["mesh", "send", ""], env)
    assert offered == ["countdown", "echo"]
    assert await asyncio.to_thread(bash_completes, script, ["mesh", "task", "list", "ec"], env) == ["echo"]
