"""Scripted models for the LLM agent tests: FunctionModel stream functions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelRequest, ToolReturnPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

Chunk = str | DeltaToolCalls
Step = Callable[[list[ModelMessage]], Sequence[Chunk]]


def call(name: str, args: dict[str, Any] | str, call_id: str = "c1", index: int = 0) -> DeltaToolCalls:
    """One tool call as a stream chunk (``index``: its place among the response's parts); ``args``
    as a string is sent as it is (even malformed)."""
    raw = args if isinstance(args, str) else json.dumps(args)
    return {index: DeltaToolCall(name=name, json_args=raw, tool_call_id=call_id)}


def tool_returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    """The tool results in the last request (what the model is answering now)."""
    last = messages[-1]
    return [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []


def user_texts(messages: list[ModelMessage]) -> list[str]:
    return [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, UserPromptPart)
    ]


def scripted(*steps: Sequence[Chunk] | Step) -> FunctionModel:
    """A model answering its n-th request with ``steps[n]`` (chunks, or a function of the messages)."""
    seen: list[list[ModelMessage]] = []

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Chunk]:
        seen.append(list(messages))
        step = steps[min(len(seen), len(steps)) - 1]
        for chunk in step(messages) if callable(step) else step:
            yield chunk

    model = FunctionModel(stream_function=stream)
    model.seen = seen  # type: ignore[attr-defined]
    return model
