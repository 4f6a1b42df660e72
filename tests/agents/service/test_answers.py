"""Every accepted request gets exactly one answer; answers go only to the agent's answer topics.

The classes of issue 9: a lone surrogate in the text, the method, the contextId or the id;
an ``a2aStatusTopic`` that is a wildcard, empty or another agent's request topic; a
``replyTo`` outside the answer topics; an ``a2aUserConfig`` nested 5,000 deep. Each is refused
before work starts (no task is created), costs one log line and no traceback.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from agents import Agent, TaskContext
from mesh.a2a import Message, Task, TaskState
from mesh.client import MeshClient
from mesh.errors import short_repr
from mesh.properties import MessageProperties
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent, TransportFactory
from tests.support import Inbox, answer_of


def send_json(request_id: str, *, text: str = "hi", method: str = "message/send", **message: Any) -> bytes:
    """A message/send request written by hand, escapes kept: ``json.dumps`` writes "\\ud800" as is."""
    body = {"role": "user", "messageId": "m-1", "parts": [{"kind": "text", "text": text}], **message}
    doc = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {"message": body}}
    return json.dumps(doc).encode()


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
    assert "Traceback" not in caplog.text and "never retrieved" not in caplog.text


@pytest.mark.parametrize(
    ("payload", "code", "fragment", "answer_id"),
    [
        (send_json("s-1", text="\ud800"), -32602, "params.message.parts.0.text: holds a lone surrogate", "s-1"),
        (send_json("s-2", contextId="\udfff"), -32602, "params.message.contextId: holds a lone surrogate", "s-2"),
        (send_json("s-3", method="message/\ud800"), -32600, "method holds a lone surrogate", "s-3"),
        (send_json("\ud800"), -32600, "id holds a lone surrogate", "c-1"),  # the id cannot be echoed
        (send_json("s-4", metadata={"\ud800": 1}), -32602, "the key holds a lone surrogate", "s-4"),
    ],
)
async def test_a_lone_surrogate_is_refused_before_work_starts(
    serve_agent: ServeAgent,
    client: MeshClient,
    caplog: pytest.LogCaptureFixture,
    payload: bytes,
    code: int,
    fragment: str,
    answer_id: str,
) -> None:
    service = await serve_agent(Echo())
    with caplog.at_level(logging.INFO):
        answer = await answer_of(client, payload)
    assert answer["error"]["code"] == code and fragment in answer["error"]["message"]
    assert answer["id"] == answer_id
    assert len(service.tasks) == 0  # no task was created
    assert sum("refused request" in r.getMessage() for r in caplog.records) == 1
    no_tracebacks(caplog)
    again = await client.send("echo", "still here")
    assert isinstance(again, Task) and again.status.state is TaskState.completed


class Garbler(Agent):
    """Answers with text no JSON can carry: the runtime must still answer."""

    name = "garbler"

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        return "bad \ud800 text"


async def test_an_answer_that_cannot_be_serialized_is_answered_with_an_internal_error(
    serve_agent: ServeAgent, client: MeshClient, caplog: pytest.LogCaptureFixture
) -> None:
    await serve_agent(Garbler())
    answer = await answer_of(client, send_json("g-1"), agent="garbler")
    assert answer["id"] == "g-1" and answer["error"]["code"] == -32603
    assert "not valid UTF-8" in answer["error"]["message"]
    no_tracebacks(caplog)


@pytest.mark.parametrize(
    "status_topic", ["x/#", "", "{ns}/a2a/v1/agent/request/victim", "other/a2a/v1/client/status/c/t"]
)
async def test_a_bad_status_topic_is_answered_on_reply_to_and_never_published_to(
    serve_agent: ServeAgent,
    client: MeshClient,
    make_transport: TransportFactory,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
    status_topic: str,
) -> None:
    service = await serve_agent(Echo())
    status_topic = status_topic.format(ns=namespace)
    watcher = await make_transport()
    seen = Inbox()
    await watcher.subscribe(f"{namespace}/a2a/v1/agent/request/victim", seen)
    answer = await answer_of(
        client, send_json("t-1", method="message/stream"), MessageProperties(status_topic=status_topic)
    )
    assert answer["id"] == "t-1" and answer["error"]["code"] == -32600
    assert "a2aStatusTopic" in answer["error"]["message"] and answer["error"]["data"] == {"property": "a2aStatusTopic"}
    assert len(service.tasks) == 0
    # Anything the agent had published on the victim topic would arrive before this marker.
    await watcher.publish(f"{namespace}/a2a/v1/agent/request/victim", b"marker")
    assert (await seen.wait_for(1))[0].payload == b"marker" and len(seen.messages) == 1
    no_tracebacks(caplog)


@pytest.mark.parametrize(
    "reply_to", ["x/#", "", "{ns}/a2a/v1/agent/request/victim", "{ns}/a2a/v1/discovery/agentcards/x"]
)
async def test_a_request_whose_reply_to_is_no_answer_topic_is_logged_and_dropped(
    serve_agent: ServeAgent,
    client: MeshClient,
    make_transport: TransportFactory,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
    reply_to: str,
) -> None:
    service = await serve_agent(Echo())
    reply_to = reply_to.format(ns=namespace)
    watcher = await make_transport()
    seen = Inbox()
    await watcher.subscribe(f"{namespace}/a2a/v1/#", seen)
    # As a user property only: a native Response Topic with a wildcard is a protocol error.
    props = MessageProperties(extra=[("replyTo", reply_to)], correlation_data=b"r-1")
    with caplog.at_level(logging.WARNING):
        await watcher.publish(f"{namespace}/a2a/v1/agent/request/echo", send_json("r-1"), properties=props)
        await client.send("echo", "barrier")  # requests are handled in order
    assert service.dispatcher.dropped == 1
    problem = service.answers.topic_problem(reply_to)
    assert [r.getMessage() for r in caplog.records if "dropped a request" in r.getMessage()] == [
        f"echo: dropped a request: its replyTo {short_repr(reply_to)} {problem}; nothing is answered"
    ]
    assert service.tasks.get("r-1") is None
    assert [
        m
        for m in seen.messages
        if m.properties.correlation_data == b"r-1" and m.topic != f"{namespace}/a2a/v1/agent/request/echo"
    ] == []
    no_tracebacks(caplog)


async def test_a_user_config_nested_5000_deep_is_refused_with_its_reason(
    serve_agent: ServeAgent, client: MeshClient, caplog: pytest.LogCaptureFixture
) -> None:
    service = await serve_agent(Echo())
    deep = '{"a":' * 5000 + "1" + "}" * 5000
    with caplog.at_level(logging.INFO):
        answer = await answer_of(client, send_json("u-1"), MessageProperties(extra=[("a2aUserConfig", deep)]))
    assert answer["id"] == "u-1" and answer["error"]["code"] == -32600
    assert "a2aUserConfig" in answer["error"]["message"] and "limits.max_nesting_depth" in answer["error"]["message"]
    assert len(service.tasks) == 0
    assert sum("refused request" in r.getMessage() for r in caplog.records) == 1
    no_tracebacks(caplog)
