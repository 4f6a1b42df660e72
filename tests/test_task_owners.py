"""Tasks belong to their users (DESIGN, "Trust"), on a real Mosquitto under the generated rules.

The insider attack of issue 23: a compromised agent (``calculator``, connected with its own
credentials, which may not read echo's requests) asked echo for ``tasks/list`` and got other
users' messages, and cancelled an HTTP user's running task. Now each task records its owner (the
verified user of its token, else the calling component) and only the owner, or an operator of
the agent, gets an answer; anyone else is told "task not found".

Issue 39's: the owner was the component whose answer topic the request named, so calculator,
naming the CLI's (``replyTo`` = ``{ns}/a2a/v1/client/response/cli``), cancelled the CLI's task
and set a push config that sent the task to its own URL. The calling component is now what its
caller token proves (mesh.trust.callers), and the answer topic proves nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from agents import Agent
from agents.builtin import EchoAgent
from agents.service import AgentService
from agents.settings import AgentSettings
from agents.sqlitejournal import SqliteJournal
from mesh.a2a import (
    PushNotificationConfig,
    Task,
    TaskIdParams,
    TaskNotFound,
    TaskPushNotificationConfig,
    TaskQueryParams,
    TaskState,
    TaskStatus,
    request_bytes,
)
from mesh.calls import CallPath
from mesh.client import MeshClient
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.trust import TokenMinter, generate_keys
from mesh.trust.callers import CallerMinter
from mesh.trust.config import TrustSettings, resolve
from mesh.trust.keys import PrivateKey, load_private_key, private_key_path
from tests.http_receiver import Receiver
from tests.http_receiver import serve as serve_http
from tests.support import Inbox
from tests.test_broker_rules import RuledBroker, ruled_broker  # noqa: F401  (the fixture)


class Waiter(Agent):
    """Works until cancelled: a task that is still running when the attacker comes."""

    name = "echo"
    description = "waits"

    async def handle(self, message, ctx):  # type: ignore[no-untyped-def]
        await asyncio.Event().wait()


@pytest.fixture
async def echo(ruled_broker: RuledBroker, tmp_path: Path) -> AsyncIterator[AgentService]:  # noqa: F811
    keys = tmp_path / "keys"
    generate_keys(keys, [*SIGNERS])
    trust = resolve(TrustSettings(keys=keys, token_issuers=("http",)), "echo", tmp_path)
    # Push URLs on loopback allowed: the attacker's receiver of the push attack listens there.
    settings = AgentSettings(task_store=":memory:", operators=("user:root",), allow_private_push_urls=True)
    service = AgentService(
        Waiter(), namespace=ruled_broker.namespace, broker=ruled_broker.settings("echo"), settings=settings, trust=trust
    )
    await service.start()
    try:
        yield service
    finally:
        await service.stop()


#: The components with a signing key (as under mesh up): echo, the gateway, the CLI, calculator.
SIGNERS = ("echo", "http", "cli", "calculator")


def _key(tmp_path: Path, name: str) -> PrivateKey:
    """Component ``name``'s own signing key (its caller tokens)."""
    return load_private_key(private_key_path(tmp_path / "keys", name), kid=name)


def _minter(tmp_path: Path, namespace: str) -> TokenMinter:
    """What the gateway ``http`` signs user tokens with."""
    return TokenMinter(load_private_key(private_key_path(tmp_path / "keys", "http")), issuer="http", audience=namespace)


