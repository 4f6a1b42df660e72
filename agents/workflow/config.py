"""The ``workflow:`` key of an ``agents:`` entry, read into a checked graph.

Called by :mod:`agents.config` for an entry with ``workflow:`` (``name:`` required). Every
problem is a ``ConfigError`` in the mesh's ``<file>: <key path>: <problem>; <fix>`` form,
pointing into the entry (``agents[0].workflow.nodes[2].depends_on: ...``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from agents.journal import MEMORY, journal_path
from agents.workflow.graph import Graph, GraphProblem, build_graph
from agents.workflow.spec import WorkflowSpec
from mesh.config.errors import KeyPart, config_error, validation_error_text
from mesh.errors import ConfigError

__all__ = ["load_workflow", "parse_workflow", "workflow_store_path"]


def parse_workflow(value: Any, *, name: str, source: Path | str, where: tuple[KeyPart, ...]) -> Graph:
    """Check a ``workflow:`` value and build its graph; raise ``ConfigError``."""
    if not isinstance(value, Mapping):
        raise config_error(
            source, where, f"expected a mapping, got {type(value).__name__}", "write workflow: {nodes: [...]}"
        )
    try:
        spec = WorkflowSpec.model_validate(value)
    except ValidationError as exc:
        raise ConfigError(validation_error_text(exc, source=source, prefix=where, model=WorkflowSpec)) from None
    if isinstance(source, Path):
        # Tools ('module:function') are looked for beside the file too, as classes are.
        directory = str(source.resolve().parent)
        if directory not in sys.path:
            sys.path.append(directory)
    try:
        return build_graph(spec, own_name=name)
    except GraphProblem as exc:
        raise config_error(source, (*where, *exc.path), exc.problem, exc.fix) from None


def load_workflow(text: str, *, name: str, source: str = "<workflow>") -> Graph:
    """A graph from YAML text (the value of ``workflow:``), for code and tests."""
    return parse_workflow(yaml.safe_load(text), name=name, source=source, where=("workflow",))


def workflow_store_path(entry: Mapping[str, Any], namespace: str, name: str) -> Path | None:
    """Where the workflow keeps its runs: a file beside the agent's task store (None: in memory).

    ``<agent>.sqlite3`` -> ``<agent>.workflow.sqlite3``. Not the task store itself: two writers
    of one SQLite file take turns through its busy handler, which sleeps a millisecond or more
    each time they meet, and the task journal writes at every node's start and end.
    """
    task_store = entry.get("task_store") or ""
    if entry.get("shared_subscription") and not task_store:
        task_store = MEMORY  # as the service does for replicas
    tasks = journal_path(str(task_store), namespace, name)
    return None if tasks is None else tasks.with_name(f"{tasks.stem}.workflow{tasks.suffix or '.sqlite3'}")
