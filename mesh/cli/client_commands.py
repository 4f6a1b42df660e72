"""``mesh send`` and ``mesh task list|get|cancel``: the command line as an A2A client.

Their arguments; what they do is in :mod:`mesh.cli.client_calls`, imported when one runs (the
A2A models and the MQTT client are not loaded to build ``mesh``'s parser).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from mesh.cli.common import Command, add_connection_options

#: The A2A task states, for ``mesh task list --state`` (tests/mesh/cli/test_startup.py checks them
#: against ``mesh.a2a.TaskState``, which this module does not import).
TASK_STATES = (
    "submitted",
    "working",
    "input-required",
    "completed",
    "canceled",
    "failed",
    "rejected",
    "auth-required",
    "unknown",
)
#: ``mesh.a2a.params``' page sizes of tasks/list (checked by the same test).
DEFAULT_TASK_PAGE_SIZE = 50
MAX_TASK_PAGE_SIZE = 100


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    _register_send(subparsers)
    _register_task(subparsers)


def _register_send(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    send = subparsers.add_parser(
        "send",
        help="send a message to an agent and print its answer",
        description="Send TEXT to AGENT (message/send, or message/stream with --stream) and print the answer. "
        "The message may also carry data (--data, a DataPart) and files (--file, FileParts).",
    )
    send.add_argument("agent", help="the agent's name")
    send.add_argument(
        "text",
        nargs="*",
        help="the message text: several words are joined with spaces; '-' reads standard input, @FILE a file "
        "(optional with --data or --file)",
    )
    send.add_argument(
        "--data",
        "-d",
        metavar="JSON",
        help="send a JSON object as a DataPart (a workflow's input_schema input): the JSON itself, "
        "@FILE.json, or '-' for standard input",
    )
    send.add_argument(
        "--file",
        "-f",
        action="append",
        default=[],
        type=Path,
        metavar="PATH",
        help="attach a file as a FilePart (repeatable); above the artifact store's inline threshold (1 MB) "
        "it is stored there and sent by artifact:// URI",
    )
    send.add_argument("--stream", "-s", action="store_true", help="print status and artifact events as they come")
    send.add_argument("--context", "-c", metavar="ID", help="contextId: continue a conversation")
    send.add_argument("--task", "-t", metavar="ID", help="taskId: answer a task that is input-required")
    send.add_argument("--skill", metavar="NAME", help="the skill to call, for agents with several (metadata.skill)")
    send.add_argument(
        "--approve",
        choices=("ask", "all", "none"),
        default="ask",
        help="an LLM agent's tool calls that need approval: ask y/n on a terminal (default), approve all, "
        "or deny all (for scripts; with --task and no text it answers a task already waiting)",
    )
    send.add_argument(
        "--metadata",
        "-m",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="set a key of the message's metadata (repeatable); VALUE is JSON if it parses, else text",
    )
    send.add_argument("--json", action="store_true", help="print the Task as JSON (NDJSON events with --stream)")
    send.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="seconds to wait for the answer (for each event with --stream; default 60)",
    )
    send.add_argument(
        "--wait",
        type=float,
        default=3.0,
        metavar="S",
        help="seconds to wait for the agent's card before giving up (default 3)",
    )
    send.add_argument(
        "--save-artifacts",
        metavar="DIR",
        type=Path,
        help="write the answer's files to DIR (artifact:// URIs are read from the artifact store, MESH_ARTIFACTS)",
    )
    add_client_options(send)
    send.set_defaults(handler=_send)


def _register_task(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    task = subparsers.add_parser(
        "task", help="list, look at or cancel tasks", description="List an agent's tasks, look at or cancel one."
    )
    actions = task.add_subparsers(dest="action", required=True, metavar="{list,get,cancel}")
    listing = actions.add_parser(
        "list",
        help="list an agent's tasks, newest first (tasks/list)",
        description="List AGENT's tasks, newest first (the mesh's tasks/list), one line each: id, state, context.",
    )
    listing.add_argument("agent", help="the agent's name")
    listing.add_argument("--state", choices=TASK_STATES, help="only tasks in this state")
    listing.add_argument("--context", "-c", metavar="ID", help="only tasks of this contextId")
    listing.add_argument(
        "--limit",
        type=int,
        default=DEFAULT_TASK_PAGE_SIZE,
        metavar="N",
        help=f"at most N tasks (default {DEFAULT_TASK_PAGE_SIZE}; fetched in pages of at most {MAX_TASK_PAGE_SIZE})",
    )
    listing.add_argument("--json", action="store_true", help="print a JSON list of the Tasks")
    listing.add_argument("--timeout", type=float, default=30.0, metavar="S", help="seconds to wait (default 30)")
    add_client_options(listing)
    listing.set_defaults(handler=_task_list)
    for name, help_text in (("get", "print a task (tasks/get)"), ("cancel", "cancel a task (tasks/cancel)")):
        action = actions.add_parser(name, help=help_text, description=help_text)
        action.add_argument("agent", help="the agent's name")
        action.add_argument("task_id", metavar="TASK_ID")
        action.add_argument("--json", action="store_true", help="print the Task as JSON")
        action.add_argument("--timeout", type=float, default=30.0, metavar="S", help="seconds to wait (default 30)")
        if name == "get":
            action.add_argument("--history", type=int, metavar="N", help="include the last N messages")
        add_client_options(action)
        action.set_defaults(handler=_TASK_COMMANDS[name])


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """The connection options of a command that calls agents, ``--client-id`` among them."""
    add_connection_options(parser)
    parser.add_argument(
        "--client-id",
        metavar="ID",
        help="MQTT client id, and the name of this client's answer topics (default: the broker username "
        "of --broker mqtt://USER:PW@... or --client, else random)",
    )


async def _send(args: argparse.Namespace) -> int:
    from mesh.cli.client_calls import send

    return await send(args)


async def _task_list(args: argparse.Namespace) -> int:
    from mesh.cli.client_calls import task_list

    return await task_list(args)


async def _task_get(args: argparse.Namespace) -> int:
    from mesh.cli.client_calls import TASK_COMMANDS

    return await TASK_COMMANDS["get"](args)


async def _task_cancel(args: argparse.Namespace) -> int:
    from mesh.cli.client_calls import TASK_COMMANDS

    return await TASK_COMMANDS["cancel"](args)


_TASK_COMMANDS: dict[str, Command] = {"get": _task_get, "cancel": _task_cancel}
