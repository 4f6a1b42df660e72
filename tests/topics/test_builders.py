from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from tests.topics.strategies import identifiers, namespaces
from topics import (
    DiscoveryTopic,
    InvalidIdentifierError,
    InvalidNamespaceError,
    get_a2a_base_topic,
    get_agent_discovery_topic,
    get_agent_request_topic,
    get_agent_response_subscription_topic,
    get_agent_response_topic,
    get_agent_status_subscription_topic,
    get_client_response_topic,
    get_client_status_subscription_topic,
    get_client_status_topic,
    get_discovery_subscription_topic,
    get_gateway_discovery_topic,
    get_gateway_response_subscription_topic,
    get_gateway_response_topic,
    get_gateway_status_subscription_topic,
    get_gateway_status_topic,
    get_peer_agent_status_topic,
    parse_discovery_topic,
    topic_matches,
    validate_filter,
    validate_publish_topic,
)

NS = "acme/ai"


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        (get_a2a_base_topic(NS), "acme/ai/a2a/v1"),
        (
            get_agent_request_topic(NS, "research_agent"),
            "acme/ai/a2a/v1/agent/request/research_agent",
        ),
        (
            get_agent_response_topic(NS, "orch", "sub-1"),
            "acme/ai/a2a/v1/agent/response/orch/sub-1",
        ),
        (
            get_peer_agent_status_topic(NS, "orch", "sub-1"),
            "acme/ai/a2a/v1/agent/status/orch/sub-1",
        ),
        (
            get_agent_response_subscription_topic(NS, "orch"),
            "acme/ai/a2a/v1/agent/response/orch/+",
        ),
        (
            get_agent_status_subscription_topic(NS, "orch"),
            "acme/ai/a2a/v1/agent/status/orch/+",
        ),
        (
            get_gateway_response_topic(NS, "web_ui", "task-1"),
            "acme/ai/a2a/v1/gateway/response/web_ui/task-1",
        ),
        (
            get_gateway_status_topic(NS, "web_ui", "task-1"),
            "acme/ai/a2a/v1/gateway/status/web_ui/task-1",
        ),
        (
            get_gateway_response_subscription_topic(NS, "web_ui"),
            "acme/ai/a2a/v1/gateway/response/web_ui/+",
        ),
        (
            get_gateway_status_subscription_topic(NS, "web_ui"),
            "acme/ai/a2a/v1/gateway/status/web_ui/+",
        ),
        (
            get_agent_discovery_topic(NS, "research_agent"),
            "acme/ai/a2a/v1/discovery/agentcards/research_agent",
        ),
        (get_agent_discovery_topic(NS), "acme/ai/a2a/v1/discovery/agentcards"),
        (
            get_gateway_discovery_topic(NS, "web_ui"),
            "acme/ai/a2a/v1/discovery/gatewaycards/web_ui",
        ),
        (get_gateway_discovery_topic(NS), "acme/ai/a2a/v1/discovery/gatewaycards"),
        (get_discovery_subscription_topic(NS), "acme/ai/a2a/v1/discovery/#"),
        (
            get_client_response_topic(NS, "cli-1"),
            "acme/ai/a2a/v1/client/response/cli-1",
        ),
        (
            get_client_status_topic(NS, "cli-1", "task-1"),
            "acme/ai/a2a/v1/client/status/cli-1/task-1",
        ),
        (
            get_client_status_subscription_topic(NS, "cli-1"),
            "acme/ai/a2a/v1/client/status/cli-1/+",
        ),
        # SAM namespaces often carry a trailing slash.
        (get_agent_request_topic("acme/ai/", "a"), "acme/ai/a2a/v1/agent/request/a"),
    ],
)
def test_topic_table(topic: str, expected: str) -> None:
    assert topic == expected


