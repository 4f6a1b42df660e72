"""Workflows on the dashboard: a workflow agent's graph from its card, its nodes' states from events.

A workflow agent (``agents.workflow``) describes its graph in its card, as the A2A extension
:data:`WORKFLOW_EXTENSION` (``params.nodes``: ``id``, ``kind``, ``target``, ``dependsOn``, and a
switch's ``cases``: ``{"when", "then"}`` or ``{"else"}``; its schema is
``agents.workflow.card.GRAPH_PARAMS_SCHEMA``), and
marks each node's start and end on its status messages (``workflowNode``,
``workflowNodeState`` in their metadata); its delegations carry ``workflowNode`` in the
request's metadata. The page draws the graph with each node's state from these (render.js).
Everything read here comes off the wire: shapes are checked and sizes bounded.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from mesh.a2a import AgentCard

__all__ = ["MAX_NODES", "WORKFLOW_EXTENSION", "card_workflow", "node_marks"]

#: The card extension of a workflow agent (the same URI as agents.workflow.agent's).
WORKFLOW_EXTENSION = "urn:mqtt-agent-mesh:workflow:v1"
#: The most nodes drawn (a workflow has at most 500).
MAX_NODES = 500
_MAX_NAME = 128
_MAX_CONDITION = 500


def card_workflow(card: AgentCard) -> list[dict[str, Any]] | None:
    """The graph a workflow agent's card declares (bounded), or None for other agents."""
    for extension in card.capabilities.extensions or ():
        if extension.uri != WORKFLOW_EXTENSION or not isinstance(extension.params, dict):
            continue
        nodes = extension.params.get("nodes")
        if not isinstance(nodes, list):
            return None
        graph = []
        for node in nodes[:MAX_NODES]:
            if not isinstance(node, dict) or not isinstance(node.get("id"), str):
                continue
            depends = node.get("dependsOn")
            drawn: dict[str, Any] = {
                "id": node["id"][:_MAX_NAME],
                "kind": str(node.get("kind", ""))[:_MAX_NAME],
                "target": str(node.get("target", ""))[:_MAX_NAME],
                "dependsOn": [str(d)[:_MAX_NAME] for d in depends[:MAX_NODES]] if isinstance(depends, list) else [],
            }
            cases = _cases(node.get("cases"))
            if cases:
                drawn["cases"] = cases
            graph.append(drawn)
        return graph
    return None


def _cases(value: Any) -> list[dict[str, str]]:
    """A switch's cases, each ``{"when", "then"}`` or ``{"else"}`` (anything else is left out)."""
    cases: list[dict[str, str]] = []
    for case in value[:MAX_NODES] if isinstance(value, list) else ():
        if not isinstance(case, dict):
            continue
        if isinstance(case.get("else"), str):
            cases.append({"else": case["else"][:_MAX_NAME]})
        elif isinstance(case.get("then"), str) and isinstance(case.get("when"), str):
            cases.append({"when": case["when"][:_MAX_CONDITION], "then": case["then"][:_MAX_NAME]})
    return cases


def node_marks(result: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """``(node, state)`` of each node mark in an answer: a status update's message, or the
    history of a final Task (a ``message/send`` caller sees no events, only the Task)."""
    messages: list[Any] = []
    status = result.get("status")
    if isinstance(status, dict):
        messages.append(status.get("message"))
    if result.get("kind") == "task" and isinstance(result.get("history"), list):
        messages.extend(result["history"][-4 * MAX_NODES :])
    for message in messages:
        metadata = message.get("metadata") if isinstance(message, dict) else None
        if not isinstance(metadata, dict):
            continue
        node, state = metadata.get("workflowNode"), metadata.get("workflowNodeState")
        if isinstance(node, str) and isinstance(state, str):
            yield node[:_MAX_NAME], state[:32]
