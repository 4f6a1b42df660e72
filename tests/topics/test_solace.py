from __future__ import annotations

import logging
import re
from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.topics.strategies import identifiers, namespaces
from topics import (
    InvalidFilterError,
    UnsupportedWildcardError,
    extract_task_id_from_topic,
    get_agent_response_subscription_topic,
    get_agent_response_topic,
    get_agent_status_subscription_topic,
    get_client_status_subscription_topic,
    get_client_status_topic,
    get_gateway_response_subscription_topic,
    get_gateway_response_topic,
    get_gateway_status_subscription_topic,
    get_gateway_status_topic,
    get_peer_agent_status_topic,
    solace_to_mqtt,
    topic_matches,
)

# --- solace_to_mqtt ---------------------------------------------------------


@pytest.mark.parametrize(
    ("subscription", "expected"),
    [
        ("a/b", "a/b"),
        ("a/*/c", "a/+/c"),
        ("*", "+"),
        ("a/>", "a/+/#"),  # '>' needs at least one level, MQTT '#' does not
        (">", "+/#"),
        ("*/>", "+/+/#"),
        (
            "acme/ai/a2a/v1/agent/response/orch/>",
            "acme/ai/a2a/v1/agent/response/orch/+/#",
        ),
        ("a/*/*", "a/+/+"),
    ],
)
def test_solace_to_mqtt(subscription: str, expected: str) -> None:
    assert solace_to_mqtt(subscription) == expected


def test_trailing_greater_than_needs_a_level() -> None:
    topic_filter = solace_to_mqtt("a/>")
    assert not topic_matches(topic_filter, "a")
    assert topic_matches(topic_filter, "a/b")
    assert topic_matches(topic_filter, "a/b/c")


def test_prefix_wildcard_is_refused_with_a_way_out() -> None:
    with pytest.raises(UnsupportedWildcardError) as error:
        solace_to_mqtt("acme/abc*")
    message = str(error.value)
    assert "'acme/abc*'" in message
    assert "no MQTT equivalent" in message
    assert "subscribe to 'acme/+'" in message
    assert "starts with 'abc'" in message
    assert isinstance(error.value, InvalidFilterError)


@pytest.mark.parametrize(
    "subscription",
    ["a/*bc", "a/b*c", "a/b*/c", "a/**", "a/>/b", ">/a", "a/b>", "a/>>", "!a/b"],
)
def test_unsupported_wildcards(subscription: str) -> None:
    with pytest.raises(UnsupportedWildcardError, match="no MQTT equivalent") as error:
        solace_to_mqtt(subscription)
    assert repr(subscription) in str(error.value)


@pytest.mark.parametrize(
    ("subscription", "hint"),
    [("a/+", "'+' and '#'"), ("a/#", "'+' and '#'"), ("", "non-empty")],
)
def test_mqtt_wildcards_and_empty_are_refused(subscription: str, hint: str) -> None:
    with pytest.raises(InvalidFilterError, match=re.escape(hint)) as error:
        solace_to_mqtt(subscription)
    assert not isinstance(error.value, UnsupportedWildcardError)
    assert repr(subscription) in str(error.value)


def solace_matches(subscription: str, topic: str) -> bool:
    """Solace matching as documented: '*' is one level, a final '>' one or more."""
    sub, levels = subscription.split("/"), topic.split("/")
    if sub[-1] == ">":
        sub = sub[:-1]
        if len(levels) <= len(sub):
            return False
        levels = levels[: len(sub)]
    if len(sub) != len(levels):
        return False
    return all(s in ("*", t) for s, t in zip(sub, levels, strict=True))


solace_subscriptions = st.builds(
    lambda levels, tail: "/".join(levels + tail),
    st.lists(st.sampled_from(["a", "b", "ab", "*"]), min_size=0, max_size=4),
    st.sampled_from([[], [">"]]),
).filter(bool)
# Solace has no empty levels, so neither do these topics.
solace_topics = st.lists(st.sampled_from(["a", "b", "ab", "c"]), min_size=1, max_size=6).map("/".join)


@given(subscription=solace_subscriptions, topic=solace_topics)
def test_translation_agrees_with_solace(subscription: str, topic: str) -> None:
    assert topic_matches(solace_to_mqtt(subscription), topic) is solace_matches(subscription, topic)


# --- extract_task_id_from_topic ---------------------------------------------


