"""One run of a workflow: nodes start as soon as their dependencies finished.

Nodes without a dependency between them run at once (at most ``max_parallel``). Each node
emits a status update as it starts and as it ends (``workflowNode``, ``workflowNodeState`` in
the metadata), passes its peer's own progress on (tagged with the node too), and has one
trace span. A finished node's state and output are stored (:mod:`agents.workflow.store`)
before its dependents start, so a restarted run skips it.

A node's output, as templates read it (``{{ research.output.text }}``): ``text`` (the
answer's text), ``data`` (its first DataPart, if any), ``task_id`` and ``state``; a map's
``data.items`` holds each item's output; a loop's output is its last iteration's, plus
``iterations``. A failed node fails the run naming it, after its ``retry`` attempts, unless
``on_error: continue`` (its dependents then run and see ``state: failed`` and
``output.error``). A node all of whose dependencies were skipped (a switch chose another
branch) is skipped; one that joins a skipped branch and a run one runs. Cancelling the run
cancels every running node, each delegation cancelling its remote task
(:mod:`agents.delegation`) before the run ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from agents.context import TaskContext
from agents.errors import DelegationError
from agents.updates import PartsArtifact, Status, TaskFailed, Update
from agents.workflow.graph import Graph, Node
from agents.workflow.spec import RetrySpec
from agents.workflow.store import NodeRecord, RunStore
from agents.workflow.templates import Template, TemplateProblem, render_value
from agents.workflow.tools import Tool, ToolInputProblem, output_of_value
from mesh.a2a import DataPart, Message, Part, Task, TextPart, create_user_message
from mesh.telemetry import tracing

__all__ = ["NodeFailed", "WorkflowRun", "output_of_task"]

log = logging.getLogger(__name__)

COMPLETED, FAILED, SKIPPED = "completed", "failed", "skipped"


class NodeFailed(Exception):
    """A node gave no usable output (after its retries)."""

    def __init__(self, node: str, reason: str) -> None:
        super().__init__(f"node {node!r} failed: {reason}")
        self.node = node
        self.reason = reason


class WorkflowRun:
    """Runs ``graph`` for one task; :meth:`execute` returns the rendered output mapping."""

    def __init__(
        self,
        graph: Graph,
        ctx: TaskContext,
        store: RunStore,
        *,
        input: Any,
        finished: Mapping[str, NodeRecord] | None = None,
    ) -> None:
        self.graph = graph
        self.ctx = ctx
        self.store = store
        self.input = input
        finished = finished or {}
        self.results: dict[str, NodeRecord] = {k: r for k, r in finished.items() if k in graph.nodes}
        # Map items and loop iterations a previous process finished, by "node[i]" / "node#i".
        self.parts: dict[str, Any] = {k: r.output for k, r in finished.items() if k not in graph.nodes}
        self._parallel = asyncio.Semaphore(graph.spec.max_parallel)
        self._pending = [n for n in graph.nodes.values() if n.id not in self.results]
        self._running: dict[asyncio.Task[NodeRecord], Node] = {}
        self._failing = False  # a node failed (or the run ended): start nothing more

    # ------------------------------------------------------------------ the graph

    async def execute(self) -> Any:
        running = self._running
        try:
            await self._start_ready()
            while running:
                done, _ = await asyncio.wait(list(running), return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    running.pop(task)
                    task.result()  # a NodeFailed ends the run (finally: the rest are canceled)
        finally:
            self._failing = True  # no node starts after this
            await _cancel_all(running)
        return self._output()

    async def _start_ready(self) -> None:
        """Start every node whose dependencies have finished (skip those a switch did not choose).

        A finishing node calls it itself, before its task ends: its dependents start in the
        same pass of the loop (and their start is journaled with its end, in one write).
        """
        ready = True
        while ready and not self._failing:
            ready = False
            for node in [n for n in self._pending if n.deps.issubset(self.results)]:
                if node not in self._pending:
                    continue  # another finishing node started it meanwhile
                ready = True  # a skip may make more nodes ready
                self._pending.remove(node)
                if self._skipped(node):
                    await self._finish(node, NodeRecord(SKIPPED, None))
                    continue
                self._running[asyncio.get_running_loop().create_task(self._node(node))] = node

    def _skipped(self, node: Node) -> bool:
        # A branch a switch did not choose ends where it joins another: a node is skipped when
        # every one of its dependencies was (its selecting switch aside).
        upstream = node.deps - {node.gate}
        if upstream and all(self.results[dep].state == SKIPPED for dep in upstream):
            return True
        if node.gate is not None:
            chosen = self.results[node.gate].output
            return not (isinstance(chosen, dict) and chosen.get("selected") == node.id)
        return False

    def _output(self) -> Any:
        if self.graph.output is not None:
            return render_value(self.graph.output, self.scope())
        sinks = [n.id for n in self.graph.nodes.values() if not self.graph.dependents(n.id)]
        return {sink: (self.results[sink].output or {}).get("text") for sink in sinks}

    def scope(self, **extra: Any) -> dict[str, Any]:
        scope: dict[str, Any] = {"input": self.input}
        for node_id, record in self.results.items():
            scope[node_id] = {"output": record.output, "state": record.state}
        scope.update(extra)
        return scope

    # ------------------------------------------------------------------ one node

    async def _node(self, node: Node) -> NodeRecord:
        async with self._parallel:
            self._status(node.id, "running", f"node {node.id} started")
            span = _span(node, self.ctx) if tracing.enabled else None
            error: BaseException | None = None
            try:
                with tracing.activated(span) if span is not None else contextlib.nullcontext():
                    record = NodeRecord(COMPLETED, await self._kind(node))
            except NodeFailed as failure:
                error = failure
                if node.spec.on_error != "continue":
                    self._failing = True
                    self._status(node.id, FAILED, str(failure))
                    raise
                record = NodeRecord(FAILED, {"error": failure.reason, "text": "", "data": None})
            except BaseException as exc:
                error = exc
                self._failing = True
                raise
            finally:
                if span is not None:
                    tracing.end_span(span, error, **{"workflow.node.state": FAILED if error else COMPLETED})
            await self._finish(node, record)
        await self._start_ready()  # its dependents, now (outside the parallel bound it held)
        return record

    async def _finish(self, node: Node, record: NodeRecord) -> None:
        self.results[node.id] = record
        await self.store.node_done(self.ctx.task_id, node.id, record)  # before any dependent starts
        self._status(node.id, record.state, f"node {node.id} {record.state}")

    async def _kind(self, node: Node) -> Any:
        if node.kind == "switch":
            scope = self.scope()
            for condition, target in node.cases:
                if condition is None or _holds(node, condition, scope):
                    return {"selected": target, "text": target, "data": None}
            return {"selected": None, "text": "", "data": None}
        if node.map is not None:
            return await self._map(node, node.map)
        if node.spec.loop is not None and node.loop_while is not None:
            return await self._loop(node, node.spec.loop.max_iterations, node.loop_while)
        return await self._attempts(node, self.scope())

    async def _map(self, node: Node, source: Template) -> Any:
        items = _render(node, source, self.scope())
        if not isinstance(items, list | tuple):
            raise NodeFailed(node.id, f"map gave a {type(items).__name__}, not a list")
        limit = node.spec.max_items or self.graph.spec.max_items
        if len(items) > limit:
            raise NodeFailed(node.id, f"map gave {len(items)} items, more than max_items ({limit})")
        bound = asyncio.Semaphore(node.spec.max_parallel or self.graph.spec.max_parallel)
        done = self._done_parts(node.id)

        async def one(index: int, item: Any) -> Any:
            key = f"{node.id}[{index}]"
            if key in done:
                return done[key]
            async with bound:
                output = await self._attempts(node, self.scope(item=item, index=index), label=key)
            await self.store.node_done(self.ctx.task_id, key, NodeRecord(COMPLETED, output))
            return output

        tasks = [asyncio.get_running_loop().create_task(one(i, item)) for i, item in enumerate(items)]
        try:
            outputs = await asyncio.gather(*tasks)
        finally:
            await _cancel_all(dict.fromkeys(tasks))
        text = "\n".join(str(o.get("text") or "") for o in outputs)
        return {"text": text, "data": {"items": outputs}}

    async def _loop(self, node: Node, max_iterations: int, condition: Template) -> Any:
        done = self._done_parts(node.id)
        output: Any = None
        for index in range(max_iterations):
            key = f"{node.id}#{index}"
            loop = {"index": index, "output": output}
            if key in done:
                output = done[key]
            else:
                output = await self._attempts(node, self.scope(loop=loop), label=key)
                await self.store.node_done(self.ctx.task_id, key, NodeRecord(COMPLETED, output))
            if not _holds(node, condition, self.scope(loop={"index": index, "output": output})):
                break
        return {**(output or {}), "iterations": index + 1}

    def _done_parts(self, node_id: str) -> dict[str, Any]:
        """Map items and loop iterations of ``node_id`` a previous process finished."""
        return {k: o for k, o in self.parts.items() if k.startswith((f"{node_id}[", f"{node_id}#"))}

    async def _attempts(self, node: Node, scope: dict[str, Any], *, label: str | None = None) -> Any:
        retry = node.spec.retry or RetrySpec(attempts=1, backoff_s=0)
        for attempt in range(1, retry.attempts + 1):
            try:
                return await self._once(node, scope)
            except NodeFailed as failure:
                if attempt == retry.attempts:
                    raise
                delay = retry.backoff_s * 2 ** (attempt - 1)
                self._status(node.id, "retrying", f"{label or node.id}: attempt {attempt} failed ({failure.reason})")
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _once(self, node: Node, scope: dict[str, Any]) -> Any:
        payload = _render(node, node.input, scope) if node.input is not None else _passed_on(self.input)
        timeout_s = node.spec.timeout_s or self.graph.spec.node_timeout_s
        if node.tool is not None:
            return await self._tool(node, node.tool, payload, timeout_s)
        try:
            task = await self._node_ctx(node.id).delegate(
                node.spec.target,
                _message(payload, self.ctx.context_id),
                # message/send with a status topic: the peer's progress (status updates that carry
                # a message) still comes, without a bare "working" event per node.
                stream=False,
                timeout=timeout_s,
                forward=True,
                metadata={"workflowNode": node.id},
            )
        except DelegationError as exc:
            raise NodeFailed(node.id, str(exc)) from None
        return output_of_task(task)

    async def _tool(self, node: Node, tool: Tool, payload: Any, timeout_s: float) -> Any:
        try:
            async with asyncio.timeout(timeout_s):
                result = await tool(payload)  # as an LLM agent's python tools are called (agents.workflow.tools)
        except TimeoutError:
            raise NodeFailed(node.id, f"tool {node.spec.target!r} took more than {timeout_s:g} s") from None
        except ToolInputProblem as exc:
            raise NodeFailed(node.id, str(exc)) from None
        except Exception as exc:  # the tool's own failure fails its node, not the agent
            raise NodeFailed(node.id, f"tool {node.spec.target!r} raised {type(exc).__name__}: {exc}") from None
        return output_of_value(result)

    # ------------------------------------------------------------------ events

    def _status(self, node_id: str, state: str, text: str) -> None:
        if self.ctx.emit is not None:
            self.ctx.emit(Status(text=text, metadata={"workflowNode": node_id, "workflowNodeState": state}))

    def _node_ctx(self, node_id: str) -> TaskContext:
        """The task's context, with the peer's forwarded progress tagged with the node."""
        emit = self.ctx.emit
        if emit is None:
            return self.ctx

        def tagged(update: Update) -> None:
            if isinstance(update, Status | PartsArtifact):
                update = dataclasses.replace(update, metadata={**(update.metadata or {}), "workflowNode": node_id})
            emit(update)

        return dataclasses.replace(self.ctx, emit=tagged)


async def _cancel_all(tasks: Mapping[asyncio.Task[Any], Any]) -> None:
    """Cancel the tasks still running and wait until each has unwound (its remote task canceled)."""
    live = [t for t in tasks if not t.done()]
    for task in live:
        task.cancel()
    if live:
        await asyncio.gather(*live, return_exceptions=True)


def _render(node: Node, compiled: Any, scope: dict[str, Any]) -> Any:
    try:
        return render_value(compiled, scope)
    except TemplateProblem as exc:
        raise NodeFailed(node.id, str(exc)) from None


def _holds(node: Node, condition: Any, scope: dict[str, Any]) -> bool:
    try:
        return bool(condition.holds(scope))
    except TemplateProblem as exc:
        raise NodeFailed(node.id, str(exc)) from None


def _span(node: Node, ctx: TaskContext) -> Any:
    attributes = {"a2a.agent": ctx.agent_name, "a2a.task_id": ctx.task_id, "workflow.node": node.id}
    attributes["workflow.node.kind"] = "map" if node.map is not None else "loop" if node.spec.loop else node.kind
    return tracing.start_span(f"workflow node {node.id}", "internal", attributes=attributes)


def _passed_on(value: Any) -> Any:
    """A node without ``input`` gets the workflow's: its text when it came as text, else its data."""
    if isinstance(value, dict) and list(value) == ["text"]:
        return value["text"]
    return value


