from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.topics.strategies import identifiers, namespaces
from topics import (
    InvalidFilterError,
    get_agent_request_topic,
    shared_subscription,
    split_shared_subscription,
    topic_matches,
)


@pytest.mark.parametrize(
    ("topic_filter", "topic", "expected"),
    [
        ("a/b", "a/b", True),
        ("a/b", "a/b/c", False),
        ("a/b", "A/b", False),  # case-sensitive
        ("a/+", "a/b", True),
        ("a/+", "a", False),
        ("a/+", "a/", True),  # '+' matches an empty level
        ("+/x", "/x", True),
        ("a/+", "a/b/c", False),
        ("a/+/c", "a/b/c", True),
        ("a/+/c", "a/b/d", False),
        ("+/+", "a/b", True),
        ("+", "a", True),
        ("+", "a/b", False),
        ("#", "a", True),
        ("#", "a/b/c", True),
        ("#", "/", True),
        ("a/#", "a", True),  # '#' includes the parent level
        ("a/#", "a/", True),
        ("a/#", "a/b/c", True),
        ("a/#", "ab", False),
        ("a/#", "b/a", False),
        ("a/+/#", "a", False),
        ("a/+/#", "a/b", True),
        ("a/+/#", "a/b/c/d", True),
        ("/#", "/x", True),
        ("/#", "x", False),
        ("a//b", "a//b", True),
        # Wildcard-first filters never see '$' topics [MQTT-4.7.2-1].
        ("#", "$SYS/broker/version", False),
        ("+/x", "$custom/x", False),
        ("+/broker/version", "$SYS/broker/version", False),
        ("$SYS/#", "$SYS/broker/version", True),
        ("$SYS/+/version", "$SYS/broker/version", True),
        ("a/#", "a/$b", True),
        # Regex metacharacters in the filter are plain text.
        ("a.b/+", "axb/c", False),
        ("a.b/+", "a.b/c", True),
        ("(a|b)/+", "a/c", False),
        ("a/[x]/#", "a/[x]/y", True),
        # Solace wildcards mean nothing to MQTT.
        ("a/>", "a/>", True),
        ("a/>", "a/b", False),
        ("a/*", "a/b", False),
        # Newlines are legal in topics.
        ("a/+", "a/b\nc", True),
        ("a/#", "a/b\n/c", True),
        ("a/b", "a/b\n", False),
        # The share prefix is not part of the topic.
        ("$share/g/a/+", "a/b", True),
        ("$share/g/a/+", "$share/g/a/b", False),
        ("$share/g/#", "$SYS/x", False),
        ("$share/g/a/b", "a/b", True),
    ],
)
def test_topic_matches(topic_filter: str, topic: str, expected: bool) -> None:
    assert topic_matches(topic_filter, topic) is expected


@pytest.mark.parametrize("topic_filter", ["", "a/#/b", "a+", "$share//x", "$share/g"])
def test_topic_matches_refuses_bad_filters(topic_filter: str) -> None:
    with pytest.raises(InvalidFilterError, match=re.escape(repr(topic_filter))):
        topic_matches(topic_filter, "a")


@pytest.mark.parametrize(
    ("topic_filter", "expected"),
    [
        ("a/b", (None, "a/b")),
        ("$share/g/a/b", ("g", "a/b")),
        ("$share/g/#", ("g", "#")),
        ("$share/g/$share/h/x", ("g", "$share/h/x")),
        ("$SYS/#", (None, "$SYS/#")),
        ("share/g/a", (None, "share/g/a")),
    ],
)
def test_split_shared_subscription(topic_filter: str, expected: tuple[str | None, str]) -> None:
    assert split_shared_subscription(topic_filter) == expected


@pytest.mark.parametrize("topic_filter", ["$share/", "$share//a", "$share/g", "$share/g/", "$share/g+/a"])
def test_split_shared_subscription_refuses_malformed(topic_filter: str) -> None:
    with pytest.raises(InvalidFilterError, match=re.escape(repr(topic_filter))) as error:
        split_shared_subscription(topic_filter)
    assert "$share/<group>/<filter>" in str(error.value)


def test_shared_subscription() -> None:
    assert shared_subscription("workers", "acme/a2a/v1/agent/request/x") == (
        "$share/workers/acme/a2a/v1/agent/request/x"
    )
    assert shared_subscription("g", "#") == "$share/g/#"


@pytest.mark.parametrize(
    ("group", "topic_filter", "hint"),
    [
        ("a/b", "x", "share group 'a/b'"),
        ("", "x", "share group ''"),
        ("g+", "x", "share group 'g+'"),
        ("g", "$share/h/x", "already a shared subscription"),
        ("g", "a/#/b", "'#' must be the last level"),
        ("g", "", "a filter must follow the share group"),
    ],
)
def test_shared_subscription_refuses(group: str, topic_filter: str, hint: str) -> None:
    with pytest.raises(InvalidFilterError, match=re.escape(hint)):
        shared_subscription(group, topic_filter)


@given(namespace=namespaces, agent=identifiers)
def test_replicas_share_the_request_topic(namespace: str, agent: str) -> None:
    topic = get_agent_request_topic(namespace, agent)
    assert topic_matches(shared_subscription(agent, topic), topic)


# --- agreement with a plain level-by-level reference -------------------------


def reference_matches(topic_filter: str, topic: str) -> bool:
    """MQTT matching written straight from the spec, slowly."""
    _, topic_filter = split_shared_subscription(topic_filter)
    filter_levels, topic_levels = topic_filter.split("/"), topic.split("/")
    if topic.startswith("$") and filter_levels[0] in ("+", "#"):
        return False
    for index, level in enumerate(filter_levels):
        if level == "#":
            return True
        if index >= len(topic_levels) or level not in ("+", topic_levels[index]):
            return False
    return len(filter_levels) == len(topic_levels)


LEVELS = ["a", "b", "", "$x", ".", "a.b", "\n"]
topic_levels = st.sampled_from(LEVELS)
topics = st.lists(topic_levels, min_size=1, max_size=5).map("/".join).filter(bool)
filters = st.builds(
    lambda levels, tail, share: share + "/".join(levels + tail),
    st.lists(st.one_of(topic_levels, st.just("+")), min_size=0, max_size=4),
    st.sampled_from([[], ["#"]]),
    st.sampled_from(["", "$share/g/"]),
).filter(lambda f: f not in ("", "$share/g/"))


@given(topic_filter=filters, topic=topics)
def test_agrees_with_reference(topic_filter: str, topic: str) -> None:
    assert topic_matches(topic_filter, topic) is reference_matches(topic_filter, topic)