async def test_a_foreign_caller_gets_task_not_found(
    ruled_broker: RuledBroker,  # noqa: F811
    echo: AgentService,
    tmp_path: Path,
) -> None:
    ns = ruled_broker.namespace
    minter = _minter(tmp_path, ns)
    cli = ruled_broker.settings("cli")
    async with (
        MeshClient.connect(cli, ns, user_id="alice", auth_token=minter.mint("alice")) as alice,
        MeshClient.connect(cli, ns, user_id="bob", auth_token=minter.mint("bob")) as bob,
        MeshClient.connect(cli, ns, user_id="root", auth_token=minter.mint("root")) as root,
        # No user token: owned by the component its caller token proves, client:cli.
        MeshClient.connect(cli, ns, caller_key=_key(tmp_path, "cli")) as anonymous_cli,
        MeshClient.connect(
            ruled_broker.settings("calculator"), ns, client_id=ruled_broker.client_id("calculator"), name="calculator"
        ) as calculator,
    ):
        # The compromised agent talks as what it is: an agent, reading its own answer topics.
        signer = CallerMinter(_key(tmp_path, "calculator"), kind="agent", namespace=ns)
        calculator.calls = CallPath(calculator.transport, ns, "calculator", role="agent", signer=signer)
        task = await alice.send("echo", "alice's secret", blocking=False)
        assert task.status.state in (TaskState.submitted, TaskState.working)
        mine = await anonymous_cli.send("echo", "the cli's own", blocking=False)

        for intruder in (calculator, bob, anonymous_cli):
            listed = await intruder.list_tasks("echo")
            assert task.id not in {t.id for t in listed.tasks}
            with pytest.raises(TaskNotFound, match=f"has no task '{task.id}'"):
                await intruder.get_task("echo", task.id)
            with pytest.raises(TaskNotFound, match=f"has no task '{task.id}'"):
                await intruder.cancel_task("echo", task.id)
            # Not even a hint: the same answer as for a task that never existed.
            with pytest.raises(TaskNotFound, match="has no task 'f00'"):
                await intruder.get_task("echo", "f00")
        assert [t.id for t in (await calculator.list_tasks("echo")).tasks] == []
        assert [t.id for t in (await anonymous_cli.list_tasks("echo")).tasks] == [mine.id]  # its own only

        # The owner sees and cancels its own; the operator sees everyone's.
        assert (await alice.get_task("echo", task.id)).status.state is TaskState.working
        assert [t.id for t in (await alice.list_tasks("echo")).tasks] == [task.id]
        assert {task.id, mine.id} <= {t.id for t in (await root.list_tasks("echo")).tasks}
        assert (await alice.cancel_task("echo", task.id)).status.state is TaskState.canceled
        assert (await root.cancel_task("echo", mine.id)).status.state is TaskState.canceled


class Witness(Agent):
    """Says who its handler was told asked: the user and the calling component (as echo: the broker's rules)."""

    name = "echo"
    description = "who asks"

    async def handle(self, message, ctx):  # type: ignore[no-untyped-def]
        return f"user={ctx.user_id} verified={ctx.user_verified} caller={ctx.caller}"


async def test_a_handler_knows_the_calling_component_and_the_user_apart(
    ruled_broker: RuledBroker,  # noqa: F811
    tmp_path: Path,
) -> None:
    ns = ruled_broker.namespace
    keys = tmp_path / "keys"
    generate_keys(keys, [*SIGNERS])
    trust = resolve(TrustSettings(keys=keys, token_issuers=("http",)), "echo", tmp_path)
    service = AgentService(
        Witness(),
        namespace=ns,
        broker=ruled_broker.settings("echo"),
        settings=AgentSettings(task_store=":memory:"),
        trust=trust,
    )
    await service.start()
    cli = ruled_broker.settings("cli")
    minter = _minter(tmp_path, ns)
    try:
        async with (
            MeshClient.connect(cli, ns, caller_key=_key(tmp_path, "cli")) as plain,  # what `mesh send` is
            MeshClient.connect(
                cli, ns, user_id="alice", auth_token=minter.mint("alice"), caller_key=_key(tmp_path, "cli")
            ) as alice,
        ):
            said = await plain.send("echo", "who?")
            assert isinstance(said, Task) and said.status.message is not None
            assert said.status.message.parts[0].text == "user=None verified=False caller=client:cli"
            as_alice = await alice.send("echo", "who?")
            assert isinstance(as_alice, Task) and as_alice.status.message is not None
            assert as_alice.status.message.parts[0].text == "user=alice verified=True caller=client:cli"
    finally:
        await service.stop()


