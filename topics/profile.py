"""Topics of the other dialect: EMQX's "A2A over MQTT" profile v0.1 (``$a2a/v1/...``).

The profile's topics are ``$a2a/v1/{discovery|request|reply|event}/{org}/{unit}/{agent}``,
pools ``$a2a/v1/request/{org}/{unit}/pool/{pool}`` (members subscribe through
``$share/a2a.{org}.{unit}.{pool}/...``), and replies go to a requester's
``$a2a/v1/reply/{org}/{unit}/{agent}/{suffix}``. Every id matches ``[A-Za-z0-9_.-]+`` (bounded
here to 128 characters like the mesh's identifiers), and the MQTT client id of an agent is
``{org}/{unit}/{agent}``::

    >>> profile_request_topic("acme", "ai", "echo")
    '$a2a/v1/request/acme/ai/echo'
    >>> parse_profile_discovery_topic("$a2a/v1/discovery/acme/ai/echo")
    ('acme', 'ai', 'echo')
    >>> profile_reply_topic_problem("acme/a2a/v1/agent/request/echo") is None
    False

The ``$`` prefix matters: a ``#`` or ``+`` filter never matches it [MQTT-4.7.2-1], so grants
and observers name ``$a2a/...`` explicitly. Reply topics of the profile are a confined family
of their own (:func:`profile_reply_topic_problem`), as the SAM answer topics are.
"""

from __future__ import annotations

import re

from .errors import InvalidIdentifierError, _quote
from .validation import IDENTIFIER_PATTERN, SHARE_PREFIX

__all__ = [
    "PROFILE_PREFIX",
    "PROFILE_PROBE_SUFFIX",
    "parse_profile_discovery_topic",
    "profile_client_id",
    "profile_discovery_filter",
    "profile_discovery_topic",
    "profile_pool_subscription",
    "profile_pool_topic",
    "profile_probe_topic",
    "profile_reply_topic",
    "profile_reply_topic_problem",
    "profile_request_topic",
    "profile_share_group",
    "validate_profile_id",
]

PROFILE_PREFIX = "$a2a/v1"
#: The reply suffix of a pool member's probe of ``$share`` (:func:`profile_probe_topic`).
PROFILE_PROBE_SUFFIX = "a2a-pool-probe"
#: Most levels a reply topic's suffix may have (the SDK uses one; room for a requester's own).
MAX_REPLY_SUFFIX_LEVELS = 4

_ID = re.compile(IDENTIFIER_PATTERN)
_DISCOVERY = re.compile(rf"\$a2a/v1/discovery/({IDENTIFIER_PATTERN})/({IDENTIFIER_PATTERN})/({IDENTIFIER_PATTERN})")
_REPLY = re.compile(
    rf"\$a2a/v1/reply/{IDENTIFIER_PATTERN}/{IDENTIFIER_PATTERN}/{IDENTIFIER_PATTERN}"
    rf"(?:/{IDENTIFIER_PATTERN}){{1,{MAX_REPLY_SUFFIX_LEVELS}}}"
)


def validate_profile_id(value: str, what: str = "profile id") -> str:
    """Return ``value`` if it is a profile id (org, unit, agent, pool), else raise InvalidIdentifierError."""
    if not isinstance(value, str) or _ID.fullmatch(value) is None:
        raise InvalidIdentifierError(
            f"invalid {what} {_quote(value)}: use 1-128 characters from A-Z a-z 0-9 _ . - (the profile's ids)"
        )
    return value


def _topic(kind: str, org: str, unit: str, agent: str) -> str:
    validate_profile_id(org, "org")
    validate_profile_id(unit, "unit")
    validate_profile_id(agent, "agent id")
    return f"{PROFILE_PREFIX}/{kind}/{org}/{unit}/{agent}"


