"""Where an agent may answer: the six answer families of its own namespace.

An agent publishes a request's answers on the topics the request names (``replyTo``,
``a2aStatusTopic``). Left unchecked, that lets anyone make an agent publish on a request
topic, a card topic or another namespace (reflection and amplification through the mesh).
DESIGN ("Reply topics are confined") allows exactly the topics of the six answer templates
(``agent|gateway|client`` x ``response|status``) in the agent's namespace::

    >>> answer_topic_problem("acme/a2a/v1/client/response/cli-1", "acme") is None
    True
    >>> answer_topic_problem("acme/a2a/v1/agent/request/echo", "acme")[:24]
    'is not an answer topic; '

Answer topics repeat (a client's response topic) or are new per task (a gateway's), so the
verdicts are cached per string and a miss costs one prefix test and a few regex matches.
"""

from __future__ import annotations

from functools import lru_cache

from .builders import (
    AGENT_RESPONSE_TOPIC,
    AGENT_STATUS_TOPIC,
    CLIENT_RESPONSE_TOPIC,
    CLIENT_STATUS_TOPIC,
    GATEWAY_RESPONSE_TOPIC,
    GATEWAY_STATUS_TOPIC,
)
from .errors import InvalidTopicError, _quote
from .templates import NAMESPACE
from .validation import validate_namespace, validate_publish_topic

__all__ = ["ANSWER_TEMPLATES", "answer_topic_problem", "validate_answer_topic"]

#: The topic shapes an agent may answer on (DESIGN, "Reply topics are confined").
ANSWER_TEMPLATES = (
    AGENT_RESPONSE_TOPIC,
    AGENT_STATUS_TOPIC,
    GATEWAY_RESPONSE_TOPIC,
    GATEWAY_STATUS_TOPIC,
    CLIENT_RESPONSE_TOPIC,
    CLIENT_STATUS_TOPIC,
)
_SHAPES = ", ".join(template.pattern.removeprefix("{namespace}/a2a/v1/") for template in ANSWER_TEMPLATES)


def answer_topic_problem(topic: str, namespace: str) -> str | None:
    """Why ``topic`` is no answer topic of ``namespace`` (a phrase after the topic), or ``None``.

    ``namespace`` must be valid (normalised as :func:`validate_namespace` returns it).
    """
    return _problem(topic, namespace) if isinstance(topic, str) else "is not a string"


def validate_answer_topic(topic: str, namespace: str) -> str:
    """Return ``topic`` if an agent of ``namespace`` may answer on it, else raise InvalidTopicError."""
    problem = answer_topic_problem(topic, validate_namespace(namespace))
    if problem is not None:
        raise InvalidTopicError(f"invalid answer topic {_quote(topic)}: {problem}")
    return topic


# Bounded: a hostile sender can only evict entries, and a miss is cheap.
@lru_cache(maxsize=4096)
def _problem(topic: str, namespace: str) -> str | None:
    try:
        validate_publish_topic(topic)
    except InvalidTopicError as exc:
        return str(exc).removeprefix(f"invalid topic {_quote(topic)}: ")  # the reason alone
    if not topic.startswith(f"{namespace}/a2a/v1/"):
        return f"is outside the namespace {namespace!r}; answers stay in the agent's namespace"
    for template in ANSWER_TEMPLATES:
        found = template.match(topic)
        if found is not None and found[NAMESPACE] == namespace:
            return None
    return f"is not an answer topic; use one of {{namespace}}/a2a/v1/ + {_SHAPES}"
