"""Topic templates: one pattern, compiled once, used to build, match and subscribe.

A template such as ``"{namespace}/a2a/v1/agent/request/{agent_name}"`` is the
single definition of a topic shape::

    >>> t = TopicTemplate("{namespace}/a2a/v1/agent/request/{agent_name}")
    >>> t.build(namespace="acme/ai", agent_name="search")
    'acme/ai/a2a/v1/agent/request/search'
    >>> t.match("acme/ai/a2a/v1/agent/request/search")
    {'namespace': 'acme/ai', 'agent_name': 'search'}
    >>> t.filter(namespace="acme/ai")
    'acme/ai/a2a/v1/agent/request/+'

Every parameter fills a whole level. ``namespace`` is the only one that may
span several levels; the others are identifiers. Because the rest of the
template has a fixed number of levels, matching is anchored on that suffix and
stays unambiguous even when the namespace itself contains ``a2a/v1``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from .errors import TemplateError
from .validation import (
    IDENTIFIER_PATTERN,
    NAMESPACE_PATTERN,
    validate_identifier,
    validate_namespace,
)

__all__ = ["NAMESPACE", "TopicTemplate"]

NAMESPACE = "namespace"

_PARAM = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_FORBIDDEN_IN_LITERAL = "+#*>{}\x00"


class TopicTemplate:
    """A topic pattern with ``{param}`` levels: build, filter and match."""

    __slots__ = ("_format", "_labels", "_names", "_regex", "params", "pattern")

    pattern: str
    params: tuple[str, ...]

    def __init__(self, pattern: str) -> None:
        if pattern.startswith("$"):
            raise TemplateError(f"invalid template {pattern!r}: topics starting with '$' are reserved")
        params: list[str] = []
        regex: list[str] = []
        format_levels: list[str] = []
        for level in pattern.split("/"):
            param = _PARAM.fullmatch(level)
            if param is None:
                _check_literal(pattern, level)
                regex.append(re.escape(level))
                format_levels.append(level.replace("%", "%%"))
                continue
            name = param[1]
            if name in params:
                raise TemplateError(f"invalid template {pattern!r}: parameter {name!r} appears twice")
            params.append(name)
            body = NAMESPACE_PATTERN if name == NAMESPACE else IDENTIFIER_PATTERN
            regex.append(f"(?P<{name}>{body})")
            format_levels.append("%s")
        self.pattern = pattern
        self.params = tuple(params)
        self._names = frozenset(params)
        self._regex = re.compile("/".join(regex))
        # build() runs per message: one %-format, no parsing of the pattern.
        self._format = "/".join(format_levels)
        # "sub_task_id" -> "sub task id": errors read like the SAM argument names.
        self._labels = tuple((name, None if name == NAMESPACE else name.replace("_", " ")) for name in params)

    def build(self, **params: str) -> str:
        """Return the topic with every parameter filled in; each value is validated."""
        if params.keys() != self._names:
            raise self._wrong_params("build", params, required=self._names)
        return self._format % tuple([_validate(params[name], label) for name, label in self._labels])

    def filter(self, **params: str) -> str:
        """Return an MQTT filter with ``+`` for every parameter left out.

        ``namespace`` is required: a filter across namespaces is never wanted.
        """
        required = self._names & {NAMESPACE}
        if not (required <= params.keys() <= self._names):
            raise self._wrong_params("filter", params, required=required)
        return self._format % tuple(
            [_validate(params[name], label) if name in params else "+" for name, label in self._labels]
        )

    def match(self, topic: str) -> dict[str, str] | None:
        """Return the parameters of *topic*, or ``None`` if it does not have this shape.

        Only values ``build`` would accept are matched, so ``build(**match(t)) == t``.
        """
        found = self._regex.fullmatch(topic)
        return None if found is None else found.groupdict()

    def _wrong_params(self, method: str, given: Mapping[str, str], required: frozenset[str]) -> TemplateError:
        missing = sorted(required - given.keys())
        unknown = sorted(given.keys() - self._names)
        problems = [f"missing {missing}"] if missing else []
        problems += [f"unknown {unknown}"] if unknown else []
        return TemplateError(
            f"{self!r}.{method}() got wrong parameters ({', '.join(problems)}); its parameters are {list(self.params)}"
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.pattern!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TopicTemplate):
            return NotImplemented
        return self.pattern == other.pattern

    def __hash__(self) -> int:
        return hash(self.pattern)


def _validate(value: str, label: str | None) -> str:
    """Validate a parameter: the namespace (no label) or an identifier."""
    return validate_namespace(value) if label is None else validate_identifier(value, label)


def _check_literal(pattern: str, level: str) -> None:
    if not level:
        problem = "it has an empty level"
    elif any(char in level for char in _FORBIDDEN_IN_LITERAL):
        problem = (
            f"level {level!r} must be a whole '{{param}}' or plain text without wildcards (+ # * >), braces or NUL"
        )
    else:
        return
    raise TemplateError(f"invalid template {pattern!r}: {problem}")
