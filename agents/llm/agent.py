"""The LLM agent: a pydantic-ai ``Agent`` served as a mesh agent.

Built from an ``llm:`` entry (:mod:`agents.llm.config`) or in code::

    from agents.llm import LlmAgent, LlmConfig

    agent = LlmAgent(name="assistant", llm=LlmConfig(model="openai:gpt-4.1-mini", peers=("*",)))

``model=`` replaces the configured model by any pydantic-ai model (a ``FunctionModel`` in a
test, see :func:`agents.testing.llm_agent`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic_ai import Agent as Engine
from pydantic_ai import DeferredToolRequests, StructuredDict
from pydantic_ai.models import Model
from pydantic_ai.tools import RunContext
from pydantic_ai.toolsets import AbstractToolset

from agents.agent import Agent
from agents.context import TaskContext
from agents.llm.approvals import Pending, approval_label, guarded, pending_in
from agents.llm.budgets import Meter, MeteredModel, UsageStores
from agents.llm.config import LlmConfig
from agents.llm.model import RetryingModel, build_model
from agents.llm.run import LlmRun
from agents.llm.tools import MAX_RETRIES, RunDeps, StaticTools, build_toolsets, traced
from agents.updates import InputRequired, TaskFailed, Update
from mesh.a2a import Message
from mesh.telemetry import METRICS, ComponentMetrics

__all__ = ["LlmAgent"]

log = logging.getLogger(__name__)


async def ask_user(ctx: RunContext[RunDeps], question: str) -> str:
    """Ask the user a question and wait for the answer. Use it only when you cannot go on without it."""
    if ctx.deps.ask is None:
        return "(no user can be asked here)"
    answer: str = await ctx.deps.ask(question)
    return answer


class LlmAgent(Agent):
    """A mesh agent whose handler is one pydantic-ai run per task."""

    #: The agent's task store (``store:``), set by its service: a PostgreSQL one holds the
    #: budgets and usage too, shared by the replicas, unless ``usage_store`` says otherwise.
    task_store: str = ""

    def __init__(
        self,
        *,
        llm: LlmConfig,
        model: Model | None = None,
        tools: Sequence[Callable[..., Any]] = (),
        source: Path | None = None,
        **card: Any,
    ) -> None:
        super().__init__(**card)
        self.llm = llm
        if not self.description:
            self.description = f"An LLM agent ({llm.model})"
        # Peers are found in the registry: start discovery with the agent.
        self.uses_discovery = bool(llm.peers)  # type: ignore[misc]
        toolsets: list[AbstractToolset[Any]] = [StaticTools([ask_user])]
        if tools:
            toolsets.append(StaticTools(tools, errors_to_model=True))
        reserved = [getattr(t, "__name__", "") for t in tools]
        toolsets.extend(build_toolsets(llm, agent_name=self.name, source=source, reserved=reserved))
        if llm.approve:
            toolsets = [guarded(t, llm, approval_label(t, llm)) for t in toolsets]
        base = model if model is not None else build_model(llm)
        # The client build_model made for a base_url is the agent's to close (with the agent).
        self._own_client: Any = getattr(base, "client", None) if model is None and llm.base_url else None
        output: Any = str
        if llm.output is not None:
            output = StructuredDict(llm.output, name="answer")
        if llm.approve:  # a run may end with calls waiting for approval instead of an answer
            output = [output, DeferredToolRequests]
        self._starting: asyncio.Task[None] | None = None
        self._entered = False
        self.engine: Engine[RunDeps, Any] = Engine(
            MeteredModel(RetryingModel(base, retries=llm.retries)),
            instructions=llm.instructions or None,
            deps_type=RunDeps,
            output_type=output,
            toolsets=[traced(t) for t in toolsets],
            name=self.name,
            retries=MAX_RETRIES,  # a malformed tool call or answer is sent back to the model twice
        )
        self._usage = UsageStores(llm.usage_store)

    async def setup(self) -> None:
        # The MCP servers start once, in the background: the agent joins the mesh at once, and a
        # task that comes first (or after a server failed to start) starts them itself.
        if self.llm.mcp_servers:
            self._starting = asyncio.get_running_loop().create_task(self._start_tools(), name=f"{self.name} tools")

    async def _start_tools(self) -> None:
        try:
            await self.engine.__aenter__()
        except Exception as exc:
            log.warning("agent %s: a tool server did not start (each task will try again): %s", self.name, exc)
            return
        self._entered = True

    async def teardown(self) -> None:
        starting, self._starting = self._starting, None
        if starting is not None and not starting.done():
            starting.cancel()
            await asyncio.wait({starting})
        if self._entered:
            self._entered = False
            try:
                await self.engine.__aexit__(None, None, None)
            except Exception as exc:
                log.warning("agent %s: stopping its tool servers failed: %s", self.name, exc)
        await asyncio.to_thread(self._usage.close)  # a shared store writes what waits first
        client, self._own_client = self._own_client, None
        if client is not None:
            await client.close()

    def _metrics(self, ctx: TaskContext) -> ComponentMetrics | None:
        """The agent's metrics in the namespace it serves (where its delegator is)."""
        delegator = ctx.delegator
        return METRICS.component(delegator.namespace, ctx.agent_name) if delegator is not None else None

    async def handle(self, message: Message, ctx: TaskContext) -> AsyncIterator[Update]:
        resume = None
        # A restarted agent: the answer to approvals the previous process asked for (journaled).
        pending = pending_in(ctx.history, ctx.task_id) if self.llm.approve else None
        incoming: Message | None = message  # the latest message: the task's, or an answer
        while True:
            if pending is not None:
                results = pending.answer(incoming)
                if results is None:  # some calls are not answered yet: ask for those again
                    incoming = yield pending.question(self.llm.approval_timeout_s)
                    continue
                resume = (pending, results)
            meter = Meter.of(self._usage.get(_namespace(ctx), self.task_store), self.llm, ctx)
            run = LlmRun(self.engine, self.llm, message, ctx, self._metrics(ctx), resume=resume, meter=meter)
            run.start()
            try:
                while True:
                    update = await run.next()
                    if isinstance(update, TaskFailed):
                        raise update
                    if isinstance(update, Pending):
                        pending = update
                        break
                    if isinstance(update, InputRequired):
                        reply = yield update
                        run.answer(reply)
                        continue
                    yield update
                    return
            finally:
                await run.close()
            incoming = yield pending.question(self.llm.approval_timeout_s)


def _namespace(ctx: TaskContext) -> str:
    """The namespace the agent serves (its usage store is that namespace's)."""
    delegator = ctx.delegator
    return delegator.namespace if delegator is not None else "mesh"