def _message(payload: Any, context_id: str) -> str | Message:
    if isinstance(payload, str):
        return payload
    parts: list[Part]
    if isinstance(payload, Mapping):
        parts = [DataPart(data=dict(payload))]
    elif isinstance(payload, list | tuple):
        parts = [DataPart(data={"items": list(payload)})]
    else:
        parts = [TextPart(text="" if payload is None else str(payload))]
    return create_user_message(parts, context_id=context_id)


def _parts_of(task: Task) -> Iterator[Part]:
    if task.status.message is not None:
        yield from task.status.message.parts
    for artifact in task.artifacts or ():
        yield from artifact.parts


def output_of_task(task: Task) -> dict[str, Any]:
    """A peer's final Task as a node output: text, first data, task id and state."""
    texts, data = [], None
    for part in _parts_of(task):
        root = getattr(part, "root", part)
        if isinstance(root, TextPart):
            texts.append(root.text)
        elif isinstance(root, DataPart) and data is None:
            data = root.data
    return {"text": "\n".join(texts), "data": data, "task_id": task.id, "state": task.status.state.value}


def fail_text(failure: NodeFailed) -> TaskFailed:
    """The task failure that names the node."""
    return TaskFailed(str(failure), data={"workflowNode": failure.node, "reason": failure.reason})
