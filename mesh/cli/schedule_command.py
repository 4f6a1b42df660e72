"""``mesh schedule list | run NAME | pause NAME | resume NAME``: the namespace's schedules.

Their arguments; what they do is in :mod:`mesh.schedules.command`, imported when one runs.
"""

from __future__ import annotations

import argparse

from mesh.cli.client_commands import add_client_options
from mesh.cli.common import Command, add_connection_options


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    schedule = subparsers.add_parser(
        "schedule",
        help="list, run now, pause or resume the schedules of a namespace",
        description="The schedules that `mesh run FILE` (or `mesh up --config FILE`) runs, as their shared record "
        "has them: the machine's, in the state dir, or a PostgreSQL store shared by several machines (--store; "
        "see docs/schedules.md).",
    )
    actions = schedule.add_subparsers(dest="action", required=True, metavar="{list,run,pause,resume}")
    listing = actions.add_parser(
        "list",
        help="the schedules, their next tick and their last run",
        description="The schedules of the namespace: agent, timing, paused or not, the next tick, the last run.",
    )
    listing.add_argument("--json", action="store_true", help="print a JSON list")
    add_store_option(listing)
    add_connection_options(listing)
    listing.set_defaults(handler=_handler("list"))
    run = actions.add_parser(
        "run",
        help="run a schedule now, once, and print its answer",
        description="Send NAME's task now (a manual run, recorded with the others; a paused schedule runs too).",
    )
    run.add_argument("name", metavar="NAME")
    run.add_argument("--json", action="store_true", help="print the Task as JSON")
    add_store_option(run)
    add_client_options(run)
    run.set_defaults(handler=_handler("run"))
    for name, help_text in (
        ("pause", "stop a schedule's ticks until resumed (every scheduler of the record, at its next tick)"),
        ("resume", "let a paused schedule's ticks run again"),
    ):
        action = actions.add_parser(name, help=help_text, description=help_text[0].upper() + help_text[1:] + ".")
        action.add_argument("name", metavar="NAME")
        add_store_option(action)
        add_connection_options(action)
        action.set_defaults(handler=_handler(name))


def add_store_option(parser: argparse.ArgumentParser) -> None:
    """``--store URL``: the PostgreSQL record the schedulers share (else the machine's SQLite one)."""
    parser.add_argument(
        "--store",
        metavar="URL",
        help="the postgresql:// store the schedulers share: the store: of the file's agents (default: $MESH_STORE; "
        "none: the record in this machine's state dir; the password from $MESH_STORE_PASSWORD or "
        "$MESH_STORE_PASSWORD_FILE)",
    )


def _handler(action: str) -> Command:
    async def handle(args: argparse.Namespace) -> int:
        from mesh.schedules.command import ACTIONS

        return await ACTIONS[action](args)

    return handle
