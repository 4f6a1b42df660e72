"""Validation of namespaces, identifiers, topic names and subscription filters.

Two sets of rules meet here:

* the mesh's own: a namespace is one or more non-empty levels (``acme/ai``) and
  an identifier (agent name, gateway id, client id, task id) is exactly one level
  of ``[A-Za-z0-9_.-]{1,128}``;
* MQTT's [MQTT-4.7]: topics are 1-65535 bytes of UTF-8 without NUL, publish
  topics carry no wildcard, ``+`` and ``#`` fill whole filter levels and ``#``
  comes last.

The regular expressions below are the single source of truth; the templates
reuse them so that ``TopicTemplate.match`` accepts exactly what ``build`` makes.
"""

from __future__ import annotations

import re
from functools import lru_cache

from .errors import (
    InvalidFilterError,
    InvalidIdentifierError,
    InvalidNamespaceError,
    InvalidTopicError,
    _quote,
)

__all__ = [
    "IDENTIFIER_PATTERN",
    "MAX_TOPIC_BYTES",
    "NAMESPACE_PATTERN",
    "SHARE_PREFIX",
    "split_shared_subscription",
    "validate_filter",
    "validate_identifier",
    "validate_namespace",
    "validate_publish_topic",
    "validate_share_group",
]

MAX_TOPIC_BYTES = 65_535
SHARE_PREFIX = "$share/"

IDENTIFIER_PATTERN = r"[A-Za-z0-9_.-]{1,128}"
# Levels free of '/', wildcards (MQTT and Solace) and NUL; no leading '$',
# which brokers reserve ($SYS, $share) and which wildcard filters never match.
NAMESPACE_PATTERN = r"(?!\$)[^/+#*>\x00]+(?:/[^/+#*>\x00]+)*"

_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
_NAMESPACE = re.compile(NAMESPACE_PATTERN)
_IDENTIFIER_RULE = "use 1-128 characters from A-Z a-z 0-9 _ . - (no spaces or '/')"
_NAMESPACE_EXAMPLE = "use one or more non-empty '/'-separated levels such as 'acme/ai'"
_SHARE_FORM = "use '$share/<group>/<filter>'"
_SHARE_GROUP_RULE = "must be non-empty, without '/', '+', '#' or NUL"


def validate_namespace(namespace: str) -> str:
    """Return *namespace* normalised, or raise :class:`InvalidNamespaceError`.

    SAM configurations often spell the namespace with a trailing slash
    (``acme/ai/``) and SAM strips it; so do we, once: ``acme/ai//`` is refused.
    """
    if not isinstance(namespace, str):
        raise InvalidNamespaceError(f"invalid namespace {_quote(namespace)}: expected a str; {_NAMESPACE_EXAMPLE}")
    return _normalise_namespace(namespace)


# Namespaces are few and checked on every build: remember the good ones.
@lru_cache(maxsize=256)
def _normalise_namespace(namespace: str) -> str:
    value = namespace[:-1] if namespace.endswith("/") else namespace
    if _NAMESPACE.fullmatch(value) and _is_utf8(value):
        return value
    raise InvalidNamespaceError(f"invalid namespace {_quote(namespace)}: {_namespace_problem(value)}")


def _namespace_problem(value: str) -> str:
    if not value:
        return f"must not be empty; {_NAMESPACE_EXAMPLE}"
    if "\x00" in value:
        return "must not contain the NUL character (U+0000)"
    wildcards = [char for char in "+#*>" if char in value]
    if wildcards:
        return f"contains the wildcard character {' '.join(wildcards)}; namespace levels may not contain + # * >"
    if value.startswith("$"):
        return "must not start with '$' (reserved for broker topics such as $SYS)"
    if "" in value.split("/"):
        return f"has an empty level (a leading '/' or '//'); {_NAMESPACE_EXAMPLE}"
    return "is not valid UTF-8 (it holds a lone surrogate)"


def validate_identifier(value: str, what: str = "agent name") -> str:
    """Return *value* if it is one safe level, else raise InvalidIdentifierError.

    *what* names the value in the message: ``"gateway id"``, ``"task id"``...
    """
    if isinstance(value, str) and _IDENTIFIER.fullmatch(value):
        return value
    kind = "" if isinstance(value, str) else "expected a str; "
    raise InvalidIdentifierError(f"invalid {what} {_quote(value)}: {kind}{_IDENTIFIER_RULE}")


def validate_publish_topic(topic: str) -> str:
    """Return *topic* if MQTT allows publishing on it, else raise InvalidTopicError."""
    problem = _text_problem(topic)
    if problem is None and ("+" in topic or "#" in topic):
        problem = "contains the MQTT wildcard '+' or '#', which is only allowed in subscription filters [MQTT-3.3.2-2]"
    if problem is not None:
        raise InvalidTopicError(f"invalid topic {_quote(topic)}: {problem}")
    return topic


def validate_filter(topic_filter: str) -> str:
    """Return *topic_filter* if MQTT accepts it, else raise InvalidFilterError.

    ``+`` must fill a whole level, ``#`` must be the whole last level, and an
    optional ``$share/<group>/`` prefix needs a group without ``/ + #``.
    """
    problem = _text_problem(topic_filter)
    if problem is not None:
        raise InvalidFilterError(f"invalid filter {_quote(topic_filter)}: {problem}")
    _, inner = split_shared_subscription(topic_filter)
    levels = inner.split("/")
    for position, level in enumerate(levels, start=1):
        if level == "#" and position != len(levels):
            problem = "'#' must be the last level, as in 'a/b/#'"
        elif level not in ("#", "+") and ("#" in level or "+" in level):
            problem = f"wildcards must fill a whole level, as in 'a/+/c' or 'a/#', not {level!r}"
        else:
            continue
        raise InvalidFilterError(f"invalid filter {_quote(topic_filter)}: {problem}")
    return topic_filter


def split_shared_subscription(topic_filter: str) -> tuple[str | None, str]:
    """Split ``$share/<group>/<filter>`` into ``(group, filter)``.

    A filter that is not shared gives ``(None, filter)``.
    """
    if not topic_filter.startswith(SHARE_PREFIX):
        return None, topic_filter
    group, _, inner = topic_filter[len(SHARE_PREFIX) :].partition("/")
    if not _is_share_group(group):
        problem = f"the share group {group!r} {_SHARE_GROUP_RULE}"
    elif not inner:
        problem = "a filter must follow the share group"
    else:
        return group, inner
    raise InvalidFilterError(f"invalid filter {_quote(topic_filter)}: {problem}; {_SHARE_FORM}")


def validate_share_group(group: str) -> str:
    """Return *group* if it can name a share group, else raise InvalidFilterError."""
    if _is_share_group(group):
        return group
    raise InvalidFilterError(f"invalid share group {_quote(group)}: it {_SHARE_GROUP_RULE}; {_SHARE_FORM}")


def _is_share_group(group: object) -> bool:
    return isinstance(group, str) and bool(group) and not any(char in group for char in "/+#\x00")


def _text_problem(value: object) -> str | None:
    """What MQTT objects to in *value* as a topic or filter string, if anything."""
    if not isinstance(value, str):
        return "expected a str"
    if not value:
        return "must not be empty"
    if "\x00" in value:
        return "must not contain the NUL character (U+0000)"
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid UTF-8 (it holds a lone surrogate)"
    if size > MAX_TOPIC_BYTES:
        return f"is {size} bytes in UTF-8; MQTT allows at most {MAX_TOPIC_BYTES}"
    return None


def _is_utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
