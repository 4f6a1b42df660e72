"""A workflow is an agent: a card, tasks, streaming, cancel, and a journal it resumes from.

Its card has one skill made of its description and input schema. A call (message text, or a
DataPart matching ``input_schema``) runs the graph (:mod:`agents.workflow.engine`) and is
answered with the ``output`` mapping as a DataPart and as text (an ``output`` that is a string
answers that text alone, a list ``{"items": [...]}``, another value ``{"value": ...}``).

Restarts: the agent declares :attr:`~agents.agent.Agent.resumes_tasks`, so the runtime hands
it the tasks the previous process left running instead of failing them. Each one finds its
run in the store (:mod:`agents.workflow.store`), takes its input and its caller from there,
and runs the nodes that had not finished: the finished ones are not run again; the ones in
flight are sent again. The caller follows the resumed task with ``tasks/get`` or
``tasks/resubscribe`` (the answer route of the original request died with the process).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, ClassVar

from agents.agent import Agent
from agents.context import TaskContext
from agents.updates import Rejected, Reply
from agents.workflow.card import WORKFLOW_EXTENSION, graph_params
from agents.workflow.engine import NodeFailed, WorkflowRun, fail_text
from agents.workflow.graph import Graph
from agents.workflow.inputs import InputProblem, message_input
from agents.workflow.store import RunRecord, RunStore, WorkflowStore
from agents.workflow.templates import TemplateProblem
from agents.workflow.tools import output_of_value
from mesh.a2a import AgentCard, AgentExtension, AgentSkill, Message

__all__ = ["WORKFLOW_EXTENSION", "WorkflowAgent"]

log = logging.getLogger(__name__)


class WorkflowAgent(Agent):
    """Serves a checked workflow graph (build one with :func:`agents.workflow.load_workflow`)."""

    resumes_tasks: ClassVar[bool] = True
    input_modes: ClassVar[tuple[str, ...]] = ("text/plain", "application/json")
    output_modes: ClassVar[tuple[str, ...]] = ("application/json", "text/plain")

    def __init__(
        self, *, graph: Graph, store_path: Path | None = None, store: RunStore | None = None, **options: Any
    ) -> None:
        """``store``: where the runs go (default: the SQLite file ``store_path``, or memory)."""
        super().__init__(**options)
        self.graph = graph
        self.store: RunStore = store if store is not None else WorkflowStore(store_path)
        schema = graph.spec.input_schema
        description = self.description or f"workflow {self.name}"
        if schema is not None:
            description += f" Input (JSON Schema): {json.dumps(schema, separators=(',', ':'))}"
        self._skill = AgentSkill(
            id=self.name,
            name=self.name,
            description=description,
            tags=["workflow"],
            input_modes=list(self.input_modes),
            output_modes=list(self.output_modes),
        )

    def card(self, *, url: str, push_notifications: bool) -> AgentCard:
        card = super().card(url=url, push_notifications=push_notifications)
        params = graph_params(self.graph)  # its schema: agents.workflow.card.GRAPH_PARAMS_SCHEMA
        graph = AgentExtension(uri=WORKFLOW_EXTENSION, description="a workflow: its graph", params=params)
        capabilities = card.capabilities.model_copy(update={"extensions": [graph]})
        return card.model_copy(update={"skills": [self._skill], "capabilities": capabilities})

    async def setup(self) -> None:
        await self.store.open()

    async def teardown(self) -> None:
        await self.store.close()

    async def handle(self, message: Message, ctx: TaskContext) -> Reply | Rejected:
        loaded = await self.store.load(ctx.task_id)
        if loaded is not None and loaded[0].message_id != message.message_id:
            loaded = None  # not this task's run (a row left by a crash, under a reused task id)
        if loaded is not None:
            run, finished = loaded
            # The caller as the first process knew it: the delegations carry it again.
            ctx.user_id, ctx.call_depth, ctx.call_chain = run.user_id, run.call_depth, list(run.call_chain)
            log.info("workflow %s: task %s resumes with %d finished node(s)", self.name, ctx.task_id, len(finished))
        else:
            try:
                value = message_input(message, self.graph.spec.input_schema)
            except InputProblem as exc:
                return Rejected(f"workflow {self.name!r}: {exc}; send input matching its input_schema")
            run = RunRecord(
                input=value,
                message_id=message.message_id,
                user_id=ctx.user_id,
                call_depth=ctx.call_depth,
                call_chain=ctx.call_chain,
            )
            finished = {}
            await self.store.started(ctx.task_id, run)
        try:
            output = await WorkflowRun(self.graph, ctx, self.store, input=run.input, finished=finished).execute()
        except NodeFailed as failure:
            raise fail_text(failure) from None
        except TemplateProblem as exc:
            raise fail_text(NodeFailed("output", str(exc))) from None
        finally:
            await self.store.ended(ctx.task_id)
        if isinstance(output, dict):
            return Reply(text=_text(output), data=output)
        answer = output_of_value(output)  # a string answers text alone; a list data.items; a number data.value
        return Reply(text=answer["text"], data=answer["data"])


def _text(output: dict[str, Any]) -> str:
    values = list(output.values())
    if all(isinstance(v, str) for v in values):
        return "\n".join(values)
    return json.dumps(output, default=str)
