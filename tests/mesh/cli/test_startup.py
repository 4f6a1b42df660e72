"""``mesh --version`` and ``mesh --help`` answer at once: building the parser (the entry points'
commands included) loads none of what a command needs to run (issue 31: a CLI that answers fast).

Structural, not a timing: a fresh interpreter builds the parser, prints ``--version`` and every
command's ``--help``, and says which heavy packages it imported. The timing is bench material.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from mesh.a2a import TaskState
from mesh.a2a.params import DEFAULT_TASK_PAGE_SIZE, MAX_TASK_PAGE_SIZE
from mesh.cli import client_commands, run_commands
from mesh.config import LOG_LEVELS

ROOT = Path(__file__).resolve().parent.parents[2]

#: What a command may load when it runs, never to build the parser: the MQTT client, the A2A
#: models, the agents runtime, the web framework, the SDKs of the optional extras, YAML, JOSE.
HEAVY = ("paho", "pydantic", "pydantic_core", "agents", "starlette", "uvicorn", "mcp", "acp", "yaml", "joserfc")

_PROBE = """
import argparse, contextlib, io, json, sys
from mesh.cli import build_parser, main

def commands(parser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name)
                yield from commands(sub, (*path, name))

out = io.StringIO()
helped = {}
with contextlib.redirect_stdout(out):
    for argv in (["--version"], ["--help"], *([*words, "--help"] for words in commands(build_parser()))):
        try:
            main(argv)
        except SystemExit as done:
            helped[" ".join(argv)] = done.code
heavy = sorted({name.split(".")[0] for name in sys.modules} & set(sys.argv[1:]))
print(json.dumps({"heavy": heavy, "helped": helped, "version": out.getvalue().splitlines()[0]}))
"""


def test_the_parser_and_every_help_load_nothing_heavy() -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_PROBE), *HEAVY],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["version"].startswith("mesh ")
    helped = result["helped"]
    for words in ("send", "task list", "run", "up", "agents", "doctor", "completion", "acp", "mcp", "dashboard"):
        assert helped[f"{words} --help"] == 0  # the core's commands and the entry points' alike
    assert set(helped.values()) == {0}
    assert result["heavy"] == [], f"building mesh's parser imported {result['heavy']}; import them in the handler"


def test_the_parser_constants_match_their_sources() -> None:
    """The values the light command modules spell out rather than import."""
    assert tuple(state.value for state in TaskState) == client_commands.TASK_STATES
    assert (client_commands.DEFAULT_TASK_PAGE_SIZE, client_commands.MAX_TASK_PAGE_SIZE) == (
        DEFAULT_TASK_PAGE_SIZE,
        MAX_TASK_PAGE_SIZE,
    )
    assert run_commands.LOG_LEVELS == LOG_LEVELS


def test_an_agent_without_trust_never_loads_the_jose_library() -> None:
    """What ``mesh run`` of plain agents imports to build and start them: not JOSE and the
    cryptography behind it (~70 ms of every start), which only trust needs."""
    probe = (
        "import sys; from agents.config import build_agents; from agents.service import AgentService; "
        "import agents.builtin.echo, mesh.cli.running, mesh.discovery.registry, mesh.discovery; "
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'joserfc', 'cryptography'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
