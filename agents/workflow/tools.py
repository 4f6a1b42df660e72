"""A ``tool:`` node's Python function, called as an LLM agent's ``python:`` tools are.

The node's rendered input becomes the function's arguments: a mapping gives its keyword
arguments (``input: {text: "{{ a.output.text }}", n: 2}`` calls ``f(text=..., n=2)``), any other
value (a string, a number, a list, none) its one positional argument (``input: "{{ item }}"``
calls ``f(item)``). The arguments are validated against the signature by pydantic, as
pydantic-ai validates a model's tool call: ``"3"`` for an ``int`` parameter is 3, and a missing
or unexpected argument fails the node naming the function's parameters. Coroutine functions are
awaited; plain ones run in a thread (they may block).

What the function returns is the node's output as templates read it
(:func:`output_of_value`): a string is ``output.text``; a mapping is ``output.data`` (and its
JSON the text); a list is ``output.data.items``; any other value ``output.data.value``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ConfigDict, ValidationError, validate_call

__all__ = ["Tool", "ToolInputProblem", "output_of_value"]


class ToolInputProblem(ValueError):
    """The node's input does not fit the function's parameters."""


class Tool:
    """A workflow tool: ``await tool(payload)`` calls the function with the payload as its arguments."""

    def __init__(self, target: str, function: Callable[..., Any]) -> None:
        self.target = target
        self.function = function
        self.signature = inspect.signature(function)
        self._is_async = inspect.iscoroutinefunction(function)
        # Built at load time: a parameter type pydantic cannot check fails here, not on a call.
        self._validated = validate_call(config=ConfigDict(arbitrary_types_allowed=True))(function)

    def arguments(self, payload: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The positional and keyword arguments of ``payload``; :class:`ToolInputProblem` if they do not bind."""
        if isinstance(payload, Mapping):
            args: tuple[Any, ...] = ()
            kwargs = {str(key): value for key, value in payload.items()}
        else:
            args, kwargs = (payload,), {}
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            given = f"the keys {', '.join(kwargs) or '(none)'}" if not args else f"one value ({type(payload).__name__})"
            raise ToolInputProblem(
                f"tool {self.target!r} takes {_parameters(self.signature)} but the node's input gives {given} ({exc}); "
                "a mapping input is its keyword arguments, any other input its one positional argument"
            ) from None
        return args, kwargs

    async def __call__(self, payload: Any) -> Any:
        args, kwargs = self.arguments(payload)
        try:
            if self._is_async:
                return await self._validated(*args, **kwargs)
            return await asyncio.to_thread(self._validated, *args, **kwargs)
        except ValidationError as exc:
            if exc.title != getattr(self.function, "__name__", None):
                raise  # the function's own validation, not its arguments'
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'input'}: {e['msg']}" for e in exc.errors())
            raise ToolInputProblem(f"tool {self.target!r}: bad arguments ({problems})") from None


def _parameters(signature: inspect.Signature) -> str:
    """``(text, *, at_least=0)``: the parameters without their annotations."""
    bare = [p.replace(annotation=inspect.Parameter.empty) for p in signature.parameters.values()]
    return str(signature.replace(parameters=bare, return_annotation=inspect.Signature.empty))


def output_of_value(value: Any) -> dict[str, Any]:
    """A value as a node's (or a workflow answer's) output: ``text`` and ``data``."""
    if isinstance(value, str):
        return {"text": value, "data": None}
    if isinstance(value, Mapping):
        return {"text": json.dumps(value, default=str), "data": dict(value)}
    if isinstance(value, list | tuple):
        return {"text": json.dumps(list(value), default=str), "data": {"items": list(value)}}
    return {"text": "" if value is None else str(value), "data": {"value": value}}
