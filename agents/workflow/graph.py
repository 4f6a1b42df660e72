"""A workflow's graph, checked before it runs (in the spirit of Argo's DAG templates).

:func:`build_graph` turns a :class:`~agents.workflow.spec.WorkflowSpec` into a :class:`Graph`
or raises :class:`GraphProblem` naming the node, the key and the fix. Refused at load time:
a node with no kind or two, a duplicate or reserved id, a ``depends_on`` or switch target that
names no node, a template that does not compile or names something that is neither ``input``
nor a node (nor ``item``/``index`` in a map, ``loop`` in a loop), a tool that does not import,
an agent name that is not an identifier, a workflow that calls itself, and a cycle.

What "unknown agent" means at load time: agents live anywhere on the mesh (another process,
another machine), so a name cannot be looked up when the file loads; it must be a valid agent
name, and an agent that is not on the mesh when its node runs fails that node at once (the
delegation's "agent not found", after the discovery wait) naming the node and the agent.

A node depends on the nodes in its ``depends_on``, on every node its templates read, and on
the switch that selects it.
"""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic.errors import PydanticUserError

from agents.workflow.spec import KIND_KEYS, NodeSpec, WorkflowSpec
from agents.workflow.templates import Template, TemplateProblem, compile_value, template_names
from agents.workflow.tools import Tool
from mesh.config.errors import KeyPart, suggest
from topics import validate_identifier

__all__ = ["RESERVED", "Graph", "GraphProblem", "Node", "build_graph"]

#: Names templates give a meaning of their own: no node may take them.
RESERVED = frozenset({"input", "item", "index", "loop", "workflow", "true", "false", "none"})
_NODE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class GraphProblem(ValueError):
    """A graph refused at load time: where (a key path under ``workflow``), what, and the fix."""

    def __init__(self, path: Sequence[KeyPart], problem: str, fix: str) -> None:
        super().__init__(f"{problem}; {fix}")
        self.path = tuple(path)
        self.problem = problem
        self.fix = fix


@dataclass(slots=True)
class Node:
    """One checked node: its spec, compiled templates and resolved dependencies."""

    spec: NodeSpec
    index: int
    deps: frozenset[str] = frozenset()
    gate: str | None = None  # the switch that selects it, if any
    input: Any = None
    map: Template | None = None
    loop_while: Template | None = None
    cases: list[tuple[Template | None, str]] = field(default_factory=list)
    tool: Tool | None = None

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def kind(self) -> str:
        return self.spec.kind


@dataclass(slots=True)
class Graph:
    """The nodes in an order that runs dependencies first, and the compiled output."""

    spec: WorkflowSpec
    nodes: dict[str, Node]
    output: Any

    def dependents(self, node_id: str) -> list[str]:
        return [n.id for n in self.nodes.values() if node_id in n.deps]


def build_graph(spec: WorkflowSpec, *, own_name: str) -> Graph:
    """Check ``spec`` and compile it (see the module docstring); raise :class:`GraphProblem`."""
    ids = _check_ids(spec.nodes)
    nodes = {n.id: Node(spec=n, index=i) for i, n in enumerate(spec.nodes)}
    gates: dict[str, str] = {}
    for node in nodes.values():
        _check_kind(node, own_name)
        here = ("nodes", node.index)
        for dep in node.spec.depends_on:
            _must_be_node(dep, ids, (*here, "depends_on"), f"depends_on names {dep!r}", node.id)
        if node.spec.switch is not None:
            node.cases = _cases(node, ids, gates)
        names: set[str] = set()
        if node.spec.map is not None:
            node.map = _compile(node.spec.map, (*here, "map"))
            names |= node.map.names
        if node.spec.loop is not None:
            node.loop_while = _compile(node.spec.loop.while_, (*here, "loop", "while"))
            names |= node.loop_while.names - {"loop"}
        node.input = _compile_input(node.spec.input, (*here, "input"))
        input_names = template_names(node.input)
        if node.spec.map is not None:
            input_names -= {"item", "index"}
        if node.spec.loop is not None:
            input_names -= {"loop"}
        names |= input_names
        names |= set().union(*(t.names for t, _ in node.cases if t is not None)) if node.cases else set()
        for name in sorted(names):
            if name == node.id:
                raise GraphProblem(
                    here, f"node {node.id!r} reads its own output in a template", "read another node's output"
                )
            _must_be_node(name, ids, here, f"a template names {name!r}", node.id, also=("input",))
        node.deps = frozenset(set(node.spec.depends_on) | (names & set(ids)))
    for target, switch in gates.items():
        nodes[target].gate = switch
        nodes[target].deps = nodes[target].deps | {switch}
    output = _compile_input(spec.output, ("output",))
    for name in sorted(template_names(output)):
        _must_be_node(name, ids, ("output",), f"the output names {name!r}", None, also=("input",))
    return Graph(spec=spec, nodes=_in_order(nodes), output=output)


