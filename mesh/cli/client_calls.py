"""What ``mesh send`` and ``mesh task list|get|cancel`` do (their arguments: :mod:`mesh.cli.client_commands`).

A client is named after its broker user when it has one (``--broker mqtt://USER:PW@...``, or
``--client`` with a password file), so it reads its answers on the one client topic per-user
broker rules allow it, ``{ns}/a2a/v1/client/response/USER``; ``--client-id`` names it instead.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from mesh.a2a import INTERRUPTED_STATES, Message, Task, TaskState, TaskStatusUpdateEvent
from mesh.a2a.exceptions import TaskNotCancelable
from mesh.a2a.params import MAX_TASK_PAGE_SIZE
from mesh.broker import BrokerSettings
from mesh.cli.approvals import approval_answer, decide, pending_approvals, waiting_hint
from mesh.cli.artifact_files import save_answer_files
from mesh.cli.common import EXIT_OK, EXIT_TASK_NOT_COMPLETED, Command, broker_is_one_node, client_settings
from mesh.cli.progress import NoProgress, Progress, progress_line
from mesh.cli.render import answer_text, as_json, event_line, task_summary, tasks_table
from mesh.cli.send_parts import data_part_value, file_parts, store_large_files, user_message
from mesh.client import MeshClient, StreamItem
from mesh.errors import AgentNotFoundError, AgentUnavailableError, ConfigError, RequestTimeoutError
from mesh.redaction import redact_url
from topics import validate_identifier

__all__ = ["TASK_COMMANDS", "connect", "message_metadata", "message_text", "send", "task_list"]

#: How long the task commands wait for the agent's card (an unknown name is told as soon as the cards are in).
AGENT_WAIT_S = 3.0


def connect(args: argparse.Namespace) -> contextlib.AbstractAsyncContextManager[MeshClient]:
    """The connected client of a command: ``--broker``, ``--client``, ``--client-id``, ``--namespace``."""
    try:
        client_id = None if args.client_id is None else validate_identifier(args.client_id, "--client-id")
    except ValueError as exc:
        raise ConfigError(f"{exc}; use letters, digits, '_', '.' and '-' (at most 128)") from exc
    return _connected(client_settings(args), args.namespace, client_id)


@contextlib.asynccontextmanager
async def _connected(settings: BrokerSettings, namespace: str, client_id: str | None) -> AsyncIterator[MeshClient]:
    async with MeshClient.connect(settings, namespace, client_id=client_id) as client:
        client.one_node_broker = broker_is_one_node(settings)
        try:
            yield client
        except (AgentNotFoundError, AgentUnavailableError, RequestTimeoutError) as exc:
            # Which mesh was asked: with no `mesh up` here, the broker on localhost:1883 may be anyone's.
            exc.add_note(asked_where(settings, namespace))
            raise


def asked_where(settings: BrokerSettings, namespace: str) -> str:
    """``asked the broker mqtt://localhost:1883 on namespace 'mesh' as broker user 'cli'``."""
    who = f"as broker user {settings.username!r}" if settings.username else "without credentials"
    return f"asked the broker {redact_url(settings.url)} on namespace {namespace!r} {who}"


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


def message_metadata(pairs: list[str], skill: str | None) -> dict[str, Any] | None:
    """The message's metadata from ``--metadata KEY=VALUE`` (JSON values where they parse) and ``--skill``."""
    metadata: dict[str, Any] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key.strip():
            raise ConfigError(f"--metadata {pair!r}: give KEY=VALUE, e.g. --metadata priority=2")
        try:
            metadata[key.strip()] = json.loads(value)
        except ValueError:
            metadata[key.strip()] = value
    if skill is not None:
        metadata["skill"] = skill
    return metadata or None


