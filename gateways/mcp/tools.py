"""The MCP tools of ``mesh mcp``: one per agent, named, described and typed from its card.

- **Name**: the agent's name made MCP-safe (``[A-Za-z0-9_-]{1,64}``, what every MCP client and
  model API accepts): other characters (the ``.`` agent names may hold) become ``_``, long names
  are cut. Two agents whose safe names collide are resolved deterministically, whatever the
  order they came in: an agent whose name is already safe keeps it; every other one in the
  collision gets a suffix from the SHA-256 of its real name (``my_agent_3f2a91``).
- **Description**: the card's description, then its skills with their examples (bounded).
- **Input schema**: ``{"message": string, "context_id"?: string, "task_id"?: string,
  "skill"?: string}``; ``skill`` lists the card's skill ids when it has any.
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from mesh.a2a import AgentCard

__all__ = ["MAX_DESCRIPTION", "AgentTool", "build_tools", "input_schema", "matches", "safe_name", "tool_description"]

MAX_NAME = 64
MAX_DESCRIPTION = 4000  # a client pastes every description into its model's context: keep each bounded
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_SAFE = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True)
class AgentTool:
    """One tool: its MCP name, the agent it calls, and what ``tools/list`` shows of it."""

    name: str
    agent: str
    description: str
    input_schema: dict[str, Any]
    skills: tuple[str, ...]


def safe_name(agent: str) -> str:
    """``agent`` with the characters MCP clients refuse replaced, cut to 64 characters."""
    return _UNSAFE.sub("_", agent)[:MAX_NAME] or "_"


def _suffixed(agent: str) -> str:
    digest = hashlib.sha256(agent.encode()).hexdigest()[:6]
    return f"{safe_name(agent)[: MAX_NAME - 7]}_{digest}"


def matches(agent: str, patterns: Sequence[str]) -> bool:
    """Whether ``agent`` is exposed under ``--agents PATTERN...`` (fnmatch; none given: all)."""
    return not patterns or any(fnmatch.fnmatchcase(agent, pattern) for pattern in patterns)


def build_tools(cards: Iterable[AgentCard]) -> dict[str, AgentTool]:
    """The tools of ``cards``, by tool name, sorted by name; collisions resolved (see the module doc)."""
    by_safe: dict[str, list[AgentCard]] = {}
    for card in cards:
        by_safe.setdefault(safe_name(card.name), []).append(card)
    tools: dict[str, AgentTool] = {}
    for safe, group in by_safe.items():
        for card in group:
            keeps = len(group) == 1 or (card.name == safe and _SAFE.fullmatch(card.name) is not None)
            name = safe if keeps else _suffixed(card.name)
            tools[name] = _tool(name, card)
    return dict(sorted(tools.items()))


def _tool(name: str, card: AgentCard) -> AgentTool:
    skills = tuple(skill.id for skill in card.skills or [])
    return AgentTool(name, card.name, tool_description(card), input_schema(skills), skills)


def tool_description(card: AgentCard) -> str:
    """The card's description and its skills with examples, at most :data:`MAX_DESCRIPTION` characters."""
    lines = [(card.description or f"The mesh agent {card.name!r}.").strip()]
    if card.skills:
        lines += ["", "Skills:"]
        for skill in card.skills:
            line = f"- {skill.name} ({skill.id})"
            if skill.description:
                line += f": {skill.description}"
            if skill.examples:
                line += " Examples: " + "; ".join(repr(example) for example in skill.examples[:5])
            lines.append(line)
    lines += ["", f"Calls the mesh agent {card.name!r}; an answer that asks a question gives a task_id to reply with."]
    text = "\n".join(lines)
    return text if len(text) <= MAX_DESCRIPTION else text[: MAX_DESCRIPTION - 1] + "…"


def input_schema(skills: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON Schema of a tool's arguments."""
    skill: dict[str, Any] = {"type": "string", "description": "the skill to use (the agent picks one if not given)"}
    if skills:
        skill["enum"] = list(skills)
    return {
        "type": "object",
        "properties": {
            "message": {"type": "string", "description": "what to ask the agent"},
            "context_id": {"type": "string", "description": "the conversation to continue (from an earlier result)"},
            "task_id": {
                "type": "string",
                "description": "the task to answer, when an earlier result asked a question (input-required)",
            },
            "skill": skill,
        },
        "required": ["message"],
        "additionalProperties": False,
    }
