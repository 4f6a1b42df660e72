"""The answer topics an agent may publish on: its namespace, the six answer families."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topics import (
    ANSWER_TEMPLATES,
    InvalidTopicError,
    answer_topic_problem,
    get_agent_discovery_topic,
    get_agent_request_topic,
    get_agent_response_topic,
    get_client_response_topic,
    get_client_status_topic,
    get_gateway_response_topic,
    get_gateway_status_topic,
    get_peer_agent_status_topic,
    validate_answer_topic,
)

from .strategies import identifiers, namespaces

NS = "acme/ai"


@pytest.mark.parametrize(
    "topic",
    [
        get_agent_response_topic(NS, "orchestrator", "a2a_subtask_1"),
        get_peer_agent_status_topic(NS, "orchestrator", "a2a_subtask_1"),
        get_gateway_response_topic(NS, "web", "gw_1"),
        get_gateway_status_topic(NS, "web", "gw_1"),
        get_client_response_topic(NS, "cli-1"),
        get_client_status_topic(NS, "cli-1", "task-1"),
    ],
)
def test_the_six_answer_families_are_accepted(topic: str) -> None:
    assert answer_topic_problem(topic, NS) is None
    assert validate_answer_topic(topic, NS) == topic


@pytest.mark.parametrize(
    ("topic", "reason"),
    [
        ("", "must not be empty"),
        ("x/#", "wildcard"),
        (f"{NS}/a2a/v1/client/response/+", "wildcard"),
        (get_agent_request_topic(NS, "echo"), "is not an answer topic"),
        (get_agent_discovery_topic(NS, "echo"), "is not an answer topic"),
        (get_client_response_topic("other", "cli-1"), "outside the namespace 'acme/ai'"),
        (get_client_response_topic("acme", "cli-1"), "outside the namespace"),  # a parent namespace
        (f"{NS}/a2a/v1/client/response/cli-1/extra", "is not an answer topic"),
        (f"{NS}/a2a/v1/gateway/response/web", "is not an answer topic"),  # the task level is missing
        (f"{NS}/a2a/v1/client/response/bad id", "is not an answer topic"),
        (f"{NS}/elsewhere/p-1", "outside the namespace"),
    ],
)
def test_other_topics_are_refused_with_the_reason(topic: str, reason: str) -> None:
    problem = answer_topic_problem(topic, NS)
    assert problem is not None and reason in problem
    with pytest.raises(InvalidTopicError) as info:
        validate_answer_topic(topic, NS)
    assert str(info.value) == f"invalid answer topic {topic!r}: {problem}"


def test_an_answer_topic_of_a_nested_namespace_is_not_the_parents() -> None:
    topic = get_client_response_topic(f"{NS}/team", "cli-1")
    assert answer_topic_problem(topic, f"{NS}/team") is None
    assert answer_topic_problem(topic, NS) is not None


def test_the_refusal_lists_the_shapes_to_use() -> None:
    problem = answer_topic_problem(get_agent_request_topic(NS, "echo"), NS)
    assert problem is not None
    for template in ANSWER_TEMPLATES:
        assert template.pattern.removeprefix("{namespace}/a2a/v1/") in problem


def test_a_bad_namespace_is_refused_by_validate() -> None:
    with pytest.raises(ValueError, match="namespace"):
        validate_answer_topic("a/a2a/v1/client/response/c", "a/#")


@settings(max_examples=60)
@given(namespaces, identifiers, identifiers, st.sampled_from(range(len(ANSWER_TEMPLATES))))
def test_every_built_answer_topic_is_accepted_in_its_namespace_only(
    namespace: str, owner: str, task: str, which: int
) -> None:
    template = ANSWER_TEMPLATES[which]
    values = dict(zip(template.params[1:], (owner, task), strict=False))
    topic = template.build(namespace=namespace, **values)
    namespace = namespace.removesuffix("/")
    assert answer_topic_problem(topic, namespace) is None
    assert answer_topic_problem(topic, f"{namespace}/x") is not None