def _check_ids(nodes: Sequence[NodeSpec]) -> list[str]:
    seen: dict[str, int] = {}
    for index, node in enumerate(nodes):
        where = ("nodes", index, "id")
        if not _NODE_ID.fullmatch(node.id):
            raise GraphProblem(
                where,
                f"node id {node.id!r} is not a template name",
                "use letters, digits and '_' (not first), at most 64: templates read it as {{ " + "my_node.output }}",
            )
        if node.id in RESERVED:
            raise GraphProblem(where, f"node id {node.id!r} is reserved", f"rename it; reserved: {sorted(RESERVED)}")
        if node.id in seen:
            raise GraphProblem(where, f"node id {node.id!r} is already used by nodes[{seen[node.id]}]", "rename one")
        seen[node.id] = index
    return list(seen)


def _check_kind(node: Node, own_name: str) -> None:
    spec, here = node.spec, ("nodes", node.index)
    kinds = [key for key in KIND_KEYS if getattr(spec, key) is not None]
    if len(kinds) != 1:
        found = f"has {', '.join(kinds)}" if kinds else "has none"
        raise GraphProblem(here, f"node {spec.id!r} {found} of {', '.join(KIND_KEYS)}", "give it exactly one")
    kind = kinds[0]
    if spec.map is not None and spec.loop is not None:
        raise GraphProblem(here, f"node {spec.id!r} has both 'map' and 'loop'", "split it into two nodes")
    if kind == "switch":
        extra = [k for k in ("map", "loop", "input", "retry") if getattr(spec, k) is not None]
        if extra:
            raise GraphProblem((*here, extra[0]), f"a switch node takes no {extra[0]!r}", "move it to the target nodes")
        return
    if kind in ("agent", "workflow"):
        try:
            validate_identifier(spec.target, f"{kind} name")
        except ValueError as exc:
            fix = f"name an agent as it is on the mesh, e.g. {kind}: writer"
            raise GraphProblem((*here, kind), str(exc), fix) from None
        if kind == "workflow" and spec.target == own_name:
            raise GraphProblem(
                (*here, kind), f"workflow {own_name!r} calls itself", "use a loop node to run something again"
            )
    if kind == "tool":
        node.tool = _import_tool(spec.target, (*here, "tool"))


def _import_tool(spec: str, where: tuple[KeyPart, ...]) -> Tool:
    module_name, _, attribute = spec.partition(":")
    form = "name the function as 'module:function', e.g. tool: mytools:summarize"
    if not (module_name.strip() and attribute.strip()):
        raise GraphProblem(where, f"{spec!r} is not of the form 'module:function'", form)
    try:
        module = importlib.import_module(module_name.strip())
    except ImportError as exc:
        fix = "check the name; put its file beside the config file or on PYTHONPATH"
        raise GraphProblem(where, f"cannot import module {module_name!r} ({exc})", fix) from None
    found = getattr(module, attribute.strip(), None)
    if not callable(found):
        public = [n for n in dir(module) if callable(getattr(module, n)) and not n.startswith("_")]
        close = suggest(attribute.strip(), public)
        hint = f"did you mean {module_name}:{close}? " if close else ""
        raise GraphProblem(where, f"module {module_name!r} has no function {attribute!r}", f"{hint}{form}")
    if inspect.isclass(found):
        raise GraphProblem(where, f"{spec!r} is a class", f"point it at a function; {form}")
    try:
        return Tool(spec, found)
    except (TypeError, ValueError, PydanticUserError) as exc:  # a signature pydantic cannot check
        raise GraphProblem(where, f"{spec!r} cannot be called as a tool ({exc})", "annotate its parameters") from None


