"""Bad requests get the right JSON-RPC error; nothing accepted is left hanging."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from agents import AgentSettings, MessageLimits, TaskContext
from mesh.a2a import (
    Message,
    MessageSendParams,
    Task,
    TaskState,
    TextPart,
    create_user_message,
    get_text_from_message,
    request_bytes,
)
from mesh.client import MeshClient
from mesh.properties import MessageProperties
from tests.agents.service_agents import Broken, Echo
from tests.conftest import ServeAgent, TransportFactory
from tests.support import Inbox, raw_request


async def raw_call(client: MeshClient, payload: bytes, *, correlation: str = "raw-1") -> dict[str, Any]:
    reply = await raw_request(
        client.transport,
        client.namespace,
        f"{client.namespace}/a2a/v1/agent/request/echo",
        payload,
        timeout=5,
        correlation_id=correlation,
    )
    assert reply.properties.correlation_data == correlation.encode()  # echoed on the answer
    return json.loads(reply.payload)


def send_payload(text: str = "hi", **message_fields: Any) -> bytes:
    message = create_user_message([TextPart(text=text)])
    params = MessageSendParams(message=message.model_copy(update=message_fields))
    return request_bytes("message/send", "req-1", params)


@pytest.mark.parametrize(
    ("payload", "code", "fragment", "request_id"),
    [
        (b"{not json", -32700, "Invalid JSON", None),
        (b"\xff\xfe", -32700, "Invalid JSON", None),
        (b"[1, 2]", -32600, "JSON object", None),
        (b'{"jsonrpc":"1.0","id":"a","method":"message/send","params":{}}', -32600, 'jsonrpc must be "2.0"', "a"),
        (b'{"jsonrpc":"2.0","id":"b","method":"tasks/explode","params":{}}', -32601, "tasks/explode", "b"),
        (
            b'{"jsonrpc":"2.0","id":"c","method":"message/send","params":{"message":{"role":"user","parts":[{"kind":"img"}],"messageId":"m"}}}',
            -32602,
            "params.message.parts.0.kind",
            "c",
        ),
        (
            b'{"jsonrpc":"2.0","id":"d","method":"tasks/get","params":{"id":"x","historyLength":-1}}',
            -32602,
            "params.historyLength",
            "d",
        ),
    ],
)
async def test_malformed_requests_get_the_right_error(
    serve_agent: ServeAgent, client: MeshClient, payload: bytes, code: int, fragment: str, request_id: str | None
) -> None:
    await serve_agent(Echo())
    answer = await raw_call(client, payload)
    assert answer["error"]["code"] == code
    assert fragment in answer["error"]["message"]
    assert answer["id"] == (request_id if request_id is not None else "raw-1")


async def test_oversize_payload_is_refused_with_the_limit(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Echo(), AgentSettings(limits=MessageLimits(max_message_bytes=2000)))
    answer = await raw_call(client, send_payload("x" * 5000))
    assert answer["error"]["code"] == -32600
    assert "accepts at most 2000" in answer["error"]["message"] and "max_message_bytes" in answer["error"]["message"]


async def test_part_limits_name_the_bad_part(serve_agent: ServeAgent, client: MeshClient) -> None:
    await serve_agent(Echo(), AgentSettings(limits=MessageLimits(max_parts=2, max_text_part_bytes=10)))
    too_many = create_user_message([TextPart(text="a"), TextPart(text="b"), TextPart(text="c")])
    answer = await raw_call(client, request_bytes("message/send", "p1", MessageSendParams(message=too_many)))
    assert answer["error"]["code"] == -32602 and "params.message.parts: 3 parts" in answer["error"]["message"]
    too_long = create_user_message([TextPart(text="ok"), TextPart(text="x" * 11)])
    answer = await raw_call(client, request_bytes("message/send", "p2", MessageSendParams(message=too_long)))
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"]["errors"][0]["path"] == "params.message.parts.1.text"


async def test_a_raising_handler_fails_its_task_with_the_error_text(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    await serve_agent(Broken())
    task = await client.send("broken", "this")
    assert isinstance(task, Task) and task.status.state is TaskState.failed
    assert get_text_from_message(task.status.message) == "RuntimeError: cannot handle 'this'"  # type: ignore[arg-type]
    again = await client.send("broken", "that")  # the agent keeps serving
    assert isinstance(again, Task) and again.status.state is TaskState.failed


class NotAsync(Echo):
    name = "not-async"

    def handle(self, message: Message, ctx: TaskContext) -> Any:  # a plain def: a developer's slip
        return "never awaited"


async def test_a_handler_that_is_not_async_fails_its_task_saying_so(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    await serve_agent(NotAsync())
    task = await client.send("not-async", "hi")
    assert isinstance(task, Task) and task.status.state is TaskState.failed
    assert get_text_from_message(task.status.message) == (  # type: ignore[arg-type]
        "TypeError: NotAsync.handle returned 'never awaited'; define it with async def "
        "(returning a result, or yielding updates)"
    )


async def test_no_reply_to_falls_back_to_the_client_response_topic(
    serve_agent: ServeAgent, make_transport: TransportFactory, namespace: str
) -> None:
    await serve_agent(Echo())
    sender = await make_transport()
    inbox = Inbox()
    await sender.subscribe(f"{namespace}/a2a/v1/client/response/orphan-client", inbox)
    props = MessageProperties(client_id="orphan-client", correlation_data=b"c1")
    await sender.publish(f"{namespace}/a2a/v1/agent/request/echo", send_payload("no replyTo"), properties=props)
    [answer] = await inbox.wait_for(1)
    assert json.loads(answer.payload)["result"]["status"]["state"] == "completed"
    assert answer.properties.correlation_data == b"c1"


async def test_no_reply_to_and_no_client_id_is_logged_and_the_task_still_runs(
    serve_agent: ServeAgent,
    make_transport: TransportFactory,
    client: MeshClient,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    await serve_agent(Echo())
    sender = await make_transport()
    with caplog.at_level(logging.WARNING, logger="agents.service"):
        await sender.publish(f"{namespace}/a2a/v1/agent/request/echo", send_payload("nobody listens"))
        # Requests start in arrival order: once a later one is answered, the orphan was served.
        await client.send("echo", "barrier")
    task = await client.get_task("echo", "req-1")
    assert task.status.state is TaskState.completed
    assert get_text_from_message(task.status.message) == "nobody listens"  # type: ignore[arg-type]
    assert "no replyTo and no clientId" in caplog.text


async def test_200_concurrent_tasks_each_answered_exactly_once(
    serve_agent: ServeAgent, client: MeshClient, make_transport: TransportFactory, namespace: str
) -> None:
    await serve_agent(Echo())
    watcher = await make_transport()
    answers = Inbox()
    await watcher.subscribe(f"{namespace}/a2a/v1/client/response/{client.client_id}", answers)
    tasks = await asyncio.gather(*(client.send("echo", f"n{i}") for i in range(200)))
    texts = sorted(get_text_from_message(t.status.message) for t in tasks)  # type: ignore[union-attr,arg-type]
    assert texts == sorted(f"n{i}" for i in range(200))
    assert len({t.id for t in tasks}) == 200
    await answers.wait_for(200)
    ids = [json.loads(m.payload)["id"] for m in answers.messages]
    assert len(ids) == 200 and len(set(ids)) == 200  # exactly one answer per request


async def test_stopping_the_agent_cancels_and_answers_in_flight_tasks(
    serve_agent: ServeAgent, client: MeshClient
) -> None:
    from tests.agents.service_agents import Blocker

    agent = Blocker()
    service = await serve_agent(agent)
    pending = asyncio.ensure_future(client.send("blocker", "long job"))
    await asyncio.wait_for(agent.started.wait(), 5)
    await service.stop()
    task = await asyncio.wait_for(pending, 10)
    assert isinstance(task, Task) and task.status.state is TaskState.canceled
    assert get_text_from_message(task.status.message) == "the agent is shutting down"  # type: ignore[arg-type]
    assert agent.cancellations == 1
