"""MQTT topic matching and shared subscriptions.

The semantics are MQTT's, exactly [MQTT-4.7]:

* ``+`` matches one whole level, which may be empty (``+/x`` matches ``/x``);
* ``#`` matches zero or more trailing levels (``a/#`` matches ``a``);
* a filter starting with a wildcard never matches a topic starting with ``$``
  [MQTT-4.7.2-1];
* a ``$share/<group>/`` prefix only selects delivery, so it is ignored here.

This runs for every delivered message, so each filter is validated and
compiled once (cached) and matching is one string comparison or one regex match.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from .errors import InvalidFilterError, _quote
from .validation import (
    SHARE_PREFIX,
    split_shared_subscription,
    validate_filter,
    validate_share_group,
)

__all__ = ["shared_subscription", "split_shared_subscription", "topic_matches"]


def topic_matches(topic_filter: str, topic: str) -> bool:
    """Tell whether *topic* is delivered to a subscription on *topic_filter*.

    Raises :class:`InvalidFilterError` for a malformed filter. *topic* is taken
    as a broker delivered it and is not validated.
    """
    matcher = _compile(topic_filter)
    if matcher.pattern is None:
        return topic == matcher.literal
    if matcher.skips_dollar and topic.startswith("$"):
        return False
    return matcher.pattern.fullmatch(topic) is not None


def shared_subscription(group: str, topic_filter: str) -> str:
    """Return ``$share/<group>/<topic_filter>``; *group* shares its messages."""
    validate_share_group(group)
    if topic_filter.startswith(SHARE_PREFIX):
        raise InvalidFilterError(
            f"invalid filter {_quote(topic_filter)}: it is already a shared subscription; pass the plain filter"
        )
    return validate_filter(f"{SHARE_PREFIX}{group}/{topic_filter}")


class _Matcher(NamedTuple):
    literal: str
    pattern: re.Pattern[str] | None  # None: no wildcard, compare with ``literal``
    skips_dollar: bool


@lru_cache(maxsize=4096)
def _compile(topic_filter: str) -> _Matcher:
    validate_filter(topic_filter)
    _, inner = split_shared_subscription(topic_filter)
    levels = inner.split("/")
    if "+" not in levels and "#" not in levels:
        return _Matcher(inner, None, skips_dollar=False)
    multi = levels[-1] == "#"
    head = levels[:-1] if multi else levels
    body = "/".join("[^/]*" if level == "+" else re.escape(level) for level in head)
    if multi:
        # '#' also matches the parent level itself: 'a/#' matches 'a'.
        body = f"{body}(?:/.*)?" if head else ".*"
    # DOTALL: topics may legally contain newlines.
    return _Matcher(inner, re.compile(body, re.DOTALL), skips_dollar=levels[0] in ("+", "#"))
