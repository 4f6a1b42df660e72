"""``model: demo``: a scripted, deterministic model to watch an LLM agent work, offline.

No provider, no key, no network: a pydantic-ai :class:`~pydantic_ai.models.function.FunctionModel`
whose functions read the user's text, plan which of the agent's tools to call (the mesh's
agents it has as peers), call them one after the other and answer from what they said. Each
request of the run is one step, as with a real model: the plan (streamed as text) with the
first call, then what that call gave and the next call, then the answer. So
``mesh up --model demo`` and ``mesh send assistant "what is 7 times 6, then count down from 3" --stream``
show the streamed text, each tool call and result, and the answer ``7*6 = 42; ...``.

What it understands (:func:`plan`), clause by clause (``then``, ``and``, ``;``, ``,`` or a sentence
end separate them):

- arithmetic (``what is 7 times 6``, ``2+2``, ``sqrt(9) * 3``; ``times``, ``plus``, ``minus``,
  ``divided by``... become operators) goes to the calculator: a tool named ``calculator``, or
  one whose description says arithmetic;
- ``count down from N`` / ``countdown N`` goes to the countdown tool (named so, or described so);
- a clause that starts with a tool's name (``echo hi``, ``ask weather about Paris``) goes to
  that tool, with the rest of the clause.

When it cannot map a request to its tools it says so plainly: what it is (a scripted demo, no
provider) and what it can do with the tools it has. Unlike ``model: test`` (pydantic-ai's
TestModel, which calls every tool with made-up arguments), its calls follow the request.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.tools import ToolDefinition

from agents.builtin.orchestrator import find_expression

__all__ = ["DEMO_MODEL", "Call", "Step", "demo_model", "plan", "step"]

#: The model id of the demo model (``model: demo``, ``mesh up --model demo``).
DEMO_MODEL = "demo"
#: The agent's own tools, never a plan's target.
_NOT_PEERS = frozenset({"ask_user", "list_artifacts", "load_artifact", "save_artifact"})
_CLAUSE_SPLIT = re.compile(r"\s*(?:;|,(?=\s)|\.(?=\s|$)|!|\?(?=\s)|\band\s+then\b|\bthen\b|\band\b)\s*", re.I)
_WORD_OPERATORS = (
    (re.compile(r"\bmultiplied\s+by\b|\btimes\b|(?<=\d)\s*[x×]\s*(?=\d)", re.I), " * "),
    (re.compile(r"\bdivided\s+by\b|\bover\b|÷", re.I), " / "),
    (re.compile(r"\bplus\b|\badded\s+to\b", re.I), " + "),
    (re.compile(r"\bminus\b", re.I), " - "),
    (re.compile(r"\bto\s+the\s+power\s+of\b", re.I), " ^ "),
    (re.compile(r"\bsquared\b", re.I), " ^ 2"),
    (re.compile(r"\bmod(?:ulo)?\b", re.I), " % "),
)
_COUNTDOWN = re.compile(r"\bcount\s*-?\s*down\b(?:\s+(?:from|to))?\s*(?P<n>\d+)?", re.I)
_ASK = re.compile(r"^(?:please\s+)?(?:ask|tell|use|call)\s+(?:the\s+)?", re.I)
_TO_PEER = re.compile(r"^(?:agent\s+)?(?:about|for|to|:)?\s*", re.I)


@dataclass(frozen=True)
class Call:
    """One planned tool call: the tool, the message it is sent, and what kind of step it is."""

    tool: str
    message: str
    kind: str  # "arithmetic", "countdown" or "named"


def plan(text: str, tools: Sequence[ToolDefinition]) -> tuple[list[Call], list[str]]:
    """The calls ``text`` asks for with these tools, in order, and the clauses it could not map."""
    peers = [t for t in tools if t.name not in _NOT_PEERS]
    calls: list[Call] = []
    unknown: list[str] = []
    for clause in (c.strip() for c in _CLAUSE_SPLIT.split(text)):
        if not clause:
            continue
        call = _named(clause, peers) or _countdown(clause, peers) or _arithmetic(clause, peers)
        if call is None:
            unknown.append(clause)
        else:
            calls.append(call)
    return calls, unknown


def _find(peers: Sequence[ToolDefinition], name: str, *words: str) -> ToolDefinition | None:
    """The tool named ``name``, else the first whose description has one of ``words``."""
    for tool in peers:
        if tool.name.lower() == name:
            return tool
    for tool in peers:
        description = (tool.description or "").lower()
        if any(word in description for word in words):
            return tool
    return None


def _named(clause: str, peers: Sequence[ToolDefinition]) -> Call | None:
    rest = _ASK.sub("", clause, count=1)
    word, _, tail = rest.partition(" ")
    for tool in peers:
        if tool.name.lower() == word.lower():
            message = _TO_PEER.sub("", tail, count=1).strip() or clause
            return Call(tool.name, message, "named")
    return None


def _countdown(clause: str, peers: Sequence[ToolDefinition]) -> Call | None:
    found = _COUNTDOWN.search(clause)
    tool = _find(peers, "countdown", "counts down", "countdown") if found else None
    if found is None or tool is None:
        return None
    return Call(tool.name, found["n"] or clause, "countdown")


def _arithmetic(clause: str, peers: Sequence[ToolDefinition]) -> Call | None:
    words = clause
    for pattern, operator in _WORD_OPERATORS:
        words = pattern.sub(operator, words)
    expression = find_expression(words)
    tool = _find(peers, "calculator", "arithmetic", "calculat") if expression else None
    if expression is None or tool is None:
        return None
    return Call(tool.name, re.sub(r"\s+", "", expression), "arithmetic")


# ---------------------------------------------------------------- one request: one step


@dataclass(frozen=True)
class Step:
    """What the model answers one request with: text, and the tool call to make (if any)."""

    text: str
    call: Call | None = None
    call_id: str = ""


def step(messages: Sequence[ModelMessage], tools: Sequence[ToolDefinition]) -> Step:
    """The next step of the run: the plan of the last user text, advanced by the calls made since."""
    prompt, results = _turn(messages)
    calls, unknown = plan(prompt, tools)
    done = len(results)
    if not calls:
        return Step(_cannot(prompt, tools))
    if done < len(calls):
        call = calls[done]
        if done == 0:
            planned = ", then ".join(_shown(c) for c in calls)
            text = f"Plan: {planned}."
            if unknown:
                text += f" (I cannot map {_quoted(unknown)} to a tool.)"
        else:
            text = f"{_said(calls[done - 1], results[-1])}. Next: {_shown(call)}."
        return Step(text, call, f"demo-{done + 1}")
    answer = _sentence("; ".join(_said(c, r) for c, r in zip(calls, results, strict=False)))
    if unknown:
        answer += f" I could not map {_quoted(unknown)} to a tool: {_WHAT}"
    return Step(answer)


def _turn(messages: Sequence[ModelMessage]) -> tuple[str, list[ToolReturnPart | RetryPromptPart]]:
    """The last user text, and the tool results that came after it (this turn's calls so far)."""
    prompt = ""
    results: list[ToolReturnPart | RetryPromptPart] = []
    for message in messages:
        if not isinstance(message, ModelRequest):
            continue
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                prompt = part.content if isinstance(part.content, str) else " ".join(map(str, part.content))
                results = []
            elif isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_name not in _NOT_PEERS:
                results.append(part)
    return prompt, results


def _shown(call: Call) -> str:
    return f"{call.tool} {json.dumps(call.message)}"


def _quoted(clauses: Sequence[str]) -> str:
    return ", ".join(json.dumps(c) for c in clauses)


def _said(call: Call, result: ToolReturnPart | RetryPromptPart) -> str:
    """One call's outcome in words: ``7*6 = 42``, ``countdown: Liftoff! ...``, ``echo failed: ...``."""
    if isinstance(result, RetryPromptPart) or result.outcome != "success":
        return f"{call.tool} failed: {_first_line(_text_of(result.content))}"
    content: Any = result.content
    text = _gist(str(content.get("text", "")) if isinstance(content, dict) else _text_of(content))
    state = content.get("state") if isinstance(content, dict) else None
    if state not in (None, "completed"):
        return f"{call.tool} is {state}: {text}" if text else f"{call.tool} is {state}"
    if call.kind == "arithmetic":
        return f"{call.message} = {text}"
    return f"{call.tool}: {text}"


def _sentence(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."


def _text_of(content: Any) -> str:
    return content if isinstance(content, str) else json.dumps(content, default=str)


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0]


def _gist(text: str, limit: int = 80) -> str:
    """A peer's text in one line: its first line, the others after it in brackets (bounded)."""
    first, *rest = [line.strip() for line in text.strip().splitlines() if line.strip()] or [""]
    more = " ".join(rest)
    if len(more) > limit:
        more = more[: limit - 3] + "..."
    return f"{first} ({more})" if more else first


_WHAT = "I am the demo model, a scripted stand-in: no provider, no network, no API key."


def _cannot(prompt: str, tools: Sequence[ToolDefinition]) -> str:
    """The answer to a request it cannot map to its tools: what it is, and what it can do."""
    peers = [t.name for t in tools if t.name not in _NOT_PEERS]
    said = f"I cannot map {json.dumps(prompt)} to a tool. " if prompt.strip() else ""
    names = {name.lower() for name in peers}
    examples = []
    if "calculator" in names:
        examples.append('"what is 7 times 6"')
    if "countdown" in names:
        examples.append('"count down from 3"')
    if "echo" in names:
        examples.append('"echo hi"')
    if peers:
        can = (
            f"I plan from your words and call these agents as tools: {', '.join(peers)}. "
            f"Try {' or '.join(examples) or json.dumps(peers[0] + ' hello')}, several joined by 'then', "
            "or '<agent> <text>' for any of them."
        )
    else:
        can = "I have no agents as tools here (llm.peers allows none), so I can only say this."
    return (
        f"{said}{_WHAT} {can} For a real model: --model openai:gpt-4.1-mini with OPENAI_API_KEY set "
        "(or ollama:llama3.2 with base_url)."
    )


# ---------------------------------------------------------------- the model


def _response(planned: Step) -> ModelResponse:
    parts: list[Any] = [TextPart(planned.text)] if planned.text else []
    if planned.call is not None:
        parts.append(ToolCallPart(planned.call.tool, {"message": planned.call.message}, planned.call_id))
    return ModelResponse(parts=parts, model_name=DEMO_MODEL)


def _answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return _response(step(messages, info.function_tools))


async def _stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    planned = step(messages, info.function_tools)
    if planned.text:
        yield planned.text
    if planned.call is not None:
        arguments = json.dumps({"message": planned.call.message})
        yield {1: DeltaToolCall(name=planned.call.tool, json_args=arguments, tool_call_id=planned.call_id)}


def demo_model() -> FunctionModel:
    """The demo model: a FunctionModel answering plain and streamed requests alike."""
    return FunctionModel(_answer, stream_function=_stream, model_name=DEMO_MODEL)
