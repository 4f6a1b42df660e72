"""The graph a workflow agent's card declares: the params of the ``urn:mqtt-agent-mesh:workflow:v1``
card extension, plain JSON, with the JSON Schema they keep (:data:`GRAPH_PARAMS_SCHEMA`)::

    {"nodes": [
      {"id": "research", "kind": "agent", "target": "researcher", "dependsOn": []},
      {"id": "check", "kind": "switch", "dependsOn": ["research"],
       "cases": [{"when": "{{ research.output.data.confidence < 0.5 }}", "then": "ask"}, {"else": "write"}]},
      {"id": "per_source", "kind": "map", "target": "summarizer", "dependsOn": ["research"]}]}

``kind`` is ``agent``, ``tool``, ``workflow``, ``switch``, ``map`` or ``loop`` (a map or loop
node's ``target`` is what it runs); a switch has ``cases`` in order (the first whose ``when``
holds selects its ``then``; ``else``, last, when none held) instead of a ``target``. The nodes
a switch selects depend on it, so its edges are in their ``dependsOn`` too.
"""

from __future__ import annotations

from typing import Any

from agents.workflow.graph import Graph, Node

__all__ = ["GRAPH_PARAMS_SCHEMA", "WORKFLOW_EXTENSION", "graph_params"]

#: The card extension that describes the graph, which the dashboard draws.
WORKFLOW_EXTENSION = "urn:mqtt-agent-mesh:workflow:v1"

_ID = {"type": "string", "minLength": 1}
#: The JSON Schema (2020-12) of the extension's ``params`` (tests check every kind of node against it).
GRAPH_PARAMS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": WORKFLOW_EXTENSION,
    "title": "the params of a workflow agent's card extension: its graph",
    "type": "object",
    "required": ["nodes"],
    "additionalProperties": False,
    "properties": {
        "nodes": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/node"}},
    },
    "$defs": {
        "node": {
            "type": "object",
            "required": ["id", "kind", "dependsOn"],
            "additionalProperties": False,
            "properties": {
                "id": _ID,
                "kind": {"enum": ["agent", "tool", "workflow", "switch", "map", "loop"]},
                "target": {"type": "string", "minLength": 1, "description": "the agent, tool or workflow it runs"},
                "cases": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/case"}},
                "dependsOn": {"type": "array", "items": _ID, "uniqueItems": True},
            },
            "if": {"properties": {"kind": {"const": "switch"}}},
            "then": {"required": ["cases"], "not": {"required": ["target"]}},
            "else": {"required": ["target"], "not": {"required": ["cases"]}},
        },
        "case": {
            "oneOf": [
                {
                    "type": "object",
                    "required": ["when", "then"],
                    "additionalProperties": False,
                    "properties": {"when": {"type": "string"}, "then": _ID},
                },
                {"type": "object", "required": ["else"], "additionalProperties": False, "properties": {"else": _ID}},
            ]
        },
    },
}


def graph_params(graph: Graph) -> dict[str, Any]:
    """The extension's params for ``graph`` (see the module docstring)."""
    return {"nodes": [_node(node) for node in graph.nodes.values()]}


def _node(node: Node) -> dict[str, Any]:
    described: dict[str, Any] = {"id": node.id, "kind": _kind(node)}
    if node.kind == "switch":
        described["cases"] = [
            {"else": case.else_} if case.else_ is not None else {"when": case.when, "then": case.then}
            for case in node.spec.switch or ()
        ]
    else:
        described["target"] = node.spec.target
    described["dependsOn"] = sorted(node.deps)
    return described


def _kind(node: Node) -> str:
    return "map" if node.map is not None else "loop" if node.spec.loop is not None else node.kind
