from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.topics.strategies import identifiers, namespace_levels, namespaces
from topics import (
    AGENT_REQUEST_TOPIC,
    AGENT_RESPONSE_TOPIC,
    CLIENT_RESPONSE_TOPIC,
    CLIENT_STATUS_TOPIC,
    GATEWAY_CARD_TOPIC,
    GATEWAY_STATUS_TOPIC,
    InvalidIdentifierError,
    InvalidNamespaceError,
    TemplateError,
    TopicTemplate,
    topic_matches,
)
from topics.validation import IDENTIFIER_PATTERN

RESPONSE = TopicTemplate("{namespace}/a2a/v1/agent/response/{delegating_agent_name}/{sub_task_id}")


def test_build_fills_every_level() -> None:
    topic = RESPONSE.build(namespace="acme/ai", delegating_agent_name="orchestrator", sub_task_id="sub-1")
    assert topic == "acme/ai/a2a/v1/agent/response/orchestrator/sub-1"


def test_build_normalises_the_namespace() -> None:
    assert RESPONSE.build(namespace="acme/", delegating_agent_name="o", sub_task_id="t") == (
        "acme/a2a/v1/agent/response/o/t"
    )


def test_params_keep_pattern_order() -> None:
    assert RESPONSE.params == ("namespace", "delegating_agent_name", "sub_task_id")
    assert TopicTemplate("fixed/topic").params == ()


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        (
            "acme/ai/a2a/v1/agent/response/orch/sub-1",
            {
                "namespace": "acme/ai",
                "delegating_agent_name": "orch",
                "sub_task_id": "sub-1",
            },
        ),
        # A namespace may repeat the fixed levels; the suffix decides.
        (
            "x/a2a/v1/agent/response/y/a2a/v1/agent/response/orch/t",
            {
                "namespace": "x/a2a/v1/agent/response/y",
                "delegating_agent_name": "orch",
                "sub_task_id": "t",
            },
        ),
        ("acme/a2a/v1/agent/response/orch", None),  # a level short
        ("acme/a2a/v1/agent/response/orch/t/extra", None),  # a level too many
        ("acme/a2a/v1/agent/status/orch/t", None),  # other category
        ("acme/a2a/v2/agent/response/orch/t", None),
        ("acme/a2a/v1/agent/response/my orch/t", None),  # not an identifier
        ("acme/a2a/v1/agent/response/orch/" + "t" * 129, None),
        ("acme/a2a/v1/agent/response//t", None),  # empty identifier
        ("/a2a/v1/agent/response/orch/t", None),  # empty namespace
        ("acme//x/a2a/v1/agent/response/orch/t", None),  # empty namespace level
        ("$SYS/a2a/v1/agent/response/orch/t", None),
        ("ac+me/a2a/v1/agent/response/orch/t", None),
        ("ACME/A2A/V1/AGENT/RESPONSE/orch/t", None),  # case-sensitive
    ],
)
def test_match(topic: str, expected: dict[str, str] | None) -> None:
    assert RESPONSE.match(topic) == expected


def test_literal_levels_are_not_regex() -> None:
    template = TopicTemplate("{namespace}/a.b/{name}")
    assert template.match("ns/a.b/x") == {"namespace": "ns", "name": "x"}
    assert template.match("ns/axb/x") is None


def test_percent_in_a_literal_level_is_kept() -> None:
    template = TopicTemplate("{namespace}/100%s/{name}")
    assert template.build(namespace="ns", name="x") == "ns/100%s/x"
    assert template.filter(namespace="ns") == "ns/100%s/+"
    assert template.match("ns/100%s/x") == {"namespace": "ns", "name": "x"}


def test_filter_puts_plus_for_left_out_params() -> None:
    assert RESPONSE.filter(namespace="acme") == "acme/a2a/v1/agent/response/+/+"
    assert RESPONSE.filter(namespace="acme", delegating_agent_name="o") == "acme/a2a/v1/agent/response/o/+"
    assert RESPONSE.filter(namespace="acme", sub_task_id="t") == "acme/a2a/v1/agent/response/+/t"
    assert RESPONSE.filter(namespace="acme", delegating_agent_name="o", sub_task_id="t") == RESPONSE.build(
        namespace="acme", delegating_agent_name="o", sub_task_id="t"
    )


