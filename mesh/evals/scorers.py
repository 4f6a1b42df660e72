"""The scorers of ``expect:``: each turns an :class:`Answer` into one :class:`Check`.

=================  =============================================================================
key                passes when
=================  =============================================================================
``state``          the task ended in that state (default ``completed``)
``exact``          the answer text is exactly this (blanks around it ignored); else a diff
``contains``       the answer text contains each of these
``regex``          ``re.search`` finds the pattern in the answer text
``json_schema``    the answer's data (its first DataPart; else its text parsed as JSON) is valid
``python``         ``module:function(answer)`` returns True or None (False or a text: fails);
                   the module is looked for beside the eval file first
``number``         the answer, read as a number, is within ``tolerance`` of ``value``
``tools``          each tool was called (by name, with at least these arguments): LLM agents
``max_latency_s``  the answer came within that many seconds
``max_tokens``     the LLM answer used at most that many tokens (input + output)
``judge``          an LLM agent of the mesh answers PASS for the criteria
=================  =============================================================================
"""

from __future__ import annotations

import difflib
import importlib
import json
import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from mesh.evals.spec import Case, Expect, Judge

__all__ = ["Answer", "Check", "JudgeCall", "ToolCall", "score"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(slots=True)
class Answer:
    """What a case's task gave: what the scorers (and a ``python:`` function) look at."""

    state: str
    text: str
    data: Any = None  # the first DataPart's data of the answer, if any
    latency_s: float = 0.0
    tool_calls: list[ToolCall] = field(default_factory=list)
    tokens: int | None = None  # input + output tokens of an LLM answer, when it says
    task_id: str | None = None
    error: str | None = None  # the call failed (timeout, agent gone, JSON-RPC error)


@dataclass(frozen=True, slots=True)
class Check:
    scorer: str
    passed: bool
    detail: str = ""


#: How the judge scorer asks: (the judge, the case, the answer) -> its verdict.
JudgeCall = Callable[[Judge, Case, Answer], Awaitable[Check]]


async def score(expect: Expect, case: Case, answer: Answer, judge: JudgeCall | None = None) -> list[Check]:
    """Every check ``expect`` asks for, in the order of the table above."""
    if answer.error is not None:
        return [Check("answer", False, answer.error)]
    checks = [_state(expect.state, answer)]
    if expect.exact is not None:
        checks.append(_exact(expect.exact, answer.text))
    checks += [_contains(text, answer.text) for text in expect.contains]
    if expect.regex is not None:
        found = re.search(expect.regex, answer.text)
        checks.append(Check("regex", found is not None, "" if found else f"/{expect.regex}/ not in {_quote(answer)}"))
    if expect.json_schema is not None:
        checks.append(_json_schema(expect.json_schema, answer))
    if expect.python is not None:
        checks.append(_python(expect.python, answer))
    if expect.number is not None:
        checks.append(_number(expect.number.value, expect.number.tolerance, answer.text))
    checks += [_tool(tool.name, tool.arguments, answer) for tool in expect.tools]
    if expect.max_latency_s is not None:
        fast = answer.latency_s <= expect.max_latency_s
        checks.append(
            Check("latency", fast, "" if fast else f"took {answer.latency_s:.2f} s > {expect.max_latency_s} s")
        )
    if expect.max_tokens is not None:
        checks.append(_tokens(expect.max_tokens, answer))
    if expect.judge is not None:
        if judge is None:
            checks.append(Check("judge", False, "no judge available"))
        else:
            checks.append(await judge(expect.judge, case, answer))
    return checks


def _quote(answer: Answer, width: int = 80) -> str:
    text = answer.text if len(answer.text) <= width else answer.text[: width - 1] + "…"
    return json.dumps(text, ensure_ascii=False)


def _state(state: str, answer: Answer) -> Check:
    if answer.state == state:
        return Check("state", True)
    said = f": {_quote(answer)}" if answer.text else ""
    return Check("state", False, f"expected {state}, the task ended {answer.state}{said}")


def _exact(expected: str, text: str) -> Check:
    want, got = expected.strip(), text.strip()
    if want == got:
        return Check("exact", True)
    if "\n" not in want and "\n" not in got:
        return Check("exact", False, f"expected {json.dumps(want, ensure_ascii=False)}, got {json.dumps(got)}")
    diff = difflib.unified_diff(want.splitlines(), got.splitlines(), "expected", "answer", lineterm="")
    return Check("exact", False, "\n".join(diff))


def _contains(expected: str, text: str) -> Check:
    if expected in text:
        return Check("contains", True)
    return Check("contains", False, f"{json.dumps(expected, ensure_ascii=False)} not in {json.dumps(text[:80])}")


def _json_schema(schema: dict[str, Any], answer: Answer) -> Check:
    import jsonschema

    value = answer.data
    if value is None:
        try:
            value = json.loads(answer.text)
        except ValueError:
            return Check("json_schema", False, f"the answer has no data and its text is not JSON: {_quote(answer)}")
    errors = sorted(jsonschema.validators.validator_for(schema)(schema).iter_errors(value), key=lambda e: e.path)
    if not errors:
        return Check("json_schema", True)
    where = "/".join(str(p) for p in errors[0].absolute_path) or "(top)"
    return Check("json_schema", False, f"at {where}: {errors[0].message}")


def _python(reference: str, answer: Answer) -> Check:
    module_name, _, name = reference.partition(":")
    try:
        function: Any = importlib.import_module(module_name)
        for attribute in name.split("."):
            function = getattr(function, attribute)
    except (ImportError, AttributeError) as exc:
        return Check("python", False, f"cannot load {reference} ({exc}); check the module is importable from here")
    try:
        verdict = function(answer)
    except AssertionError as exc:
        return Check("python", False, str(exc) or f"{reference} asserted")
    except Exception as exc:  # the user's function failing is the case failing, told plainly
        return Check("python", False, f"{reference} raised {type(exc).__name__}: {exc}")
    if verdict is None or verdict is True:
        return Check("python", True)
    return Check("python", False, verdict if isinstance(verdict, str) else f"{reference} returned {verdict!r}")


_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?:/\d+)?")


