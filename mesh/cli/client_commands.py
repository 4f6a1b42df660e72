"""``mesh send`` and ``mesh task get|cancel``: the command line as an A2A client."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mesh.a2a import INTERRUPTED_STATES, Message, Task, TaskState
from mesh.cli.common import (
    EXIT_OK,
    EXIT_TASK_NOT_COMPLETED,
    Command,
    add_connection_options,
    client_settings,
)
from mesh.cli.render import answer_text, as_json, event_line, task_summary
from mesh.client import MeshClient, StreamItem
from mesh.errors import ConfigError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    send = subparsers.add_parser(
        "send",
        help="send a message to an agent and print its answer",
        description="Send TEXT to AGENT (message/send, or message/stream with --stream) and print the answer.",
    )
    send.add_argument("agent", help="the agent's name")
    send.add_argument(
        "text",
        nargs="+",
        help="the message text: several words are joined with spaces; '-' reads standard input, @FILE a file",
    )
    send.add_argument("--stream", "-s", action="store_true", help="print status and artifact events as they come")
    send.add_argument("--context", "-c", metavar="ID", help="contextId: continue a conversation")
    send.add_argument("--task", "-t", metavar="ID", help="taskId: answer a task that is input-required")
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
    add_connection_options(send)
    send.set_defaults(handler=_send)

    task = subparsers.add_parser("task", help="look at or cancel a task", description="Look at or cancel a task.")
    actions = task.add_subparsers(dest="action", required=True, metavar="{get,cancel}")
    for name, help_text in (("get", "print a task (tasks/get)"), ("cancel", "cancel a task (tasks/cancel)")):
        action = actions.add_parser(name, help=help_text, description=help_text)
        action.add_argument("agent", help="the agent's name")
        action.add_argument("task_id", metavar="TASK_ID")
        action.add_argument("--json", action="store_true", help="print the Task as JSON")
        action.add_argument("--timeout", type=float, default=30.0, metavar="S", help="seconds to wait (default 30)")
        if name == "get":
            action.add_argument("--history", type=int, metavar="N", help="include the last N messages")
        add_connection_options(action)
        action.set_defaults(handler=_TASK_COMMANDS[name])


def message_text(words: list[str]) -> str:
    """The text of ``mesh send``: the words, standard input (``-``) or a file (``@FILE``)."""
    if words == ["-"]:
        return sys.stdin.read()
    if len(words) == 1 and words[0].startswith("@") and len(words[0]) > 1:
        path = Path(words[0][1:])
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the message text from {path}: {exc}; give a UTF-8 text file") from exc
    return " ".join(words)


async def _send(args: argparse.Namespace) -> int:
    args.text = message_text(args.text)
    async with MeshClient.connect(client_settings(args), args.namespace) as client:
        await client.wait_for_agent(args.agent, timeout=args.wait)
        if args.stream:
            final: StreamItem | None = None  # the reply, a Task or Message, comes last
            async for item in client.stream(
                args.agent, args.text, context_id=args.context, task_id=args.task, idle_timeout=args.timeout
            ):
                print(as_json(item) if args.json else event_line(item), flush=True)
                final = item
            assert isinstance(final, Task | Message)
            return _outcome(final, print_answer=False)
        result = await client.send(
            args.agent, args.text, context_id=args.context, task_id=args.task, timeout=args.timeout
        )
        if args.json:
            print(as_json(result, indent=2))
            return _outcome(result, print_answer=False)
        return _outcome(result, print_answer=True)


def _outcome(result: Task | Message, *, print_answer: bool) -> int:
    """Print the answer; say on stderr, and in the exit code, when the task did not complete."""
    if print_answer:
        text = answer_text(result)
        if text:
            print(text)
    if isinstance(result, Message):
        return EXIT_OK
    state = result.status.state
    if state is TaskState.completed:
        return EXIT_OK
    if state in INTERRUPTED_STATES:
        print(f"(task {result.id} is {state.value}: answer with --task {result.id})", file=sys.stderr)
        return EXIT_OK
    print(f"mesh: task {result.id} ended {state.value}", file=sys.stderr)
    return EXIT_TASK_NOT_COMPLETED


async def _task_get(args: argparse.Namespace) -> int:
    async with MeshClient.connect(client_settings(args), args.namespace) as client:
        task = await client.get_task(args.agent, args.task_id, history_length=args.history, timeout=args.timeout)
    print(as_json(task, indent=2) if args.json else task_summary(task))
    return EXIT_OK


async def _task_cancel(args: argparse.Namespace) -> int:
    async with MeshClient.connect(client_settings(args), args.namespace) as client:
        task = await client.cancel_task(args.agent, args.task_id, timeout=args.timeout)
    print(as_json(task, indent=2) if args.json else task_summary(task))
    return EXIT_OK


_TASK_COMMANDS: dict[str, Command] = {"get": _task_get, "cancel": _task_cancel}