def profile_discovery_topic(org: str, unit: str, agent: str) -> str:
    """``$a2a/v1/discovery/{org}/{unit}/{agent}``: the agent's retained card."""
    return _topic("discovery", org, unit, agent)


def profile_request_topic(org: str, unit: str, agent: str) -> str:
    """``$a2a/v1/request/{org}/{unit}/{agent}``: requests to one agent."""
    return _topic("request", org, unit, agent)


def profile_pool_topic(org: str, unit: str, pool: str) -> str:
    """``$a2a/v1/request/{org}/{unit}/pool/{pool}``: requests to any member of a pool."""
    return f"{_topic('request', org, unit, 'pool')}/{validate_profile_id(pool, 'pool')}"


def profile_share_group(org: str, unit: str, pool: str) -> str:
    """The stable shared-subscription group the profile recommends: ``a2a.{org}.{unit}.{pool}``."""
    return (
        f"a2a.{validate_profile_id(org, 'org')}.{validate_profile_id(unit, 'unit')}.{validate_profile_id(pool, 'pool')}"
    )


def profile_pool_subscription(org: str, unit: str, pool: str) -> str:
    """The filter a pool member subscribes: ``$share/a2a.{org}.{unit}.{pool}/$a2a/v1/request/.../pool/{pool}``."""
    return f"{SHARE_PREFIX}{profile_share_group(org, unit, pool)}/{profile_pool_topic(org, unit, pool)}"


def profile_reply_topic(org: str, unit: str, agent: str, suffix: str) -> str:
    """``$a2a/v1/reply/{org}/{unit}/{agent}/{suffix}``: where a requester takes its replies."""
    return f"{_topic('reply', org, unit, agent)}/{validate_profile_id(suffix, 'reply suffix')}"


def profile_probe_topic(org: str, unit: str, agent: str) -> str:
    """``$a2a/v1/reply/{org}/{unit}/{agent}/a2a-pool-probe``: where a pool member finds out whether
    the broker delivers ``$`` topics to a shared subscription, by sending itself a probe. A reply
    topic of its own id (a replica's is its instance id, new at every start): no requester or
    observer of the profile's requests, cards or events reads it."""
    return profile_reply_topic(org, unit, agent, PROFILE_PROBE_SUFFIX)


def profile_discovery_filter(org: str | None = None, unit: str | None = None) -> str:
    """The filter of the profile's cards: all of them, or those of one org (and unit)."""
    levels = [validate_profile_id(org, "org") if org else "+", validate_profile_id(unit, "unit") if unit else "+"]
    return f"{PROFILE_PREFIX}/discovery/{levels[0]}/{levels[1]}/+"


def parse_profile_discovery_topic(topic: str) -> tuple[str, str, str] | None:
    """``(org, unit, agent)`` of a profile card topic, or ``None`` for any other topic."""
    found = _DISCOVERY.fullmatch(topic) if isinstance(topic, str) else None
    return None if found is None else (found[1], found[2], found[3])


def profile_client_id(org: str, unit: str, agent: str) -> str:
    """The MQTT client id the profile requires of an agent: ``{org}/{unit}/{agent}``."""
    validate_profile_id(org, "org")
    validate_profile_id(unit, "unit")
    return f"{org}/{unit}/{validate_profile_id(agent, 'agent id')}"


def profile_reply_topic_problem(topic: str) -> str | None:
    """Why ``topic`` is no reply topic of the profile (a phrase after the topic), or ``None``.

    Only ``$a2a/v1/reply/{org}/{unit}/{agent}/{suffix}`` (1-4 suffix levels of ids) is
    allowed: a request may not make an agent publish on a request, card or SAM topic.
    """
    if not isinstance(topic, str) or _REPLY.fullmatch(topic) is None:
        return (
            "is not a reply topic of the A2A over MQTT profile; use "
            "$a2a/v1/reply/{org}/{unit}/{agent}/{suffix} (ids of A-Z a-z 0-9 _ . -)"
        )
    return None
