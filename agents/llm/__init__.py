"""LLM agents: an ``llm:`` entry (a model, instructions, tools, MCP servers, peers) served on the mesh.

The engine is pydantic-ai (the ``llm`` extra: ``pip install 'mqtt-agent-mesh[llm]'``). The
config (:mod:`agents.llm.config`) needs no engine; :class:`LlmAgent` does, and is imported
on first use so that the core runs without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents.llm.config import INSTALL_HINT, LlmConfig, McpServer, parse_llm

if TYPE_CHECKING:
    from agents.llm.agent import LlmAgent

__all__ = ["INSTALL_HINT", "LlmAgent", "LlmConfig", "McpServer", "parse_llm"]


def __getattr__(name: str) -> Any:
    if name == "LlmAgent":
        from agents.llm.agent import LlmAgent

        return LlmAgent
    raise AttributeError(f"module 'agents.llm' has no attribute {name!r}")
