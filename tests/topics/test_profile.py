"""The EMQX profile's topics: built, parsed back, validated, and its reply family confined."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topics import (
    InvalidIdentifierError,
    parse_profile_discovery_topic,
    profile_client_id,
    profile_discovery_filter,
    profile_discovery_topic,
    profile_pool_subscription,
    profile_pool_topic,
    profile_reply_topic,
    profile_reply_topic_problem,
    profile_request_topic,
    topic_matches,
)

ids = st.from_regex(r"[A-Za-z0-9_.-]{1,20}", fullmatch=True)


@given(ids, ids, ids)
def test_discovery_topics_round_trip(org: str, unit: str, agent: str) -> None:
    topic = profile_discovery_topic(org, unit, agent)
    assert topic == f"$a2a/v1/discovery/{org}/{unit}/{agent}"
    assert parse_profile_discovery_topic(topic) == (org, unit, agent)
    assert topic_matches(profile_discovery_filter(), topic)


def test_the_profile_topic_family() -> None:
    assert profile_request_topic("acme", "ai", "echo") == "$a2a/v1/request/acme/ai/echo"
    assert profile_pool_topic("acme", "ai", "p") == "$a2a/v1/request/acme/ai/pool/p"
    assert profile_pool_subscription("acme", "ai", "p") == "$share/a2a.acme.ai.p/$a2a/v1/request/acme/ai/pool/p"
    assert profile_reply_topic("acme", "ai", "me", "s1") == "$a2a/v1/reply/acme/ai/me/s1"
    assert profile_client_id("acme", "ai", "echo") == "acme/ai/echo"
    assert profile_discovery_filter("acme") == "$a2a/v1/discovery/acme/+/+"
    assert parse_profile_discovery_topic("$a2a/v1/discovery/acme/ai") is None
    assert parse_profile_discovery_topic("ns/a2a/v1/discovery/agentcards/echo") is None


@pytest.mark.parametrize("bad", ["", "a/b", "+", "#", "a b", "é", "x" * 129])
def test_bad_ids_are_refused_naming_the_value(bad: str) -> None:
    with pytest.raises(InvalidIdentifierError, match="invalid org"):
        profile_request_topic(bad, "ai", "echo")


@pytest.mark.parametrize(
    "topic",
    [
        "$a2a/v1/reply/acme/ai/me/s1",
        "$a2a/v1/reply/acme/ai/me/s1/s2",
    ],
)
def test_reply_topics_of_the_profile_are_allowed(topic: str) -> None:
    assert profile_reply_topic_problem(topic) is None


@pytest.mark.parametrize(
    "topic",
    [
        "$a2a/v1/request/acme/ai/echo",  # a request topic: reflection
        "$a2a/v1/discovery/acme/ai/echo",  # a card
        "$a2a/v1/reply/acme/ai/me",  # no suffix
        "$a2a/v1/reply/acme/ai/me/+",  # a wildcard
        "$a2a/v1/reply/acme/ai/me/a/b/c/d/e",  # too deep
        "ns/a2a/v1/client/response/cli",  # a SAM topic
        "",
    ],
)
def test_other_topics_are_no_profile_reply_topics(topic: str) -> None:
    assert profile_reply_topic_problem(topic) is not None
