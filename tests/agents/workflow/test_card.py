"""A workflow agent's card describes its graph as plain JSON that keeps the extension's schema
(``agents.workflow.card.GRAPH_PARAMS_SCHEMA``), for a workflow with every kind of node."""

from __future__ import annotations

import json
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from agents.workflow import WorkflowAgent, load_workflow
from agents.workflow.card import GRAPH_PARAMS_SCHEMA, WORKFLOW_EXTENSION

EVERY_KIND = """
nodes:
  - {id: research, agent: facts, input: "{{ input.text }}"}
  - id: check
    switch:
      - {when: "{{ research.output.data.confidence < 0.5 }}", then: shout}
      - {when: "{{ research.output.data.confidence > 0.8 }}", then: nested}
      - {else: per_item}
  - {id: shout, agent: upper, input: "doubt"}
  - {id: nested, workflow: inner, input: "{{ research.output.text }}"}
  - {id: per_item, map: "{{ research.output.data.sources }}", agent: upper, input: "{{ item.url }}"}
  - id: refine
    depends_on: [per_item]
    loop: {while: "{{ loop.output.text | length < 4 }}", max_iterations: 3}
    tool: "tests.agents.workflow_agents:grow"
  - {id: counted, tool: "tests.agents.workflow_agents:count_words", input: "{{ refine.output.text }}"}
output: {words: "{{ counted.output.text }}"}
"""


def card_params(text: str, name: str = "flow") -> dict[str, Any]:
    agent = WorkflowAgent(name=name, graph=load_workflow(text, name=name))
    card = agent.card(url="mqtt://x", push_notifications=False)
    wire = json.loads(card.model_dump_json(by_alias=True, exclude_none=True))  # as it travels
    (extension,) = [e for e in wire["capabilities"]["extensions"] if e["uri"] == WORKFLOW_EXTENSION]
    params: dict[str, Any] = extension["params"]
    return params


def test_the_schema_is_a_valid_json_schema() -> None:
    Draft202012Validator.check_schema(GRAPH_PARAMS_SCHEMA)


def test_a_card_with_every_kind_of_node_keeps_the_schema() -> None:
    params = card_params(EVERY_KIND)
    validator = Draft202012Validator(GRAPH_PARAMS_SCHEMA)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(params)]
    assert not errors, errors
    nodes = {n["id"]: n for n in params["nodes"]}
    assert {n["kind"] for n in nodes.values()} == {"agent", "switch", "workflow", "map", "loop", "tool"}
    assert nodes["check"] == {
        "id": "check",
        "kind": "switch",
        "cases": [
            {"when": "{{ research.output.data.confidence < 0.5 }}", "then": "shout"},
            {"when": "{{ research.output.data.confidence > 0.8 }}", "then": "nested"},
            {"else": "per_item"},
        ],
        "dependsOn": ["research"],
    }
    # The nodes a switch selects depend on it: its edges are in their dependsOn too.
    assert all("check" in nodes[target]["dependsOn"] for target in ("shout", "nested", "per_item"))
    assert nodes["per_item"]["target"] == "upper" and nodes["nested"]["target"] == "inner"
    assert nodes["refine"] == {
        "id": "refine",
        "kind": "loop",
        "target": "tests.agents.workflow_agents:grow",
        "dependsOn": ["per_item"],
    }
    assert "SwitchCase" not in json.dumps(params)  # no Python repr anywhere


@pytest.mark.parametrize(
    ("broken", "why"),
    [
        ({"nodes": [{"id": "s", "kind": "switch", "target": "[SwitchCase(...)]", "dependsOn": []}]}, "a repr"),
        ({"nodes": [{"id": "s", "kind": "switch", "cases": [{"when": "{{ x }}"}], "dependsOn": []}]}, "no then"),
        ({"nodes": [{"id": "a", "kind": "agent", "dependsOn": []}]}, "no target"),
        ({"nodes": [{"id": "a", "kind": "agent", "target": "x", "dependsOn": [], "extra": 1}]}, "unknown key"),
    ],
)
def test_the_schema_refuses_what_a_card_must_not_say(broken: dict[str, Any], why: str) -> None:
    assert list(Draft202012Validator(GRAPH_PARAMS_SCHEMA).iter_errors(broken)), why