@pytest.mark.parametrize(
    ("topic", "subscription", "expected"),
    [
        # The example from SAM's documentation.
        (
            "acme/ai/a2a/v1/gateway/response/web_ui/task-123",
            "acme/ai/a2a/v1/gateway/response/web_ui/>",
            "task-123",
        ),
        (
            "acme/ai/a2a/v1/gateway/response/web_ui/task-123",
            "acme/ai/a2a/v1/gateway/response/web_ui/+",
            "task-123",
        ),
        ("ns/r/web/t1", "ns/r/web/*", "t1"),
        ("ns/r/web/t1", "ns/r/web/#", "t1"),
        ("ns/r/web/t1", "ns/r/web/+/#", "t1"),
        (
            "ns/r/web/t1/part",
            "ns/r/web/>",
            "t1/part",
        ),  # several levels under '>' or '#'
        ("ns/r/web/t1/part", "ns/r/web/#", "t1/part"),
        ("ns/r/web/t1", "ns/r/+/+", "web/t1"),  # everything from the first wildcard
        ("ns/r/web/t1", "#", "ns/r/web/t1"),
        ("ns/r/web/t1", "$share/g/ns/r/web/+", "t1"),
        ("ns/r/web/t1/part", "ns/r/web/+", None),  # '+' is one level
        ("ns/r/other/t1", "ns/r/web/>", None),
        ("ns/r/webx/t1", "ns/r/web/>", None),
        ("ns/r/web", "ns/r/web/#", None),  # matches, but nothing is left
        ("ns/r/web/", "ns/r/web/+", None),
        ("ns/r/web", "ns/r/web/>", None),
        ("ns/r/web/t1", "ns/r/web/t1", None),  # no wildcard, no task id
        ("$SYS/x/t1", "+/x/+", None),
    ],
)
def test_extract_task_id(topic: str, subscription: str, expected: str | None) -> None:
    assert extract_task_id_from_topic(topic, subscription) == expected


def test_extract_task_id_keeps_sam_keywords() -> None:
    task_id = extract_task_id_from_topic(
        topic="ns/a2a/v1/gateway/response/web_ui/task-123",
        subscription_pattern="ns/a2a/v1/gateway/response/web_ui/>",
        log_identifier="[Gateway]",
    )
    assert task_id == "task-123"


def test_extract_task_id_logs_misses_with_the_identifier(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.DEBUG, logger="topics.solace"):
        assert extract_task_id_from_topic("ns/other/t1", "ns/web/+", "[Gateway:web]") is None
    [record] = caplog.records
    assert record.levelno == logging.DEBUG
    assert "[Gateway:web]" in record.getMessage()
    assert "'ns/other/t1'" in record.getMessage()


@pytest.mark.parametrize(
    ("subscription", "error"),
    [
        ("ns/web/abc*", UnsupportedWildcardError),
        ("ns/#/x", InvalidFilterError),
        ("ns/+/>", InvalidFilterError),
    ],
)
def test_extract_task_id_refuses_bad_subscriptions(subscription: str, error: type[Exception]) -> None:
    with pytest.raises(error, match=re.escape(repr(subscription))):
        extract_task_id_from_topic("ns/web/abcd", subscription)


TASK_TOPICS: list[tuple[Callable[[str, str, str], str], Callable[[str, str], str]]] = [
    (get_agent_response_topic, get_agent_response_subscription_topic),
    (get_peer_agent_status_topic, get_agent_status_subscription_topic),
    (get_gateway_response_topic, get_gateway_response_subscription_topic),
    (get_gateway_status_topic, get_gateway_status_subscription_topic),
    (get_client_status_topic, get_client_status_subscription_topic),
]


@pytest.mark.parametrize(("publish", "subscribe"), TASK_TOPICS, ids=lambda f: f.__name__)
@given(namespace=namespaces, owner=identifiers, task_id=identifiers)
def test_extract_inverts_builders(
    publish: Callable[[str, str, str], str],
    subscribe: Callable[[str, str], str],
    namespace: str,
    owner: str,
    task_id: str,
) -> None:
    topic = publish(namespace, owner, task_id)
    mqtt = subscribe(namespace, owner)
    assert mqtt.endswith("/+")
    for subscription in (mqtt, f"{mqtt[:-1]}>", f"{mqtt[:-1]}*", f"{mqtt[:-1]}#"):
        assert extract_task_id_from_topic(topic, subscription) == task_id, subscription