async def test_a_message_continuing_anothers_task_is_refused(
    ruled_broker: RuledBroker,  # noqa: F811
    echo: AgentService,
    tmp_path: Path,
) -> None:
    ns = ruled_broker.namespace
    minter = _minter(tmp_path, ns)
    cli = ruled_broker.settings("cli")
    async with (
        MeshClient.connect(cli, ns, user_id="alice", auth_token=minter.mint("alice")) as alice,
        MeshClient.connect(cli, ns, user_id="bob", auth_token=minter.mint("bob")) as bob,
    ):
        task = await alice.send("echo", "hi", blocking=False)
        with pytest.raises(TaskNotFound):
            await bob.send("echo", "let me in", task_id=task.id)
        with pytest.raises(TaskNotFound):
            await bob.resubscribe("echo", task.id).__anext__()
        await alice.cancel_task("echo", task.id)


async def test_owners_survive_a_restart_of_the_agent(
    ruled_broker: RuledBroker,  # noqa: F811
    tmp_path: Path,
) -> None:
    """Owners are journaled with their tasks: after the agent restarts on the same task store, a
    task created before it is still its owner's only."""
    ns = ruled_broker.namespace
    keys = tmp_path / "keys"
    generate_keys(keys, [*SIGNERS])
    trust = resolve(TrustSettings(keys=keys, token_issuers=("http",)), "echo", tmp_path)
    settings = AgentSettings(task_store=str(tmp_path / "echo.sqlite3"))
    minter = _minter(tmp_path, ns)
    cli = ruled_broker.settings("cli")

    def service() -> AgentService:
        return AgentService(
            EchoAgent(), namespace=ns, broker=ruled_broker.settings("echo"), settings=settings, trust=trust
        )

    first = service()
    await first.start()
    try:
        async with MeshClient.connect(cli, ns, user_id="alice", auth_token=minter.mint("alice")) as alice:
            task = await alice.send("echo", "alice's secret")
            assert task.status.state is TaskState.completed
    finally:
        await first.stop()
    again = service()
    await again.start()
    try:
        async with (
            MeshClient.connect(cli, ns, user_id="alice", auth_token=minter.mint("alice")) as alice,
            MeshClient.connect(cli, ns, user_id="bob", auth_token=minter.mint("bob")) as bob,
            MeshClient.connect(cli, ns, caller_key=_key(tmp_path, "cli")) as anonymous_cli,
        ):
            for intruder in (bob, anonymous_cli):
                with pytest.raises(TaskNotFound, match=f"has no task '{task.id}'"):
                    await intruder.get_task("echo", task.id)
                assert task.id not in {t.id for t in (await intruder.list_tasks("echo")).tasks}
            kept = await alice.get_task("echo", task.id)
            assert kept.status.state is TaskState.completed
            assert [t.id for t in (await alice.list_tasks("echo")).tasks] == [task.id]
    finally:
        await again.stop()


async def test_naming_the_clis_answer_topic_gives_no_right_to_its_tasks(
    ruled_broker: RuledBroker,  # noqa: F811
    echo: AgentService,
    tmp_path: Path,
) -> None:
    """Issue 39's attack: calculator, with its own credentials, sends echo ``tasks/cancel`` and
    ``tasks/pushNotificationConfig/set`` for the CLI's running task, naming the CLI's answer topic
    (``replyTo`` and Response Topic), with no caller token, with its own, and with one the CLI
    signed for calculator (which calculator receives on every request the CLI sends it). The
    task runs on, and no push reaches the attacker's URL; the CLI itself still cancels it."""
    ns = ruled_broker.namespace
    cli_key = _key(tmp_path, "cli")
    proofs = {
        "none": None,
        "its own": CallerMinter(_key(tmp_path, "calculator"), kind="agent", namespace=ns).mint("echo"),
        "the cli's, for calculator": CallerMinter(cli_key, kind="client", namespace=ns).mint("calculator"),
        "the cli's, forged kind": CallerMinter(_key(tmp_path, "calculator"), kind="client", namespace=ns).mint("echo"),
    }
    for attacker in serve_http(Receiver()):  # a generator of one: stopped after the loop
        await _attack(ruled_broker, ns, cli_key, proofs, attacker)


