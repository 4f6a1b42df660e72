"""Templates of a workflow: Jinja2's sandbox, compiled once at load time, never ``eval``.

A string that is one expression, ``"{{ research.output.data.sources }}"``, gives the
expression's value as it is (a list stays a list); any other string renders to text. A
mapping or list of templates renders item by item. Names a template may use: ``input``, the
ids of the workflow's nodes, and in a map ``item``/``index``, in a loop ``loop``.

Only the workflow's author writes templates; the values that flow through them (a caller's
input, a peer's answer) are data and are never parsed as templates. A rendered text is
bounded all the same (:data:`MAX_RENDERED_CHARS`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jinja2 import ChainableUndefined, TemplateError, meta
from jinja2.sandbox import SandboxedEnvironment

__all__ = ["MAX_RENDERED_CHARS", "Template", "TemplateProblem", "compile_value", "render_value", "template_names"]

#: The longest text a template may render: a runaway template fails its node, not the agent.
MAX_RENDERED_CHARS = 4_000_000

_ENV = SandboxedEnvironment(undefined=ChainableUndefined, autoescape=False)
_ONE_EXPRESSION = re.compile(r"^\s*\{\{(?P<expr>(?:(?!\}\}|\{\{).)*)\}\}\s*$", re.DOTALL)


class TemplateProblem(ValueError):
    """A template that does not compile, or that failed while rendering."""


@dataclass(frozen=True, slots=True)
class Template:
    """One compiled template string and the top-level names it reads."""

    source: str
    names: frozenset[str]
    _expression: Any = None
    _template: Any = None

    @classmethod
    def compile(cls, source: str) -> Template:
        try:
            parsed = _ENV.parse(source)
            names = frozenset(meta.find_undeclared_variables(parsed))
            if (match := _ONE_EXPRESSION.match(source)) is not None:
                return cls(source, names, _expression=_ENV.compile_expression(match["expr"], undefined_to_none=True))
            return cls(source, names, _template=_ENV.from_string(source))
        except TemplateError as exc:
            raise TemplateProblem(f"template {source!r} does not compile: {exc}") from None

    def render(self, scope: Mapping[str, Any]) -> Any:
        try:
            if self._expression is not None:
                value = self._expression(**scope)
                return None if isinstance(value, ChainableUndefined) else value
            text = self._template.render(**scope)
        except (TemplateError, ArithmeticError, TypeError, ValueError, LookupError, AttributeError) as exc:
            raise TemplateProblem(f"template {self.source!r} failed: {type(exc).__name__}: {exc}") from None
        if len(text) > MAX_RENDERED_CHARS:
            raise TemplateProblem(
                f"template {self.source!r} rendered {len(text)} characters (at most {MAX_RENDERED_CHARS})"
            )
        return text

    def holds(self, scope: Mapping[str, Any]) -> bool:
        """The template as a condition: its value's truth (``"false"``, ``"0"`` and ``""`` are false)."""
        value = self.render(scope)
        if isinstance(value, str):
            return value.strip().lower() not in ("", "false", "0", "none", "no")
        return bool(value)


def compile_value(value: Any) -> Any:
    """Compile every string in ``value`` (a string, or mappings and lists of them) into a :class:`Template`."""
    if isinstance(value, str):
        return Template.compile(value)
    if isinstance(value, Mapping):
        return {str(key): compile_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [compile_value(item) for item in value]
    return value


def template_names(compiled: Any) -> set[str]:
    """The top-level names every template in a compiled value reads."""
    if isinstance(compiled, Template):
        return set(compiled.names)
    if isinstance(compiled, Mapping):
        return set().union(*(template_names(v) for v in compiled.values())) if compiled else set()
    if isinstance(compiled, list):
        return set().union(*(template_names(v) for v in compiled)) if compiled else set()
    return set()


def render_value(compiled: Any, scope: Mapping[str, Any]) -> Any:
    """Render a value made by :func:`compile_value` with ``scope``."""
    if isinstance(compiled, Template):
        return compiled.render(scope)
    if isinstance(compiled, Mapping):
        return {key: render_value(item, scope) for key, item in compiled.items()}
    if isinstance(compiled, list):
        return [render_value(item, scope) for item in compiled]
    return compiled
