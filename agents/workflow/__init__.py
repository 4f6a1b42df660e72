"""Workflows: deterministic DAGs of agents, declared in YAML, durable, and agents themselves.

An ``agents:`` entry with ``workflow:`` (the contract: :mod:`agents.workflow.spec`, checked by
:mod:`agents.workflow.graph`) is served as a :class:`WorkflowAgent`: its nodes delegate to
agents, switch, map, loop, call Python tools or other workflows; templates are Jinja2's
sandbox (:mod:`agents.workflow.templates`); progress is stored beside the task journal
(:mod:`agents.workflow.store`) so a restarted agent resumes its runs. See docs/workflows.md.
"""

from agents.workflow.agent import WorkflowAgent
from agents.workflow.config import load_workflow, parse_workflow, workflow_store_path
from agents.workflow.engine import NodeFailed, WorkflowRun
from agents.workflow.graph import Graph, GraphProblem, build_graph
from agents.workflow.spec import WorkflowSpec

__all__ = [
    "Graph",
    "GraphProblem",
    "NodeFailed",
    "WorkflowAgent",
    "WorkflowRun",
    "WorkflowSpec",
    "build_graph",
    "load_workflow",
    "parse_workflow",
    "workflow_store_path",
]