async def _attack(
    ruled_broker: RuledBroker,  # noqa: F811
    ns: str,
    cli_key: PrivateKey,
    proofs: dict[str, str | None],
    attacker: Receiver,
) -> None:
    cli_answers = f"{ns}/a2a/v1/client/response/cli"
    async with (
        MeshClient.connect(ruled_broker.settings("cli"), ns, caller_key=cli_key) as cli,
        MeshClient.connect(
            ruled_broker.settings("calculator"), ns, client_id=ruled_broker.client_id("calculator"), name="calculator"
        ) as calculator,
    ):
        task = await cli.send("echo", "the cli's long job", blocking=False)
        push = PushNotificationConfig(id="stolen", url=attacker.url())
        for how, proof in proofs.items():
            for number, (method, params) in enumerate(
                (
                    ("tasks/cancel", TaskIdParams(id=task.id)),
                    (
                        "tasks/pushNotificationConfig/set",
                        TaskPushNotificationConfig(task_id=task.id, **{"push_notification_config": push}),
                    ),
                )
            ):
                key = f"attack-{number}-{how.replace(' ', '-')}"
                props = MessageProperties(
                    reply_to=cli_answers,
                    correlation_data=key.encode(),
                    caller_token=proof,
                    content_type=JSON_CONTENT_TYPE,
                    payload_format_utf8=True,
                )
                await calculator.transport.publish(
                    f"{ns}/a2a/v1/agent/request/echo", request_bytes(method, key, params), properties=props
                )
        # Calculator's own request, on the same topic after its attacks, is answered after them.
        answers = Inbox()
        await calculator.transport.subscribe(f"{ns}/a2a/v1/agent/response/calculator/barrier", answers)
        await calculator.transport.publish(
            f"{ns}/a2a/v1/agent/request/echo",
            request_bytes("tasks/get", "barrier", TaskQueryParams(id=task.id)),
            properties=MessageProperties(
                reply_to=f"{ns}/a2a/v1/agent/response/calculator/barrier",
                correlation_data=b"barrier",
                content_type=JSON_CONTENT_TYPE,
                payload_format_utf8=True,
            ),
        )
        [refused] = await answers.wait_for(1)
        assert b"has no task" in refused.payload  # calculator cannot read the CLI's task either
        assert (await cli.get_task("echo", task.id)).status.state is TaskState.working
        assert (await cli.list_push_configs("echo", task.id)) == []
        assert attacker.requests == []
        # The CLI's own push config: the cancel's notification reaches it, and would reach the
        # attacker's URL in the same round (set first, sent first) had an attack stored one.
        await cli.set_push_config("echo", task.id, PushNotificationConfig(id="cli", url=attacker.url("/cli")))
        assert (await cli.cancel_task("echo", task.id)).status.state is TaskState.canceled
        pushed = await attacker.wait_for(1)
        assert [(r.path, r.task.status.state) for r in pushed] == [("/cli", TaskState.canceled)]


def test_a_journal_of_an_older_version_gets_the_owner_column(tmp_path: Path) -> None:
    """A journal written before owners were kept (and keyed by task id): its tasks come back in
    the new layout with no owner (only the agent's operators see them)."""
    path = tmp_path / "old.sqlite3"
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=TaskState.completed))
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.executescript(
            "CREATE TABLE tasks (id TEXT PRIMARY KEY, request_key TEXT, terminal INTEGER NOT NULL, "
            "changed_at REAL NOT NULL, task BLOB NOT NULL);"
        )
        db.execute("INSERT INTO tasks VALUES ('t1', NULL, 1, 0, ?)", (task.to_json_bytes(),))
        db.commit()
    loaded = SqliteJournal(path, agent_name="echo").load()
    assert [(stored.task.id, stored.owner) for stored in loaded.tasks] == [("t1", None)]
    with contextlib.closing(sqlite3.connect(path)) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "tasks" not in tables and db.execute("SELECT id, owner FROM task_rows").fetchall() == [("t1", None)]