async def send(args: argparse.Namespace) -> int:
    metadata = message_metadata(args.metadata, args.skill)
    if not args.text and args.data is None and not args.file:
        if args.task and args.approve != "ask":
            return await answer_waiting(args)
        raise ConfigError("give the message: TEXT, --data JSON or --file PATH (e.g. mesh send echo hello)")
    text = message_text(args.text) if args.text else ""
    data = None if args.data is None else data_part_value(args.data, stdin_taken=args.text == ["-"])
    files = file_parts(args.file)
    built = None if metadata is None and data is None and not files else user_message(text, data, files, metadata)
    async with connect(args) as client:
        await client.wait_for_agent(args.agent, timeout=args.wait)
        if built is not None and files:  # a large file goes to the artifact store, in the task's context
            context = args.context or (await _context_of(client, args) if args.task else None)
            built = await store_large_files(built, args.namespace, context)
            args.context = args.context or built.context_id
        args.text = text if built is None else built
        interrupt = _CancelOnInterrupt(client, args.agent)
        if args.stream:
            async with interrupt:
                return await _send_streamed(client, args, interrupt)
        progress = progress_line(args.agent)
        on_event = None if isinstance(progress, NoProgress) else _progress_of(progress)
        say_task_id = None if args.json else _task_id_sayer(progress)

        def on_sent(task_id: str | None) -> None:
            interrupt.task_id = task_id
            if say_task_id is not None:
                say_task_id(task_id)

        async with interrupt:
            with progress:
                result = await client.send(
                    args.agent,
                    args.text,
                    context_id=args.context,
                    task_id=args.task,
                    timeout=args.timeout,
                    on_sent=on_sent,
                    on_event=on_event,
                )
            # An LLM agent's tool calls waiting for approval: answered as --approve says, until none waits.
            while isinstance(result, Task) and (calls := pending_approvals(result)):
                answers = decide(calls, args.approve, agent=args.agent)
                if answers is None:
                    print(waiting_hint(args.agent, result), file=sys.stderr)
                    break
                with progress:
                    result = await client.send(
                        args.agent, approval_answer(answers, result), task_id=result.id, timeout=args.timeout
                    )
        if args.save_artifacts is not None:
            await save_answer_files(result, args.save_artifacts, args.namespace)
        if args.json:
            print(as_json(result, indent=2))
            return _outcome(result, print_answer=False)
        return _outcome(result, print_answer=True)


async def answer_waiting(args: argparse.Namespace) -> int:
    """``mesh send AGENT --task ID --approve all|none``: answer the approvals a task waits for."""
    async with connect(args) as client:
        await client.wait_for_agent(args.agent, timeout=args.wait)
        task = await client.get_task(args.agent, args.task, timeout=args.timeout)
        calls = pending_approvals(task)
        if not calls:
            raise ConfigError(
                f"task {args.task} waits for no approval (it is {task.status.state.value}); "
                "give the message: TEXT, --data JSON or --file PATH"
            )
        result: Task | Message = task
        while isinstance(result, Task) and (calls := pending_approvals(result)):
            answers = decide(calls, args.approve, agent=args.agent) or []
            result = await client.send(
                args.agent, approval_answer(answers, result), task_id=result.id, timeout=args.timeout
            )
    if args.json:
        print(as_json(result, indent=2))
        return _outcome(result, print_answer=False)
    return _outcome(result, print_answer=True)


async def _context_of(client: MeshClient, args: argparse.Namespace) -> str:
    """The context of the task ``--task`` answers (a file stored for it goes there)."""
    return (await client.get_task(args.agent, args.task, history_length=0, timeout=args.timeout)).context_id


class _CancelOnInterrupt:
    """Ctrl-C while waiting: cancel the task on the agent (it would run on, unseen) and say so."""

    def __init__(self, client: MeshClient, agent: str) -> None:
        self.client = client
        self.agent = agent
        self.task_id: str | None = None

    async def __aenter__(self) -> _CancelOnInterrupt:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, *_: object) -> None:
        if kind is None or not issubclass(kind, asyncio.CancelledError | KeyboardInterrupt):
            return
        if self.task_id is None:
            print("mesh: interrupted before the agent had the task", file=sys.stderr, flush=True)
            return
        try:
            task = await asyncio.wait_for(self._cancel(self.task_id), 3.0)
        except (Exception, asyncio.CancelledError) as exc:  # a second Ctrl-C, or the agent refused
            print(f"mesh: interrupted; task {self.task_id} may still run ({exc or type(exc).__name__}): "
                  f"mesh task cancel {self.agent} {self.task_id}", file=sys.stderr, flush=True)  # fmt: skip
            return
        print(f"mesh: interrupted: task {self.task_id} {task.status.state.value}", file=sys.stderr, flush=True)

    async def _cancel(self, task_id: str) -> Task:
        try:
            return await self.client.cancel_task(self.agent, task_id, timeout=2.0)
        except TaskNotCancelable:  # the call path already canceled it, or it ended meanwhile
            return await self.client.get_task(self.agent, task_id, timeout=2.0)