# Every helper, with the number of identifier arguments after the namespace.
HELPERS: list[tuple[Callable[..., str], int]] = [
    (get_a2a_base_topic, 0),
    (get_agent_request_topic, 1),
    (get_agent_response_topic, 2),
    (get_peer_agent_status_topic, 2),
    (get_agent_response_subscription_topic, 1),
    (get_agent_status_subscription_topic, 1),
    (get_gateway_response_topic, 2),
    (get_gateway_status_topic, 2),
    (get_gateway_response_subscription_topic, 1),
    (get_gateway_status_subscription_topic, 1),
    (get_agent_discovery_topic, 1),
    (get_gateway_discovery_topic, 1),
    (get_discovery_subscription_topic, 0),
    (get_client_response_topic, 1),
    (get_client_status_topic, 2),
    (get_client_status_subscription_topic, 1),
]
IDENTIFIER_ARGUMENTS = [(helper, arity, position) for helper, arity in HELPERS for position in range(arity)]


def _argument_id(value: object) -> str:
    return getattr(value, "__name__", str(value))


@pytest.mark.parametrize(("helper", "arity"), HELPERS, ids=_argument_id)
@pytest.mark.parametrize("namespace", ["", "a//b", "a/+", "$SYS", "a/>"])
def test_helpers_refuse_bad_namespace(helper: Callable[..., str], arity: int, namespace: str) -> None:
    with pytest.raises(InvalidNamespaceError) as error:
        helper(namespace, *["ok"] * arity)
    assert repr(namespace) in str(error.value)


@pytest.mark.parametrize(("helper", "arity", "position"), IDENTIFIER_ARGUMENTS, ids=_argument_id)
@pytest.mark.parametrize(
    "value",
    [
        "",
        "a/b",
        "my agent",
        "+",
        "#",
        ">",
        "*",
        pytest.param("x" * 129, id="129-chars"),
        5,
    ],
)
def test_helpers_refuse_bad_identifiers(helper: Callable[..., str], arity: int, position: int, value: object) -> None:
    args: list[object] = ["ok"] * arity
    args[position] = value
    with pytest.raises(InvalidIdentifierError) as error:
        helper(NS, *args)
    assert repr(value)[:40] in str(error.value)


def test_publish_topics_and_subscriptions_are_valid_mqtt() -> None:
    for helper, arity in HELPERS:
        result = helper(NS, *["x"] * arity)
        if helper.__name__.endswith("subscription_topic"):
            assert validate_filter(result) == result
            assert ">" not in result
        else:
            assert validate_publish_topic(result) == result


# --- discovery parsing ------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "topic", "expected"),
    [
        (
            "acme",
            "acme/a2a/v1/discovery/agentcards/search",
            DiscoveryTopic("agent", "search"),
        ),
        ("acme", "acme/a2a/v1/discovery/agentcards", DiscoveryTopic("agent", None)),
        (
            "acme",
            "acme/a2a/v1/discovery/gatewaycards/web_ui",
            DiscoveryTopic("gateway", "web_ui"),
        ),
        ("acme", "acme/a2a/v1/discovery/gatewaycards", DiscoveryTopic("gateway", None)),
        (
            "acme/",
            "acme/a2a/v1/discovery/agentcards/search",
            DiscoveryTopic("agent", "search"),
        ),
        ("a/b", "a/b/a2a/v1/discovery/agentcards/x", DiscoveryTopic("agent", "x")),
        ("other", "acme/a2a/v1/discovery/agentcards/search", None),
        ("b", "a/b/a2a/v1/discovery/agentcards/search", None),  # a deeper namespace
        ("acme", "x/acme/a2a/v1/discovery/agentcards/search", None),
        ("acme", "acme/a2a/v1/discovery/agentcards/search/extra", None),
        ("acme", "acme/a2a/v1/discovery/agentcards/bad name", None),
        ("acme", "acme/a2a/v1/discovery/toolcards/search", None),
        ("acme", "acme/a2a/v1/discovery", None),
        ("acme", "acme/a2a/v1/agent/request/search", None),
    ],
)
def test_parse_discovery_topic(namespace: str, topic: str, expected: DiscoveryTopic | None) -> None:
    assert parse_discovery_topic(namespace, topic) == expected


