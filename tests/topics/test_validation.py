from __future__ import annotations

import re

import pytest
from hypothesis import given

from tests.topics.strategies import identifiers, namespaces
from topics import (
    InvalidFilterError,
    InvalidIdentifierError,
    InvalidNamespaceError,
    InvalidTopicError,
    TopicError,
    validate_filter,
    validate_identifier,
    validate_namespace,
    validate_publish_topic,
    validate_share_group,
)


def assert_names_value(error: pytest.ExceptionInfo[TopicError], value: object) -> None:
    assert repr(value) in str(error.value)


# --- namespaces -------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "normalised"),
    [
        ("acme", "acme"),
        ("acme/ai", "acme/ai"),
        ("acme/ai/", "acme/ai"),  # SAM-style trailing slash
        ("a/b/c/d/e", "a/b/c/d/e"),
        ("x/a2a/v1", "x/a2a/v1"),
        ("team one/é", "team one/é"),
        ("a$b/c", "a$b/c"),  # '$' is only reserved in front
        ("!acme", "!acme"),
    ],
)
def test_valid_namespace_is_normalised(namespace: str, normalised: str) -> None:
    assert validate_namespace(namespace) == normalised


@pytest.mark.parametrize(
    ("namespace", "hint"),
    [
        ("", "must not be empty"),
        ("/", "must not be empty"),
        ("/acme", "empty level"),
        ("acme//ai", "empty level"),
        ("acme/ai//", "empty level"),  # only one trailing slash is forgiven
        ("acme/+", "wildcard character +"),
        ("acme/#", "wildcard character #"),
        ("acme/ai*", "wildcard character *"),
        ("acme/>", "wildcard character >"),
        ("$SYS", "must not start with '$'"),
        ("$share/group", "must not start with '$'"),
        ("ac\x00me", "NUL"),
        ("ac\ud800me", "UTF-8"),
        (None, "expected a str"),
        (42, "expected a str"),
    ],
)
def test_invalid_namespace_names_value_and_rule(namespace: object, hint: str) -> None:
    with pytest.raises(InvalidNamespaceError, match=re.escape(hint)) as error:
        validate_namespace(namespace)  # type: ignore[arg-type]
    assert_names_value(error, namespace)
    assert isinstance(error.value, ValueError)


@given(namespaces)
def test_generated_namespaces_are_valid_and_stable(namespace: str) -> None:
    assert validate_namespace(namespace) == namespace
    assert validate_namespace(f"{namespace}/") == namespace


# --- identifiers ------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "a",
        "research_agent",
        "web-ui.2",
        ".",
        "..",
        pytest.param("x" * 128, id="128-chars"),
        "A-Z_a-z.0-9",
    ],
)
def test_valid_identifier(value: str) -> None:
    assert validate_identifier(value) == value


@pytest.mark.parametrize(
    "value",
    [
        "",
        "my agent",
        "a/b",
        pytest.param("x" * 129, id="129-chars"),
        "a+",
        "a#",
        "a*",
        "a>",
        "é",
        "a\n",
        "$a",
        None,
        7,
    ],
)
def test_invalid_identifier_names_value_and_rule(value: object) -> None:
    with pytest.raises(InvalidIdentifierError) as error:
        validate_identifier(value, "task id")  # type: ignore[arg-type]
    message = str(error.value)
    assert message.startswith("invalid task id ")
    assert "use 1-128 characters from A-Z a-z 0-9 _ . -" in message
    assert repr(value)[:40] in message


def test_identifier_message_matches_the_documented_example() -> None:
    with pytest.raises(InvalidIdentifierError) as error:
        validate_identifier("my agent")
    assert str(error.value) == (
        "invalid agent name 'my agent': use 1-128 characters from A-Z a-z 0-9 _ . - (no spaces or '/')"
    )


def test_huge_value_is_shortened_in_message() -> None:
    value = "y" * 10_000
    with pytest.raises(InvalidIdentifierError) as error:
        validate_identifier(value, "client id")
    message = str(error.value)
    assert "'yyyy" in message
    assert "(10000 characters)" in message
    assert len(message) < 300


@given(identifiers)
def test_generated_identifiers_are_valid(value: str) -> None:
    assert validate_identifier(value) == value


# --- publish topics ---------------------------------------------------------


@pytest.mark.parametrize(
    "topic",
    [
        "a",
        "a/b",
        "/",
        "a//b",
        "$custom/x",
        "a/*/>",
        pytest.param("é" * 30_000, id="60000-bytes"),
        "a b",
    ],
)
def test_valid_publish_topic(topic: str) -> None:
    assert validate_publish_topic(topic) == topic


@pytest.mark.parametrize(
    ("topic", "hint"),
    [
        ("", "must not be empty"),
        ("a/+", "wildcard"),
        ("a/#", "wildcard"),
        ("a+b", "wildcard"),
        ("a\x00b", "NUL"),
        pytest.param("x" * 65_536, "65536 bytes", id="65536-ascii"),
        # The limit is in bytes, not characters.
        pytest.param("é" * 32_768, "65536 bytes", id="65536-bytes-of-e-acute"),
        ("a\udc80", "UTF-8"),
        (None, "expected a str"),
    ],
)
def test_invalid_publish_topic(topic: object, hint: str) -> None:
    with pytest.raises(InvalidTopicError, match=re.escape(hint)) as error:
        validate_publish_topic(topic)  # type: ignore[arg-type]
    assert repr(topic)[:40] in str(error.value)


# --- filters ----------------------------------------------------------------


@pytest.mark.parametrize(
    "topic_filter",
    [
        "#",
        "+",
        "a/#",
        "a/+/c",
        "+/+",
        "/#",
        "a//b",
        "a/+/#",
        "$SYS/#",
        "a/>",
        "a*",
        "$share/g/a/+",
        "$share/g/#",
    ],
)
def test_valid_filter(topic_filter: str) -> None:
    assert validate_filter(topic_filter) == topic_filter


@pytest.mark.parametrize(
    ("topic_filter", "hint"),
    [
        ("", "must not be empty"),
        ("a/#/b", "'#' must be the last level"),
        ("#/a", "'#' must be the last level"),
        ("a#", "whole level"),
        ("a/b#", "whole level"),
        ("a+/b", "whole level"),
        ("a/+b", "whole level"),
        ("$share/", "share group ''"),
        ("$share//a", "share group ''"),
        ("$share/g+/a", "share group 'g+'"),
        ("$share/g#/a", "share group 'g#'"),
        ("$share/g", "a filter must follow the share group"),
        ("$share/g/", "a filter must follow the share group"),
        ("$share/g/a/#/b", "'#' must be the last level"),
        ("a\x00", "NUL"),
        pytest.param("x" * 65_536, "65536 bytes", id="65536-ascii"),
        (None, "expected a str"),
    ],
)
def test_invalid_filter(topic_filter: object, hint: str) -> None:
    with pytest.raises(InvalidFilterError, match=re.escape(hint)) as error:
        validate_filter(topic_filter)  # type: ignore[arg-type]
    assert repr(topic_filter)[:40] in str(error.value)


@pytest.mark.parametrize("group", ["g", "workers-1", "research_agent", "é"])
def test_valid_share_group(group: str) -> None:
    assert validate_share_group(group) == group


@pytest.mark.parametrize("group", ["", "a/b", "a+", "#", "a\x00", None])
def test_invalid_share_group(group: object) -> None:
    with pytest.raises(InvalidFilterError) as error:
        validate_share_group(group)  # type: ignore[arg-type]
    assert_names_value(error, group)
    assert "$share/<group>/<filter>" in str(error.value)
