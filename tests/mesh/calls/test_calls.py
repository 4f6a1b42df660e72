"""The one call path (mesh.calls) against the real broker: routing, timeouts, cancel, parsing,
and the callee being gone (the end to end tests with kill -9: test_callee_gone.py)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agents.service import AgentService
from mesh.a2a import (
    InvalidAgentResponse,
    MessageSendParams,
    Task,
    TaskNotFound,
    TaskQueryParams,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
    create_user_message,
    get_text_from_message,
)
from mesh.calls import CallOptions, CallPath, CardWatch, Role, follow_registry
from mesh.discovery.registry import DiscoveryRegistry
from mesh.errors import AgentUnavailableError, CallTimeoutError, MeshError
from mesh.properties import MessageProperties
from mesh.transport import InboundMessage, Transport
from tests.agents.service_agents import Blocker, Echo, Ticker
from tests.conftest import ServeAgent, TransportFactory
from tests.support import Inbox, publish_stale_card

MakeCalls = Callable[..., Awaitable[CallPath]]


@pytest.fixture
def make_calls(make_transport: TransportFactory, namespace: str) -> MakeCalls:
    async def make(role: Role = "agent", owner: str = "caller") -> CallPath:
        calls = CallPath(await make_transport(client_id=f"{owner}-{role}"), namespace, owner, role=role)
        await calls.start()
        return calls

    return make


def send(text: str) -> MessageSendParams:
    return MessageSendParams(message=create_user_message([TextPart(text=text)]))


def reply_text(task: object) -> str:
    assert isinstance(task, Task) and task.status.message is not None
    return get_text_from_message(task.status.message)


def only_record(service: AgentService) -> Any:
    [record] = list(service.tasks._tasks.values())
    return record


class FakeAgent:
    """An 'agent' the test answers by hand: what it got, and what it sends back, when."""

    def __init__(self, transport: Transport, namespace: str, name: str = "fake") -> None:
        self.transport = transport
        self.topic = f"{namespace}/a2a/v1/agent/request/{name}"
        self.requests = Inbox()

    async def start(self) -> FakeAgent:
        await self.transport.subscribe(self.topic, self.requests)
        return self

    async def answer(self, request: InboundMessage, payload: bytes) -> None:
        props = request.properties
        assert props.reply_to is not None
        await self.transport.publish(
            props.reply_to, payload, properties=MessageProperties(correlation_data=props.correlation_data)
        )


def task_answer(request: InboundMessage, text: str) -> bytes:
    request_id = json.loads(request.payload)["id"]
    task = {
        "kind": "task",
        "id": request_id,
        "contextId": "ctx",
        "status": {
            "state": "completed",
            "message": {
                "kind": "message",
                "role": "agent",
                "messageId": "m",
                "parts": [{"kind": "text", "text": text}],
            },
        },
    }
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": task}).encode()


@pytest.mark.parametrize("role", ["agent", "gateway", "client"])
async def test_each_role_gets_its_answers_and_events(
    role: Role, serve_agent: ServeAgent, make_calls: MakeCalls
) -> None:
    await serve_agent(Ticker(ticks=2, every_s=0.01))
    calls = await make_calls(role)
    async with calls.call("ticker", "message/stream", send("go")) as call:
        answers = [answer async for answer in call.events()]
    assert [a.final for a in answers] == [False] * (len(answers) - 1) + [True]
    events = [a.value for a in answers[:-1]]
    assert all(isinstance(e, TaskStatusUpdateEvent) for e in events) and len(events) >= 2
    assert reply_text(answers[-1].parse(Task)) == "ticked"
    assert calls.calls_to("ticker") == []  # closed with its block


async def test_a_chatty_agent_outlives_the_idle_timeout(serve_agent: ServeAgent, make_calls: MakeCalls) -> None:
    await serve_agent(Ticker(ticks=6, every_s=0.1))  # 0.6 s in all, never 0.3 s silent
    calls = await make_calls()
    answer = await calls.request("ticker", "message/send", send("tick"), CallOptions(idle_timeout_s=0.3))
    assert reply_text(answer.value) == "ticked"


async def test_the_deadline_bounds_even_a_chatty_call(serve_agent: ServeAgent, make_calls: MakeCalls) -> None:
    ticker = await serve_agent(Ticker(ticks=50, every_s=0.05))
    calls = await make_calls()
    options = CallOptions(idle_timeout_s=5, deadline_s=0.3)
    with pytest.raises(CallTimeoutError) as caught:
        await calls.request("ticker", "message/send", send("tick"), options)
    assert caught.value.reason == "deadline" and "no reply within 0.3 s" in str(caught.value)
    record = only_record(ticker)
    await asyncio.wait_for(record.settled.wait(), 5)
    assert record.state is TaskState.canceled


async def test_an_idle_timeout_cancels_the_callees_task_by_its_id(
    serve_agent: ServeAgent, make_calls: MakeCalls
) -> None:
    agent = Blocker()
    blocker = await serve_agent(agent)
    calls = await make_calls()
    with pytest.raises(CallTimeoutError) as caught:
        await calls.request("blocker", "message/send", send("wait"), CallOptions(idle_timeout_s=0.3))
    error = caught.value
    record = only_record(blocker)
    assert error.task_id == record.id and error.canceled and error.reason == "idle"
    assert f"message/send to agent 'blocker': no reply or event for 0.3 s on task {record.id!r}" in str(error)
    await asyncio.wait_for(record.settled.wait(), 5)
    assert record.state is TaskState.canceled and agent.cancellations == 1


async def test_canceling_the_caller_cancels_the_callees_task(serve_agent: ServeAgent, make_calls: MakeCalls) -> None:
    agent = Blocker()
    blocker = await serve_agent(agent)
    calls = await make_calls()
    waiting = asyncio.create_task(calls.request("blocker", "message/send", send("wait")))
    await asyncio.wait_for(agent.started.wait(), 5)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    record = only_record(blocker)
    await asyncio.wait_for(record.settled.wait(), 5)
    assert record.state is TaskState.canceled and agent.cancellations == 1


async def test_cancel_on_abandon_off_leaves_the_task_running(
    serve_agent: ServeAgent, make_calls: MakeCalls, make_transport: TransportFactory, namespace: str
) -> None:
    agent = Blocker()
    blocker = await serve_agent(agent)
    watcher = Inbox()  # every request the blocker gets, in the order they were sent
    await (await make_transport()).subscribe(f"{namespace}/a2a/v1/agent/request/blocker", watcher)
    calls = await make_calls("gateway")
    options = CallOptions(cancel_on_abandon=False)
    waiting = asyncio.create_task(calls.request("blocker", "message/send", send("wait"), options))
    await asyncio.wait_for(agent.started.wait(), 5)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    record = only_record(blocker)
    answer = await calls.request("blocker", "tasks/get", TaskQueryParams(id=record.id))
    assert answer.parse(Task).status.state is TaskState.working
    # A tasks/cancel would have been sent before the tasks/get, so the watcher would have it by now.
    methods = [json.loads(m.payload)["method"] for m in await watcher.wait_for(2)]
    assert methods == ["message/send", "tasks/get"]


async def test_a_late_answer_to_a_closed_call_is_dropped(
    make_calls: MakeCalls, make_transport: TransportFactory, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake = await FakeAgent(await make_transport(), namespace).start()
    calls = await make_calls("client")
    with pytest.raises(CallTimeoutError):
        await calls.request("fake", "message/send", send("first"), CallOptions(idle_timeout_s=0.2))
    [first] = await fake.requests.wait_for(1)
    caplog.set_level(logging.DEBUG, logger="mesh.calls")
    async with calls.call("fake", "message/send", send("second")) as call:
        [_, _cancel, second] = await fake.requests.wait_for(3)  # the timeout's tasks/cancel came in between
        assert json.loads(_cancel.payload)["method"] == "tasks/cancel"
        await fake.answer(first, task_answer(first, "late"))  # same publisher: arrives before the next
        await fake.answer(second, task_answer(second, "on time"))
        answer = await call.result()
    assert reply_text(answer.value) == "on time"
    assert any("matches no open call" in r.getMessage() for r in caplog.records)


async def test_a_malformed_answer_is_an_invalid_agent_response(
    make_calls: MakeCalls, make_transport: TransportFactory, namespace: str
) -> None:
    fake = await FakeAgent(await make_transport(), namespace).start()
    calls = await make_calls()
    for bad, reason in ((b"not json", "not valid JSON"), (b'{"jsonrpc":"2.0","id":"x"}', "exactly one of")):
        async with calls.call("fake", "message/send", send("hi")) as call:
            [*_, request] = await fake.requests.wait_for(len(fake.requests.messages) + 1)
            await fake.answer(request, bad)
            with pytest.raises(InvalidAgentResponse, match=reason):
                await call.result()
    async with calls.call("fake", "message/send", send("hi")) as call:
        [*_, request] = await fake.requests.wait_for(len(fake.requests.messages) + 1)
        await fake.answer(request, b'{"jsonrpc":"2.0","id":"x","result":{"kind":"task","id":1}}')
        answer = await call.result()
    with pytest.raises(InvalidAgentResponse, match="result"):
        answer.value  # noqa: B018 - validated on demand


async def test_concurrent_calls_never_get_each_others_answers(
    serve_agent: ServeAgent, make_calls: MakeCalls, make_transport: TransportFactory, namespace: str
) -> None:
    await serve_agent(Echo())
    calls = await make_calls("client")
    answers = await asyncio.gather(*(calls.request("echo", "message/send", send(f"n{i}")) for i in range(30)))
    assert [reply_text(a.value) for a in answers] == [f"n{i}" for i in range(30)]
    # Answered in reverse order by hand, each still reaches its own call.
    fake = await FakeAgent(await make_transport(), namespace).start()
    async with calls.call("fake", "message/send", send("a")) as a, calls.call("fake", "message/send", send("b")) as b:
        first, second = await fake.requests.wait_for(2)
        await fake.answer(second, task_answer(second, "for b"))
        await fake.answer(first, task_answer(first, "for a"))
        assert reply_text((await a.result()).value) == "for a"
        assert reply_text((await b.result()).value) == "for b"


async def test_an_error_answer_raises_its_rpc_error(serve_agent: ServeAgent, make_calls: MakeCalls) -> None:
    await serve_agent(Echo())
    calls = await make_calls("gateway")
    with pytest.raises(TaskNotFound, match="no task 'nope'") as caught:
        await calls.request("echo", "tasks/get", TaskQueryParams(id="nope"))
    assert caught.value.code == -32001


async def test_a_failure_injected_from_outside_ends_the_waiting_calls(
    make_calls: MakeCalls, make_transport: TransportFactory, namespace: str
) -> None:
    fake = await FakeAgent(await make_transport(), namespace).start()
    calls = await make_calls()
    async with calls.call("fake", "message/send", send("a")) as a, calls.call("fake", "message/send", send("b")) as b:
        assert set(calls.calls_to("fake")) == {a, b}
        await fake.requests.wait_for(2)
        waiting = [asyncio.create_task(call.result()) for call in (a, b)]
        assert calls.fail_calls_to("fake", MeshError("agent 'fake' is gone")) == 2
        for task in waiting:
            with pytest.raises(MeshError, match="is gone"):
                await task
    assert calls.calls_to("fake") == []


async def test_a_request_nobody_subscribes_to_fails_at_once(make_calls: MakeCalls, namespace: str) -> None:
    calls = await make_calls()
    with pytest.raises(AgentUnavailableError) as caught:
        await calls.request("nobody", "message/send", send("anyone?"), CallOptions(idle_timeout_s=30))
    topic = f"{namespace}/a2a/v1/agent/request/nobody"
    assert str(caught.value).startswith(f"no agent is listening on {topic!r}: agent 'nobody' is not running")
    assert (caught.value.reason, caught.value.topic) == ("not_listening", topic)
    assert calls.calls_to("nobody") == []


@pytest.mark.parametrize("source", ["registry", "card watch"])
async def test_the_callees_card_removed_fails_the_calls_waiting_on_it(
    source: str, make_calls: MakeCalls, make_transport: TransportFactory, namespace: str
) -> None:
    fake_transport = await make_transport()
    fake = await FakeAgent(fake_transport, namespace).start()
    await publish_stale_card(fake_transport, namespace, "fake")  # its card, as the agent would publish it
    calls = await make_calls()
    registry = DiscoveryRegistry(calls.transport, namespace)
    try:
        if source == "registry":
            follow_registry(calls, registry)
            await registry.start()
            await registry.wait_for("fake", 5)
        else:
            await CardWatch(calls).watch("fake")
        async with (
            calls.call("fake", "message/send", send("a")) as a,
            calls.call("fake", "message/send", send("b")) as b,
        ):
            await fake.requests.wait_for(2)
            waiting = [asyncio.create_task(call.result()) for call in (a, b)]
            await fake_transport.publish(f"{namespace}/a2a/v1/discovery/agentcards/fake", b"", retain=True)  # will
            gone = r"^agent 'fake' went away: its card was removed"
            for task in waiting:
                with pytest.raises(AgentUnavailableError, match=gone) as caught:
                    await asyncio.wait_for(task, 5)
                assert (caught.value.agent, caught.value.reason) == ("fake", "gone")
        assert calls.calls_to("fake") == []
    finally:
        await registry.stop()
