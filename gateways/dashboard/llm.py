"""What the dashboard reads of LLM agents' answers: pending tool approvals, and usage per agent.

A task waiting for approvals is ``input-required`` with ``{"type": "tool_approval", ...}`` data
parts (docs/llm-agents.md); an answer's ``metadata.llm`` holds its tokens and, where a price is
known, its cost in USD.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["UsageTotals", "approvals_of", "usage_of"]

MAX_APPROVALS = 8  # calls shown per task
MAX_ARGUMENTS = 200  # characters of a call's arguments shown


def _status_message(result: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    status = result.get("status") if result.get("kind") in ("task", "status-update") else None
    if not isinstance(status, dict):
        return None, {}
    message = status.get("message")
    return _str(status.get("state")), message if isinstance(message, dict) else {}


def approvals_of(result: dict[str, Any]) -> list[dict[str, str]] | None:
    """The calls an input-required task waits to have approved; None when the result does not say."""
    state, message = _status_message(result)
    if state is None:
        return None
    if state != "input-required":
        return []
    shown = []
    for part in message.get("parts") or []:
        data = part.get("data") if isinstance(part, dict) else None
        if isinstance(data, dict) and data.get("type") == "tool_approval":
            arguments = json.dumps(data.get("arguments"), ensure_ascii=False)[:MAX_ARGUMENTS]
            shown.append({"tool": str(data.get("function_name"))[:100], "arguments": arguments})
    return shown[:MAX_APPROVALS]


def usage_of(result: dict[str, Any]) -> dict[str, Any] | None:
    """A final answer's tokens and cost (``metadata.llm``), or None."""
    _state, message = _status_message(result)
    if result.get("kind") == "message":
        message = result
    llm = (message.get("metadata") or {}).get("llm") if isinstance(message.get("metadata"), dict) else None
    if not isinstance(llm, dict):
        return None
    tokens = _int(llm.get("inputTokens")) + _int(llm.get("outputTokens"))
    cost = llm.get("costUsd")
    return {"tokens": tokens, "costUsd": float(cost) if isinstance(cost, int | float) else None}


class UsageTotals:
    """Tokens and cost per agent, of the answers the dashboard saw since it started."""

    def __init__(self) -> None:
        self.by_agent: dict[str, dict[str, Any]] = {}

    def add(self, agent: str, usage: dict[str, Any]) -> dict[str, Any]:
        total = self.by_agent.setdefault(agent, {"tokens": 0, "costUsd": None, "answers": 0})
        total["tokens"] += usage["tokens"]
        total["answers"] += 1
        if usage["costUsd"] is not None:
            total["costUsd"] = (total["costUsd"] or 0.0) + usage["costUsd"]
        return total


def _str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