def _cases(node: Node, ids: list[str], gates: dict[str, str]) -> list[tuple[Template | None, str]]:
    cases: list[tuple[Template | None, str]] = []
    switch = node.spec.switch or []
    if not switch:
        raise GraphProblem(("nodes", node.index, "switch"), "a switch needs cases", "add [{when, then}, {else}]")
    for i, case in enumerate(switch):
        where = ("nodes", node.index, "switch", i)
        target = (case.then if case.else_ is None else case.else_) or ""  # SwitchCase checks there is one
        if case.else_ is not None and i != len(switch) - 1:
            raise GraphProblem(where, "the 'else' case is not the last", "move it to the end of the cases")
        _must_be_node(target, ids, where, f"the case names {target!r}", node.id)
        if target == node.id:
            raise GraphProblem(where, f"switch {node.id!r} selects itself", "name another node")
        if gates.get(target, node.id) != node.id:
            raise GraphProblem(where, f"node {target!r} is already selected by switch {gates[target]!r}", "use one")
        gates[target] = node.id
        condition = _compile(case.when, (*where, "when")) if case.when is not None else None
        cases.append((condition, target))
    return cases


def _compile(source: str, where: tuple[KeyPart, ...]) -> Template:
    try:
        return Template.compile(source)
    except TemplateProblem as exc:
        raise GraphProblem(where, str(exc), "fix the template (Jinja2 syntax: {{ node.output.text }})") from None


def _compile_input(value: Any, where: tuple[KeyPart, ...]) -> Any:
    try:
        return compile_value(value)
    except TemplateProblem as exc:
        raise GraphProblem(where, str(exc), "fix the template (Jinja2 syntax: {{ node.output.text }})") from None


def _must_be_node(
    name: str,
    ids: Sequence[str],
    where: tuple[KeyPart, ...],
    what: str,
    node: str | None,
    *,
    also: Sequence[str] = (),
) -> None:
    """Refuse ``name`` unless it is a node (or one of the names ``also`` a template may read):
    the closest name suggested, the nodes listed (``input`` is no node, so it is said apart)."""
    if name in ids or name in also:
        return
    close = suggest(name, [*ids, *also])
    hint = f"did you mean {close!r}? " if close else ""
    at = f"node {node!r}: " if node else ""
    others = f"; templates also read {', '.join(also)}" if also else ""
    raise GraphProblem(
        where, f"{at}{what}, which is no node of the workflow", f"{hint}nodes: {', '.join(sorted(ids))}{others}"
    )


def _in_order(nodes: dict[str, Node]) -> dict[str, Node]:
    """The nodes with every dependency first (Kahn); a cycle is refused, naming it."""
    remaining = {node_id: set(node.deps) for node_id, node in nodes.items()}
    ordered: dict[str, Node] = {}
    while remaining:
        ready = [node_id for node_id, deps in remaining.items() if not deps]
        if not ready:
            cycle = _a_cycle(remaining)
            first = nodes[cycle[0]]
            raise GraphProblem(
                ("nodes", first.index),
                f"the nodes form a cycle: {' -> '.join([*cycle, cycle[0]])}",
                "a workflow is acyclic: remove one of these dependencies (a loop node repeats work)",
            )
        for node_id in ready:
            ordered[node_id] = nodes[node_id]
            del remaining[node_id]
        for deps in remaining.values():
            deps.difference_update(ready)
    return ordered


def _a_cycle(remaining: dict[str, set[str]]) -> list[str]:
    start = min(remaining)
    path: list[str] = []
    node = start
    while node not in path:
        path.append(node)
        node = min(remaining[node])
    return path[path.index(node) :]