def test_filter_without_namespace_param() -> None:
    assert TopicTemplate("fixed/{name}").filter() == "fixed/+"


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: RESPONSE.build(namespace="a", delegating_agent_name="o"),
            "missing ['sub_task_id']",
        ),
        (
            lambda: RESPONSE.build(namespace="a", delegating_agent_name="o", sub_task_id="t", extra="x"),
            "unknown ['extra']",
        ),
        (lambda: RESPONSE.filter(delegating_agent_name="o"), "missing ['namespace']"),
        (lambda: RESPONSE.filter(namespace="a", agent="o"), "unknown ['agent']"),
    ],
)
def test_wrong_params_are_named(call: object, message: str) -> None:
    with pytest.raises(TemplateError, match=re.escape(message)) as error:
        call()  # type: ignore[operator]
    assert "its parameters are ['namespace', 'delegating_agent_name', 'sub_task_id']" in str(error.value)


def test_build_validates_identifiers_by_their_param_name() -> None:
    with pytest.raises(InvalidIdentifierError, match=re.escape("invalid sub task id 'a/b'")):
        RESPONSE.build(namespace="acme", delegating_agent_name="o", sub_task_id="a/b")
    with pytest.raises(InvalidIdentifierError, match=re.escape("invalid delegating agent name 'o o'")):
        RESPONSE.filter(namespace="acme", delegating_agent_name="o o")


def test_build_validates_namespace() -> None:
    with pytest.raises(InvalidNamespaceError, match=re.escape("'acme/#'")):
        RESPONSE.build(namespace="acme/#", delegating_agent_name="o", sub_task_id="t")
    with pytest.raises(InvalidNamespaceError):
        RESPONSE.filter(namespace="")


@pytest.mark.parametrize(
    ("pattern", "hint"),
    [
        ("{namespace}/a/{name}/{name}", "parameter 'name' appears twice"),
        ("{namespace}//{name}", "empty level"),
        ("{namespace}/a/", "empty level"),
        ("{namespace}/x{name}", "whole '{param}'"),
        ("{namespace}/{bad-name}", "whole '{param}'"),
        ("{namespace}/+/{name}", "wildcards"),
        ("{namespace}/#", "wildcards"),
        ("{namespace}/a*", "wildcards"),
        ("$SYS/{name}", "reserved"),
    ],
)
def test_bad_pattern(pattern: str, hint: str) -> None:
    with pytest.raises(TemplateError, match=re.escape(hint)) as error:
        TopicTemplate(pattern)
    assert repr(pattern) in str(error.value)


def test_value_semantics() -> None:
    pattern = "{namespace}/a2a/v1/agent/request/{agent_name}"
    assert TopicTemplate(pattern) == AGENT_REQUEST_TOPIC
    assert hash(TopicTemplate(pattern)) == hash(AGENT_REQUEST_TOPIC)
    assert TopicTemplate(pattern) != RESPONSE
    assert repr(AGENT_REQUEST_TOPIC) == f"TopicTemplate({pattern!r})"


# --- properties -------------------------------------------------------------

IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
TEMPLATES = [
    AGENT_REQUEST_TOPIC,
    AGENT_RESPONSE_TOPIC,
    GATEWAY_STATUS_TOPIC,
    CLIENT_RESPONSE_TOPIC,
    CLIENT_STATUS_TOPIC,
    GATEWAY_CARD_TOPIC,
]


@st.composite
def template_params(draw: st.DrawFn, template: TopicTemplate) -> dict[str, str]:
    return {name: draw(namespaces if name == "namespace" else identifiers) for name in template.params}


@pytest.mark.parametrize("template", TEMPLATES, ids=repr)
@given(data=st.data())
def test_match_inverts_build(template: TopicTemplate, data: st.DataObject) -> None:
    params = data.draw(template_params(template))
    topic = template.build(**params)
    assert template.match(topic) == params
    assert topic_matches(template.filter(namespace=params["namespace"]), topic)


@pytest.mark.parametrize("template", TEMPLATES, ids=repr)
@given(
    namespace=namespaces,
    levels=st.lists(
        st.one_of(namespace_levels, st.sampled_from(["", "+", "$x", "a b", "x" * 129])),
        max_size=4,
    ),
)
def test_build_inverts_match(template: TopicTemplate, namespace: str, levels: list[str]) -> None:
    # Topics of roughly the template's shape, valid or not.
    prefix = template.filter(namespace=namespace).removesuffix("/+").removesuffix("/+")
    topic = "/".join([prefix, *levels])
    params = template.match(topic)
    if params is not None:
        assert template.build(**params) == topic
    if len(levels) == len(template.params) - 1 and all(IDENTIFIER.fullmatch(level) for level in levels):
        assert params == dict(zip(template.params, [namespace, *levels], strict=True))