def test_parse_discovery_topic_validates_namespace() -> None:
    with pytest.raises(InvalidNamespaceError):
        parse_discovery_topic("a/#", "a/a2a/v1/discovery/agentcards")


@given(
    namespace=namespaces,
    name=identifiers,
    kind=st.sampled_from(["agent", "gateway"]),
    named=st.booleans(),
)
def test_parse_discovery_topic_inverts_builders(namespace: str, name: str, kind: str, named: bool) -> None:
    build = get_agent_discovery_topic if kind == "agent" else get_gateway_discovery_topic
    topic = build(namespace, name if named else None)
    assert parse_discovery_topic(namespace, topic) == DiscoveryTopic(kind, name if named else None)  # type: ignore[arg-type]
    assert topic_matches(get_discovery_subscription_topic(namespace), topic)


# --- isolation properties ---------------------------------------------------


@dataclass(frozen=True)
class Category:
    """A kind of topic: how it is published and how its owner subscribes to it."""

    name: str
    publish: Callable[[str, str, str], str]  # (namespace, owner, task_id)
    subscribe: Callable[[str, str], str]  # (namespace, owner)


CATEGORIES = [
    Category(
        "agent response",
        get_agent_response_topic,
        get_agent_response_subscription_topic,
    ),
    Category("agent status", get_peer_agent_status_topic, get_agent_status_subscription_topic),
    Category(
        "gateway response",
        get_gateway_response_topic,
        get_gateway_response_subscription_topic,
    ),
    Category(
        "gateway status",
        get_gateway_status_topic,
        get_gateway_status_subscription_topic,
    ),
    Category("client status", get_client_status_topic, get_client_status_subscription_topic),
    # Topics without a task level are subscribed to exactly.
    Category(
        "agent request",
        lambda ns, owner, _: get_agent_request_topic(ns, owner),
        get_agent_request_topic,
    ),
    Category(
        "client response",
        lambda ns, owner, _: get_client_response_topic(ns, owner),
        get_client_response_topic,
    ),
    Category(
        "agent card",
        lambda ns, owner, _: get_agent_discovery_topic(ns, owner),
        get_agent_discovery_topic,
    ),
    Category(
        "gateway card",
        lambda ns, owner, _: get_gateway_discovery_topic(ns, owner),
        get_gateway_discovery_topic,
    ),
]
CARDS = {"agent card", "gateway card"}


@given(namespace=namespaces, owner=identifiers, other=identifiers, task_id=identifiers)
def test_each_topic_reaches_its_owner_only(namespace: str, owner: str, other: str, task_id: str) -> None:
    assume(owner != other)
    discovery = get_discovery_subscription_topic(namespace)
    for published, subscribed in itertools.product(CATEGORIES, repeat=2):
        topic = published.publish(namespace, owner, task_id)
        same = published is subscribed
        assert topic_matches(subscribed.subscribe(namespace, owner), topic) is same, (
            published,
            subscribed,
        )
        assert not topic_matches(subscribed.subscribe(namespace, other), topic), (
            published,
            subscribed,
        )
    for category in CATEGORIES:
        topic = category.publish(namespace, owner, task_id)
        assert topic_matches(discovery, topic) is (category.name in CARDS), category


@given(first=namespaces, second=namespaces, owner=identifiers, task_id=identifiers)
def test_namespaces_are_isolated(first: str, second: str, owner: str, task_id: str) -> None:
    # A namespace nested in another's discovery tree is the one overlap MQTT allows.
    assume(first != second and not first.startswith(f"{second}/") and not second.startswith(f"{first}/"))
    subscriptions = [get_discovery_subscription_topic(second)]
    subscriptions += [category.subscribe(second, owner) for category in CATEGORIES]
    for category in CATEGORIES:
        topic = category.publish(first, owner, task_id)
        assert not any(topic_matches(subscription, topic) for subscription in subscriptions), category
