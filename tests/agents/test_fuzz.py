"""Hostile payloads and user properties, published raw to an agent on the real broker.

Hypothesis draws a batch of requests (a few thousand cases in all): random bytes, random
JSON, JSON-RPC requests with hostile ids, methods and params (lone surrogates, deep nesting,
wrong types), and user properties with hostile ``replyTo`` / ``a2aStatusTopic`` /
``a2aUserConfig`` / ``callDepth`` values. They are published through a transport (not the
client, which would refuse most of them). Every request with a usable ``replyTo`` (an answer
topic of the namespace, or none but a ``clientId``) must be answered exactly once, the others
never; the agent must serve a normal request afterwards, and log no traceback.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mesh.a2a import Method, Task, TaskState
from mesh.client import MeshClient
from mesh.properties import MessageProperties
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent, TransportFactory
from tests.support import Inbox

CASES = 1200
CLIENT = "fuzz"
# Placeholders for the test's namespace, filled in once it is known.
REPLY = "{ns}/a2a/v1/client/response/fuzz"
STATUS = "{ns}/a2a/v1/client/status/fuzz/s1"
BAD_TOPICS = ["", "x/#", "+", "{ns}/a2a/v1/agent/request/echo", "other/a2a/v1/client/response/fuzz", "{ns}/#"]

hostile_text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["\ud800", "a\udfffb", "\x00", "\u202e", "😀", "../..", "+/#", "x" * 300]),
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | hostile_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(hostile_text, inner, max_size=4),
    max_leaves=12,
)


def deep(depth: int) -> Any:
    value: Any = "leaf"
    for n in range(depth):
        value = [value] if n % 2 else {"k": value}
    return value


parts = st.one_of(
    st.builds(lambda t: {"kind": "text", "text": t}, hostile_text),
    st.builds(lambda d: {"kind": "data", "data": d}, st.dictionaries(hostile_text, json_values, max_size=3)),
    st.builds(lambda n: {"kind": "data", "data": {"deep": deep(n)}}, st.integers(20, 400)),
    st.builds(lambda k: {"kind": k}, hostile_text),
    json_values,
)
messages = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["user", "agent", "robot"]),
        "messageId": hostile_text,
        "parts": st.lists(parts, max_size=3),
    },
    optional={"contextId": hostile_text, "taskId": hostile_text, "metadata": json_values, "kind": hostile_text},
)
params = st.one_of(
    st.fixed_dictionaries(
        {"message": messages},
        optional={
            "configuration": st.fixed_dictionaries({}, optional={"blocking": st.booleans()}),
            "metadata": json_values,
        },
    ),
    st.fixed_dictionaries({"id": hostile_text}, optional={"historyLength": st.integers(-2, 5)}),
    json_values,
)
requests = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "2.0", "1.0", 2]),
        "id": st.one_of(hostile_text, st.integers(), st.none(), st.floats(allow_nan=False)),
        "method": st.one_of(
            st.sampled_from([m.value for m in Method if "pushNotification" not in m.value]), hostile_text
        ),
        "params": params,
    },
)
# ensure_ascii writes a lone surrogate as the escape "\ud800", as a hostile peer would.
payloads = st.one_of(
    st.binary(max_size=64),
    requests.map(lambda doc: json.dumps(doc, ensure_ascii=True).encode()),
    json_values.map(lambda doc: json.dumps(doc).encode()),
    st.integers(1000, 3000).map(
        lambda n: b'{"jsonrpc":"2.0","id":"d","method":"message/send","params":' + b"[" * n + b"]" * n + b"}"
    ),
)
# User property values: the broker refuses non-UTF-8 text and control characters (MQTT-1.5.4).
property_text = st.text(st.characters(codec="utf-8", categories=["L", "M", "N", "P", "S", "Zs"]), max_size=20)
user_configs = st.one_of(
    st.just('{"a":' * 5000 + "1" + "}" * 5000),
    st.just(json.dumps(deep(40))),
    st.just('{"tone":"terse"}'),
    property_text,
)


@dataclass
class Case:
    payload: bytes
    reply_to: str | None  # a placeholder of REPLY / BAD_TOPICS, or None
    client_id: str | None
    status_topic: str | None
    extra: list[tuple[str, str]]


cases = st.builds(
    Case,
    payloads,
    st.one_of(st.just(REPLY), st.just(REPLY), st.none(), st.sampled_from(BAD_TOPICS)),
    st.one_of(st.just(CLIENT), st.none(), property_text),
    st.one_of(st.none(), st.just(STATUS), st.sampled_from(BAD_TOPICS)),
    st.lists(
        st.tuples(st.sampled_from(["a2aUserConfig", "callDepth", "a2aCallChain", "userId", "timestamp"]), property_text)
        | st.tuples(st.just("a2aUserConfig"), user_configs),
        max_size=2,
    ),
)


def draw_cases() -> list[Case]:
    drawn: list[Case] = []

    @settings(
        max_examples=CASES,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(cases)
    def collect(case: Case) -> None:
        drawn.append(case)

    collect()
    return drawn


def usable(case: Case) -> bool:
    """Whether the agent has somewhere to answer: our reply topic, or none but our clientId."""
    return case.reply_to == REPLY or (case.reply_to is None and case.client_id == CLIENT)


async def test_hostile_requests_are_each_answered_once_and_the_agent_keeps_serving(
    serve_agent: ServeAgent,
    client: MeshClient,
    make_transport: TransportFactory,
    namespace: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    drawn = draw_cases()
    service = await serve_agent(Echo())
    sender = await make_transport()
    answers = Inbox()
    await sender.subscribe(REPLY.format(ns=namespace), answers)
    expected = set()
    with caplog.at_level(logging.INFO):
        for index, case in enumerate(drawn):
            correlation = f"f{index}".encode()
            extra = list(case.extra)
            if case.reply_to is not None:  # as a user property: the native Response Topic must be valid
                extra.append(("replyTo", case.reply_to.format(ns=namespace)))
            if case.status_topic is not None:
                extra.append(("a2aStatusTopic", case.status_topic.format(ns=namespace)))
            props = MessageProperties(client_id=case.client_id, correlation_data=correlation, extra=extra)
            await sender.publish(f"{namespace}/a2a/v1/agent/request/echo", case.payload, properties=props)
            if usable(case):
                expected.add(correlation)
        await answers.wait_for(len(expected), timeout=60)
        after = await client.send("echo", "still serving")  # requests are handled in order
    assert isinstance(after, Task) and after.status.state is TaskState.completed
    counts = Counter(m.properties.correlation_data for m in answers.messages)
    assert set(counts) == expected, "answers to requests without a usable replyTo, or requests never answered"
    assert [c for c, n in counts.items() if n != 1] == []  # exactly once
    for message in answers.messages:
        doc = json.loads(message.payload)
        assert doc["jsonrpc"] == "2.0" and ("result" in doc) != ("error" in doc)
    assert [r.getMessage() for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR] == []
    assert "Traceback" not in caplog.text and "never retrieved" not in caplog.text
    assert list(service.tasks.active()) == []  # nothing left hanging