async def _send_streamed(client: MeshClient, args: argparse.Namespace, interrupt: _CancelOnInterrupt) -> int:
    """``--stream``: the task id first (not with --json: every event carries it), then a line per event."""
    final: StreamItem | None = None  # the reply, a Task or Message, comes last
    first = True
    sending: Any = args.text
    while True:
        async for item in client.stream(
            args.agent, sending, context_id=args.context, task_id=args.task, idle_timeout=args.timeout
        ):
            if first and (task_id := getattr(item, "task_id", None)):
                interrupt.task_id = task_id
                if not args.json:
                    print(f"[task {task_id}]", flush=True)
            first = False
            print(as_json(item) if args.json else event_line(item), flush=True)
            final = item
        if not isinstance(final, Task | Message):
            raise RuntimeError("the stream ended without a task or a message")
        # Tool calls waiting for approval: answered as --approve says, and the same stream goes on.
        calls = pending_approvals(final)
        answers = decide(calls, args.approve, agent=args.agent) if calls else None
        if not answers or not isinstance(final, Task):
            if calls and isinstance(final, Task):
                print(waiting_hint(args.agent, final), file=sys.stderr)
            break
        sending, args.task = approval_answer(answers, final), final.id
    if args.save_artifacts is not None:
        await save_answer_files(final, args.save_artifacts, args.namespace)
    return _outcome(final, print_answer=False)


def _task_id_sayer(progress: Progress) -> Callable[[str | None], None]:
    """A plain send's first line, on stderr so stdout is the answer alone (above the progress line)."""

    def say(task_id: str | None) -> None:
        if task_id is not None:
            progress.say(f"task {task_id}")

    return say


def _progress_of(progress: Progress) -> Callable[[StreamItem], None]:
    def on_event(item: StreamItem) -> None:
        if isinstance(item, TaskStatusUpdateEvent):
            progress.state(item.status.state.value)

    return on_event


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


async def task_list(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise ConfigError(f"--limit {args.limit}: give a number of tasks of at least 1")
    tasks: list[Task] = []
    total = 0
    async with connect(args) as client:
        await client.wait_for_agent(args.agent, timeout=AGENT_WAIT_S)  # an unknown name: did you mean...
        token: str | None = None
        while len(tasks) < args.limit:
            page = await client.list_tasks(
                args.agent,
                status=TaskState(args.state) if args.state else None,
                context_id=args.context,
                page_size=min(MAX_TASK_PAGE_SIZE, args.limit - len(tasks)),
                page_token=token,
                history_length=0,
                timeout=args.timeout,
            )
            tasks += page.tasks
            total = page.total_size
            token = page.next_page_token
            if not token:
                break
    if args.json:
        print(json.dumps([t.to_wire_dict() for t in tasks], indent=2, ensure_ascii=False))
    elif tasks:
        print(tasks_table(tasks))
    if not tasks:
        print(f"agent {args.agent!r} has no {_which_tasks(args)}", file=sys.stderr)
    elif total > len(tasks):
        print(f"({len(tasks)} of {total} {_which_tasks(args)}; --limit shows more)", file=sys.stderr)
    return EXIT_OK


def _which_tasks(args: argparse.Namespace) -> str:
    words = [f"{args.state} tasks" if args.state else "tasks"]
    if args.context:
        words.append(f"in context {args.context!r}")
    return " ".join(words)


async def _task_get(args: argparse.Namespace) -> int:
    async with connect(args) as client:
        await client.wait_for_agent(args.agent, timeout=AGENT_WAIT_S)
        task = await client.get_task(args.agent, args.task_id, history_length=args.history, timeout=args.timeout)
    print(as_json(task, indent=2) if args.json else task_summary(task))
    return EXIT_OK


async def _task_cancel(args: argparse.Namespace) -> int:
    async with connect(args) as client:
        await client.wait_for_agent(args.agent, timeout=AGENT_WAIT_S)
        task = await client.cancel_task(args.agent, args.task_id, timeout=args.timeout)
    print(as_json(task, indent=2) if args.json else task_summary(task))
    return EXIT_OK


TASK_COMMANDS: dict[str, Command] = {"get": _task_get, "cancel": _task_cancel}
