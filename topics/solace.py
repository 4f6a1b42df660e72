"""Solace subscriptions in MQTT terms, and SAM's task-id extraction.

Solace wildcards differ from MQTT's in two ways that matter:

* a trailing ``>`` matches **one or more** levels, MQTT's ``#`` zero or more,
  so Solace ``a/>`` becomes ``a/+/#`` (``a/#`` would also match ``a``);
* ``abc*`` matches a level starting with ``abc``; MQTT wildcards fill whole
  levels, so there is no equivalent and such subscriptions are refused.

Conversely ``+`` and ``#`` are plain characters in Solace but wildcards in MQTT;
a Solace subscription holding them cannot be carried over and is refused too.
"""

from __future__ import annotations

import logging
from functools import lru_cache

from .errors import InvalidFilterError, UnsupportedWildcardError, _quote
from .matching import topic_matches
from .validation import split_shared_subscription, validate_filter

__all__ = ["extract_task_id_from_topic", "solace_to_mqtt"]

logger = logging.getLogger(__name__)

_MQTT_WILDCARDS = ("+", "#")


def solace_to_mqtt(subscription: str) -> str:
    """Translate a Solace subscription into the MQTT filter with the same matches.

    ``*`` as a level becomes ``+`` and a final ``>`` becomes ``+/#``. Raises
    :class:`UnsupportedWildcardError` when MQTT cannot express the subscription.
    """
    if not isinstance(subscription, str) or not subscription:
        raise InvalidFilterError(f"invalid Solace subscription {_quote(subscription)}: expected a non-empty str")
    return _translate(subscription)


@lru_cache(maxsize=1024)
def _translate(subscription: str) -> str:
    shown = _quote(subscription)
    if "+" in subscription or "#" in subscription:
        raise InvalidFilterError(
            f"invalid Solace subscription {shown}: '+' and '#' are plain characters "
            "in Solace but wildcards in MQTT, so it cannot be carried over; pass MQTT "
            "filters as they are"
        )
    if subscription.startswith("!"):
        raise UnsupportedWildcardError(
            f"Solace exception subscription {shown} has no MQTT equivalent; subscribe "
            "to the wider filter and drop the excluded topics in the client"
        )
    levels = subscription.split("/")
    mqtt: list[str] = []
    for position, level in enumerate(levels, start=1):
        if level == "*":
            mqtt.append("+")
        elif level == ">" and position == len(levels):
            mqtt.append("+/#")
        elif "*" in level or ">" in level:
            raise UnsupportedWildcardError(_unsupported(shown, level, mqtt, more=position < len(levels)))
        else:
            mqtt.append(level)
    return validate_filter("/".join(mqtt))


def _unsupported(shown: str, level: str, translated: list[str], *, more: bool) -> str:
    hint = "/".join([*translated, "+", *(["..."] if more else [])])
    if level.endswith("*") and "*" not in level[:-1] and ">" not in level:
        return (
            f"Solace prefix wildcard {level!r} in {shown} has no MQTT equivalent "
            f"(MQTT wildcards fill whole levels); subscribe to {hint!r} and keep the "
            f"topics whose level starts with {level[:-1]!r} in the client"
        )
    return (
        f"Solace subscription {shown}: level {level!r} has no MQTT equivalent "
        "('*' must fill a whole level or end a prefix as in 'abc*', '>' must be the "
        f"whole last level); subscribe to {hint!r} and filter in the client"
    )


def extract_task_id_from_topic(topic: str, subscription_pattern: str, log_identifier: str = "") -> str | None:
    """Return the part of *topic* matched by the subscription's wildcards, or ``None``.

    *subscription_pattern* is an MQTT filter (``.../+``, ``.../#``) or a Solace
    subscription (``.../*``, ``.../>``); it is Solace if it holds ``*`` or ``>``.
    The task id is everything after the levels before the first wildcard, so
    it spans several levels under ``#``/``>``. ``None`` if *topic* does not
    match or that part is empty. *log_identifier* only prefixes a debug line.
    """
    topic_filter, prefix = _task_filter(subscription_pattern)
    if len(topic) > len(prefix) and topic_matches(topic_filter, topic):
        return topic[len(prefix) :]
    logger.debug(
        "%s no task id in topic %r for subscription %r",
        log_identifier,
        topic,
        subscription_pattern,
    )
    return None


# Gateways call this per message with the same few subscriptions.
@lru_cache(maxsize=1024)
def _task_filter(subscription: str) -> tuple[str, str]:
    """The MQTT filter for *subscription* and the text before its first wildcard."""
    is_solace = "*" in subscription or ">" in subscription
    topic_filter = solace_to_mqtt(subscription) if is_solace else validate_filter(subscription)
    _, inner = split_shared_subscription(topic_filter)
    prefix: list[str] = []
    for level in inner.split("/"):
        if level in _MQTT_WILDCARDS:
            break
        prefix.append(f"{level}/")
    return topic_filter, "".join(prefix)
