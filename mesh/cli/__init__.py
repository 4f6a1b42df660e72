"""The ``mesh`` command.

Exit codes: 0 success; 1 the task did not complete (failed, canceled, rejected); 2 bad
arguments or configuration, or an agent name a live instance already serves; 3 broker
unreachable; 4 unknown agent; 5 timeout; 6 the agent answered with a JSON-RPC error;
130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from typing import NoReturn

from mesh.cli import (
    broker_commands,
    client_commands,
    completion,
    discovery_commands,
    doctor_command,
    eval_command,
    keys_command,
    remote_command,
    run_commands,
    schedule_command,
    usage_command,
)
from mesh.cli.common import EXIT_INTERRUPTED, EXIT_OK, Command, describe, exit_code_for, fail
from mesh.version import __version__

__all__ = ["COMMANDS_GROUP", "build_parser", "main"]

COMMANDS_GROUP = "mesh.commands"  # entry points adding commands from other packages (e.g. ``mesh acp``)

# Building the parser imports every command's module (and the ``mesh.commands`` entry points'):
# they register their arguments without importing what the command needs to run (pydantic,
# paho, the agents runtime, starlette), so that ``mesh --help`` and ``mesh --version`` answer at
# once; tests/mesh/cli/test_startup.py keeps it so.


_INVALID_CHOICE = re.compile(r"invalid choice: '(?P<word>[^']*)' \(choose from (?P<choices>.*)\)$")


#: Where a subcommand's parser leaves, on the namespace, the options it did not know and the
#: closest ones it has, for the top-level parser that reports them.
_UNKNOWN_OPTIONS = "_mesh_unknown_options"


class MeshArgumentParser(argparse.ArgumentParser):
    """argparse with a did-you-mean for a mistyped command or subcommand (``mesh sned``) and for a
    mistyped option (``mesh send --strem``: Python 3.11's argparse has no ``suggest_on_error``)."""

    def error(self, message: str) -> NoReturn:
        found = _INVALID_CHOICE.search(message)
        if found is not None:
            from mesh.config.errors import suggest

            choices = re.findall(r"'([^']*)'", found["choices"])
            close = suggest(found["word"], choices)
            if close is not None:
                message = f"{message}; did you mean {close!r}?"
        super().error(message)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        parsed, extras = super().parse_known_args(args, namespace)
        # The deepest parser that met an unknown option names it first (a subcommand's parser
        # runs inside its parent's and copies its namespace up): its options are the ones meant.
        if extras and not hasattr(parsed, _UNKNOWN_OPTIONS):
            from mesh.config.errors import suggest

            # Compared without their dashes, which every option shares (``--xyz`` is not close to ``--key``).
            options = {o.lstrip("-"): o for action in self._actions for o in action.option_strings}
            close = {w: suggest(w.partition("=")[0].lstrip("-"), options) for w in extras if w.startswith("-")}
            setattr(parsed, _UNKNOWN_OPTIONS, (self, {w: options[c] for w, c in close.items() if c is not None}))
        return parsed, extras

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if not extras:
            return parsed
        found: tuple[argparse.ArgumentParser, dict[str, str]] = getattr(parsed, _UNKNOWN_OPTIONS, (self, {}))
        owner, close = found
        message = f"unrecognized arguments: {' '.join(extras)}"
        if len(close) == 1:
            message += f"; did you mean {next(iter(close.values()))!r}?"
        elif close:
            message += "; did you mean " + ", ".join(f"{c!r} for {w!r}" for w, c in close.items()) + "?"
        owner.error(message)


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = MeshArgumentParser(
        prog="mesh",
        description="Run AI agents on an MQTT v5 broker and talk to them (A2A over MQTT).",
        epilog="Exit codes: 0 ok, 1 task not completed, 2 usage, 3 broker, 4 unknown agent, 5 timeout, 6 agent error.",
    )
    parser.add_argument("--version", action="version", version=f"mesh {__version__}")
    # The subcommands' parsers are MeshArgumentParsers too (argparse makes them of the parent's class).
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run_commands.register(subparsers)
    client_commands.register(subparsers)
    discovery_commands.register(subparsers)
    keys_command.register(subparsers)
    remote_command.register(subparsers)
    broker_commands.register(subparsers)
    doctor_command.register(subparsers)
    eval_command.register(subparsers)
    schedule_command.register(subparsers)
    usage_command.register(subparsers)
    completion.register(subparsers)
    for entry_point in entry_points(group=COMMANDS_GROUP):
        try:
            entry_point.load()(subparsers)
        except ImportError as exc:  # an optional extra that is not installed
            logging.getLogger(__name__).debug("command %r not available: %s", entry_point.name, exc)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # --help and --version end here, before asyncio loads
    import asyncio

    handler: Command = args.handler
    try:
        return asyncio.run(handler(args))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `mesh ... | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_OK
    except Exception as exc:
        code = exit_code_for(exc)
        if code is None:
            raise
        fail(describe(exc))
        return code
