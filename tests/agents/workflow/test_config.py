"""``workflow:`` entries: every graph refused at load time names the file, the node and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from agents.config import parse_agent_entry
from agents.workflow import WorkflowAgent
from agents.workflow.templates import Template
from mesh.broker import BrokerSettings
from mesh.component import BuildContext
from mesh.errors import ConfigError

SOURCE = Path("flows.yaml")


@pytest.fixture
def ctx() -> BuildContext:
    return BuildContext(broker=BrokerSettings(), namespace="mesh", source=SOURCE, section="agents")


def entry(workflow: str, **extra: Any) -> dict[str, Any]:
    return {"name": "report", "description": "Writes reports", "workflow": yaml.safe_load(workflow), **extra}


def error_of(value: dict[str, Any], ctx: BuildContext) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_agent_entry(value, ctx, 0)
    return str(caught.value)


def test_a_good_entry_builds_a_workflow_agent_with_its_store_beside_the_task_store(ctx: BuildContext) -> None:
    spec = parse_agent_entry(
        entry(
            """
            input_schema: {type: object, properties: {topic: {type: string}}, required: [topic]}
            nodes:
              - {id: research, agent: researcher, input: "Find facts about {{ input.topic }}"}
              - id: check
                switch: [{when: "{{ research.output.data.confidence < 0.5 }}", then: ask}, {else: write}]
              - {id: ask, agent: human}
              - {id: write, agent: writer, depends_on: [research], input: {text: "{{ research.output.text }}"}}
              - {id: per_source, map: "{{ research.output.data.sources }}", agent: summarizer, input: "{{ item.url }}"}
            output: {report: "{{ write.output.text }}"}
            """
        ),
        ctx,
        0,
    )
    agent = spec.agent
    assert isinstance(agent, WorkflowAgent)
    graph = agent.graph
    assert list(graph.nodes) == ["research", "check", "per_source", "ask", "write"]
    assert graph.nodes["per_source"].deps == {"research"}  # read by its templates
    assert graph.nodes["ask"].deps == {"check"} and graph.nodes["ask"].gate == "check"
    assert agent.store.path is not None and agent.store.path.name == "report.workflow.sqlite3"
    memory = parse_agent_entry(entry("nodes: [{id: a, agent: b}]", task_store=":memory:"), ctx, 0).agent
    assert isinstance(memory, WorkflowAgent) and memory.store.path is None


@pytest.mark.parametrize(
    ("workflow", "expected"),
    [
        (  # an unknown key, with did-you-mean
            "nodes: [{id: a, agent: b, depends: [x]}]",
            "flows.yaml: agents[0].workflow.nodes[0].depends: unknown key 'depends'; did you mean 'depends_on'?",
        ),
        (
            "nodes: [{id: a, agent: b}]\nouptut: {x: y}",
            "flows.yaml: agents[0].workflow.ouptut: unknown key 'ouptut'; did you mean 'output'?",
        ),
        (  # a cycle
            "nodes: [{id: a, agent: x, depends_on: [b]}, {id: b, agent: x, input: '{{ a.output.text }}'}]",
            "flows.yaml: agents[0].workflow.nodes[0]: the nodes form a cycle: a -> b -> a; a workflow is acyclic",
        ),
        (  # an unknown node in depends_on
            "nodes: [{id: research, agent: x}, {id: b, agent: x, depends_on: [reserch]}]",
            "flows.yaml: agents[0].workflow.nodes[1].depends_on: node 'b': depends_on names 'reserch', which is no "
            "node of the workflow; did you mean 'research'?",
        ),
        (  # a template naming a missing node
            "nodes: [{id: research, agent: x}, {id: b, agent: x, input: '{{ reserch.output.text }}'}]",
            "flows.yaml: agents[0].workflow.nodes[1]: node 'b': a template names 'reserch', which is no node of the "
            "workflow; did you mean 'research'?",
        ),
        (  # ... or input mistyped: `input` is suggested, and said apart from the nodes
            "nodes: [{id: a, agent: x, input: '{{ inptu.text }}'}]",
            "node 'a': a template names 'inptu', which is no node of the workflow; did you mean 'input'? nodes: a; "
            "templates also read input",
        ),
        (  # ... in the output
            "nodes: [{id: a, agent: x}]\noutput: {r: '{{ b.output.text }}'}",
            "flows.yaml: agents[0].workflow.output: the output names 'b', which is no node of the workflow",
        ),
        (  # a switch target that is no node
            "nodes: [{id: s, switch: [{when: '{{ true }}', then: nowhere}, {else: s2}]}, {id: s2, agent: x}]",
            "flows.yaml: agents[0].workflow.nodes[0].switch[0]: node 's': the case names 'nowhere', which is no node",
        ),
        (  # an agent reference that is no agent name
            "nodes: [{id: a, agent: 'no/such agent'}]",
            "flows.yaml: agents[0].workflow.nodes[0].agent: invalid agent name 'no/such agent'",
        ),
        (  # a workflow calling itself
            "nodes: [{id: a, workflow: report}]",
            "flows.yaml: agents[0].workflow.nodes[0].workflow: workflow 'report' calls itself; use a loop node",
        ),
        (  # a tool that does not import, or is not there
            "nodes: [{id: a, tool: 'no_such_module_x:f'}]",
            "flows.yaml: agents[0].workflow.nodes[0].tool: cannot import module 'no_such_module_x'",
        ),
        (
            "nodes: [{id: a, tool: 'tests.agents.workflow_agents:count_word'}]",
            "has no function 'count_word'; did you mean tests.agents.workflow_agents:count_words?",
        ),
        (  # a template that does not compile
            "nodes: [{id: a, agent: x, input: '{{ input.text '}]",
            "flows.yaml: agents[0].workflow.nodes[0].input: template '{{ input.text ' does not compile",
        ),
        (  # a node with two kinds, or none
            "nodes: [{id: a, agent: x, tool: 'm:f'}]",
            "flows.yaml: agents[0].workflow.nodes[0]: node 'a' has agent, tool of agent, tool, workflow, switch",
        ),
        ("nodes: [{id: a, input: x}]", "node 'a' has none of agent, tool, workflow, switch; give it exactly one"),
        (  # ids
            "nodes: [{id: a, agent: x}, {id: a, agent: y}]",
            "flows.yaml: agents[0].workflow.nodes[1].id: node id 'a' is already used by nodes[0]; rename one",
        ),
        ("nodes: [{id: input, agent: x}]", "flows.yaml: agents[0].workflow.nodes[0].id: node id 'input' is reserved"),
        ("nodes: [{id: my-node, agent: x}]", "node id 'my-node' is not a template name"),
        ("nodes: [{id: a, agent: x, input: '{{ a.output }}'}]", "node 'a' reads its own output in a template"),
        (
            "nodes: [{id: a, agent: x, retry: {attempts: 0}}]",
            "agents[0].workflow.nodes[0].retry.attempts: input should",
        ),
        ("nodes: []", "agents[0].workflow.nodes: list should have at least 1 item"),
        ("nodes: [{id: s, switch: [{else: a}, {when: '{{ 1 }}', then: a}]}, {id: a, agent: x}]", "'else' case is not"),
    ],
)
def test_a_bad_graph_is_refused_at_load_time(workflow: str, expected: str, ctx: BuildContext) -> None:
    assert expected in error_of(entry(workflow), ctx)


def test_a_workflow_entry_needs_a_name_and_one_kind(ctx: BuildContext) -> None:
    assert "agents[0].name: a workflow agent needs a name" in error_of({"workflow": {"nodes": []}}, ctx)
    both = error_of({"name": "w", "class": "agents.builtin.echo:EchoAgent", "workflow": {"nodes": []}}, ctx)
    assert "agents[0].workflow: an entry has either 'class:' or 'workflow:', not both" in both
    assert "unknown key 'workflw'; did you mean 'workflow'?" in error_of({"name": "w", "workflw": {}}, ctx)


def test_templates_are_sandboxed_and_keep_values() -> None:
    assert Template.compile("{{ x.items }}").render({"x": {"items": [1, 2]}}) is not None
    assert Template.compile("{{ n + 1 }}").render({"n": 1}) == 2
    assert Template.compile("n={{ n }}").render({"n": 1}) == "n=1"
    # The sandbox hides Python's insides: unsafe attributes are undefined (rendered as nothing).
    assert Template.compile("{{ x.__class__.__mro__ }}").render({"x": 1}) is None
    assert Template.compile("g={{ f.__globals__ }}").render({"f": test_templates_are_sandboxed_and_keep_values}) == "g="
    assert Template.compile("{{ s.format(x) }}").render({"s": "{0.__class__}", "x": 1}) == ""
    with pytest.raises(ValueError, match="failed: ZeroDivisionError"):
        Template.compile("{{ 1 / 0 }}").render({})
    assert not Template.compile("{{ 'false' }}").holds({})
