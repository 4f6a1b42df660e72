"""Exceptions raised by the ``topics`` package.

Every error is a ``ValueError``, so callers that only care about "bad input"
can catch that; callers that care about the kind of input catch the subclass::

    TopicError (ValueError)
    ├── InvalidNamespaceError      namespace such as 'acme/ai'
    ├── InvalidIdentifierError     agent name, gateway id, client id, task id
    ├── InvalidTopicError          topic name to publish on
    ├── InvalidFilterError         subscription filter (MQTT or Solace syntax)
    │   └── UnsupportedWildcardError   Solace wildcard with no MQTT equivalent
    └── TemplateError              bad template pattern, or wrong template params

Messages name the offending value (its ``repr``) and say what would be accepted.
"""

from __future__ import annotations

__all__ = [
    "InvalidFilterError",
    "InvalidIdentifierError",
    "InvalidNamespaceError",
    "InvalidTopicError",
    "TemplateError",
    "TopicError",
    "UnsupportedWildcardError",
]

# Long values (a runaway task id, a whole payload passed by mistake) would
# otherwise drown the useful part of the message.
_MAX_SHOWN = 80


class TopicError(ValueError):
    """Root of every error raised by ``topics``."""


class InvalidNamespaceError(TopicError):
    """A namespace is empty, has an empty level, a wildcard, a leading '$' or NUL."""


class InvalidIdentifierError(TopicError):
    """An agent name, gateway id, client id or task id is not one safe level."""


class InvalidTopicError(TopicError):
    """A topic name cannot be published on (wildcards, NUL, empty, too long)."""


class InvalidFilterError(TopicError):
    """A subscription filter breaks the MQTT (or Solace) filter grammar."""


class UnsupportedWildcardError(InvalidFilterError):
    """A Solace subscription uses a wildcard that MQTT cannot express."""


class TemplateError(TopicError):
    """A topic template pattern is malformed, or was given the wrong parameters."""


def _quote(value: object) -> str:
    """``repr`` of a bad value for an error message, shortened when huge."""
    shown = repr(value)
    if len(shown) <= _MAX_SHOWN:
        return shown
    size = f" ({len(value)} characters)" if isinstance(value, str) else ""
    return f"{shown[: _MAX_SHOWN - 4]}...{shown[-1]}{size}"