def _number(value: float, tolerance: float, text: str) -> Check:
    found = _NUMBER.search(text)
    if found is None:
        return Check("number", False, f"no number in {json.dumps(text[:80])}")
    try:
        number = float(Fraction(found[0]))
    except (ValueError, ZeroDivisionError):
        return Check("number", False, f"{found[0]!r} is not a number")
    if math.isclose(number, value, rel_tol=0.0, abs_tol=tolerance):
        return Check("number", True)
    return Check("number", False, f"expected {value} ± {tolerance}, got {number} (off by {abs(number - value):.6g})")


def _tool(name: str, arguments: dict[str, Any] | None, answer: Answer) -> Check:
    calls = [call for call in answer.tool_calls if call.name == name]
    made = ", ".join(f"{c.name}({json.dumps(c.arguments)})" for c in answer.tool_calls) or "none"
    if not calls:
        return Check("tools", False, f"{name} was not called (calls: {made})")
    if arguments is None or any(_has(call.arguments, arguments) for call in calls):
        return Check("tools", True)
    return Check("tools", False, f"no call of {name} with {json.dumps(arguments)} (calls: {made})")


def _has(actual: dict[str, Any], wanted: dict[str, Any]) -> bool:
    return all(key in actual and actual[key] == value for key, value in wanted.items())


def _tokens(limit: int, answer: Answer) -> Check:
    if answer.tokens is None:
        return Check("tokens", False, "the answer says nothing of its token usage (not an LLM agent?)")
    if answer.tokens <= limit:
        return Check("tokens", True)
    return Check("tokens", False, f"used {answer.tokens} tokens > {limit}")
