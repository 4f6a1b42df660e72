"""One task's run of an LLM agent: the pydantic-ai run beside the handler, and what it emits.

The pydantic-ai run goes on in an asyncio task of its own, so the handler (an async
generator) can wait for it, hand a question of ``ask_user`` to the client (``input-required``)
and pass the answer back into the same run. Meanwhile the run's events become status updates
(:meth:`~agents.context.TaskContext.emit`): the model's text, coalesced to at most ~20 events
a second (only while someone follows the task live: a stream, a status topic, a push
subscriber; the answer holds the whole text), and each tool call and result as the seed's DataParts
``{"type": "tool_call" | "tool_result", ...}`` with ``tool_call_id`` in the part's metadata.
Every status message carries ``llmEvent`` in its metadata, so a later turn leaves them out
of the conversation it rebuilds from the context's history.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterable, Callable
from typing import TYPE_CHECKING, Any

from pydantic_ai import Agent as Engine
from pydantic_ai import DeferredToolRequests, DeferredToolResults
from pydantic_ai import messages as pm
from pydantic_ai.usage import RunUsage, UsageLimits

from agents.llm.approvals import Pending, is_approval_answer
from agents.llm.budgets import CURRENT_METER, Meter
from agents.llm.config import LlmConfig
from agents.llm.model import explain
from agents.llm.tools import RunDeps
from agents.updates import InputRequired, Reply, Status, TaskFailed, Update
from mesh.a2a import DataPart, Message, Role, TextPart, get_text_from_message

if TYPE_CHECKING:
    from pydantic_ai.run import AgentRun

    from agents.context import TaskContext
    from mesh.telemetry import ComponentMetrics

__all__ = ["COALESCE_S", "LlmRun", "model_history", "usage_metadata"]

#: The shortest gap between two streamed text events: at most ~22 a second.
COALESCE_S = 0.045
#: Bytes of a tool's arguments or result shown in its status update (the model gets all of it).
_SHOWN_BYTES = 16_000
_EVENT_KEY = "llmEvent"


class LlmRun:
    """The run of one task; :meth:`next` gives the handler what to yield next."""

    def __init__(
        self,
        engine: Engine[RunDeps, Any],
        config: LlmConfig,
        message: Message,
        ctx: TaskContext,
        metrics: ComponentMetrics | None = None,
        resume: tuple[Pending, DeferredToolResults] | None = None,
        meter: Meter | None = None,
    ) -> None:
        self.engine = engine
        self.config = config
        self.ctx = ctx
        self.metrics = metrics
        #: The run that waited for approvals and their answers: this run goes on from there.
        self.resume = resume
        self.meter = meter
        self.prompt = get_text_from_message(message) or json.dumps([p.model_dump(mode="json") for p in message.parts])
        self.outbox: asyncio.Queue[Update | TaskFailed | Pending] = asyncio.Queue()
        self.answers: asyncio.Queue[str] = asyncio.Queue()
        self.text = _Coalescer(self._emit_text)
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._main(), name=f"llm {self.ctx.task_id}")

    async def next(self) -> Update | TaskFailed | Pending:
        return await self.outbox.get()

    def answer(self, reply: Message | None) -> None:
        """The client's reply to the question ``ask_user`` asked."""
        self.answers.put_nowait(get_text_from_message(reply) if reply is not None else "")

    async def close(self) -> None:
        """Stop the run (canceling the model request and the peer calls it waits on)."""
        task, self.task = self.task, None
        if task is not None and not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=5.0)
        self.text.close()

    # ------------------------------------------------------------------ the run

    async def _main(self) -> None:
        config = self.config
        CURRENT_METER.set(self.meter)  # this task's context (its own copy): the model wrapper reads it
        deps = RunDeps(task=self.ctx, ask=self._ask)
        limits = UsageLimits(
            request_limit=config.max_model_calls,
            tool_calls_limit=config.max_tool_calls,
            total_tokens_limit=config.max_tokens,
        )
        counted: AgentRun[RunDeps, Any] | None = None
        prompt: str | None = self.prompt
        history = model_history(self.ctx.history)
        results = before = None
        if self.resume is not None:  # the approvals' answers: the same run goes on (its usage too)
            pending, results = self.resume
            prompt, history, before = None, pending.messages, pending.usage
        spent = before or RunUsage()
        try:
            async with self.engine.iter(
                prompt,
                message_history=history,
                deferred_tool_results=results,
                usage=dataclasses.replace(before) if before is not None else None,
                deps=deps,
                usage_limits=limits,
                model_settings=dict(config.settings) or None,  # type: ignore[arg-type]
            ) as run:
                counted = run  # its usage is counted however the run ends (the tokens were spent)
                async for node in run:
                    # Streaming a model request shows its text as it comes; without streaming the
                    # request is one plain call (for servers that do not stream).
                    if Engine.is_model_request_node(node) and config.stream:
                        async with node.stream(run.ctx) as stream:
                            await self._on_events(stream)
                    elif Engine.is_call_tools_node(node):
                        async with node.stream(run.ctx) as events:
                            await self._on_events(events)
            result = run.result
            if result is None:  # the run ended without an answer (the engine says why when it raises)
                raise RuntimeError("the model run ended without an answer")
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # every failure ends the task with a message, none with a traceback
            self.text.flush()
            self.outbox.put_nowait(TaskFailed(explain(exc, config)))
            return
        finally:
            if counted is not None and self.metrics is not None:
                usage = counted.usage
                self.metrics.llm_used(
                    config.model,
                    model_calls=usage.requests - spent.requests,
                    tool_calls=usage.tool_calls - spent.tool_calls,
                    input_tokens=usage.input_tokens - spent.input_tokens,
                    output_tokens=usage.output_tokens - spent.output_tokens,
                    user=self.meter.user if self.meter is not None else None,
                    cost_usd=float((usage.cost or 0) - (spent.cost or 0)),
                )
        self.text.flush()
        if isinstance(result.output, DeferredToolRequests):  # calls a person approves first
            self.outbox.put_nowait(Pending.of(result.output, result.all_messages(), result.usage))
            return
        meta = {"llm": usage_metadata(config.model, result.usage)}
        output = result.output
        if config.output is not None and not isinstance(output, str):
            data = {"type": "structured_output", "content": output}
            self.outbox.put_nowait(Reply(parts=[DataPart(data=data)], metadata=meta))
        else:
            self.outbox.put_nowait(Reply(str(output), metadata=meta))

    async def _ask(self, question: str) -> str:
        self.text.flush()
        self.outbox.put_nowait(InputRequired(question))
        return await self.answers.get()

    async def _on_events(self, events: AsyncIterable[Any]) -> None:
        async for event in events:
            if isinstance(event, pm.PartDeltaEvent) and isinstance(event.delta, pm.TextPartDelta):
                self.text.add(event.delta.content_delta)
            elif isinstance(event, pm.PartStartEvent) and isinstance(event.part, pm.TextPart):
                if event.part.content:
                    self.text.add(event.part.content)
            elif isinstance(event, pm.FunctionToolCallEvent):
                self._tool_call(event.part)
            elif isinstance(event, pm.FunctionToolResultEvent):
                self._tool_result(event)

    def _tool_call(self, part: pm.ToolCallPart) -> None:
        self.text.flush()  # the text before the call is seen before it
        if part.tool_name == "ask_user":
            return  # the question itself is the input-required status
        try:
            arguments: Any = part.args_as_dict()
        except Exception:  # malformed JSON from the model: shown as it came, retried by the engine
            arguments = {"raw": str(part.args)[:_SHOWN_BYTES]}
        data = {"type": "tool_call", "function_name": part.tool_name, "arguments": _bounded(arguments)}
        self._emit_part(data, part.tool_call_id, "tool_call")

    def _tool_result(self, event: pm.FunctionToolResultEvent) -> None:
        result = event.part
        name = getattr(result, "tool_name", None)
        call_id = getattr(result, "tool_call_id", "")
        if name == "ask_user":
            return
        content = getattr(result, "content", None)
        failed = getattr(result, "outcome", "success") not in ("success", None)
        data: dict[str, Any] = {"type": "tool_result", "function_name": name, "result": _bounded(_jsonable(content))}
        if failed:
            data["is_error"] = True
        self._emit_part(data, call_id, "tool_result")

    def _emit_part(self, data: dict[str, Any], call_id: str, kind: str) -> None:
        part = DataPart(data=data, metadata={"tool_call_id": call_id})
        self._emit(Status(parts=[part], metadata={_EVENT_KEY: kind}))

    def _emit_text(self, update: Status) -> None:
        # Text chunks only for those who follow the task live: the answer holds the whole text,
        # and a later turn leaves the chunks out of the conversation anyway.
        if self.ctx.watched():
            self._emit(update)

    def _emit(self, update: Status) -> None:
        if self.ctx.emit is not None:
            self.ctx.emit(update)


class _Coalescer:
    """Gathers streamed text; sends it at once, then at most every :data:`COALESCE_S`."""

    def __init__(self, emit: Callable[[Status], None], interval_s: float = COALESCE_S) -> None:
        self.emit = emit
        self.interval_s = interval_s
        self.buffer: list[str] = []
        self.sent_at = 0.0
        self.timer: asyncio.TimerHandle | None = None

    def add(self, text: str) -> None:
        if not text:
            return
        self.buffer.append(text)
        wait = self.sent_at + self.interval_s - time.monotonic()
        if wait <= 0:
            self.flush()
        elif self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(wait, self.flush)

    def flush(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        if self.buffer:
            text, self.buffer = "".join(self.buffer), []
            self.sent_at = time.monotonic()
            self.emit(Status(text=text, metadata={_EVENT_KEY: "text"}))

    def close(self) -> None:
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.buffer = []


def usage_metadata(model: str, usage: RunUsage) -> dict[str, Any]:
    """The answer's ``metadata.llm``: the task's model calls, tokens and (where priced) cost in USD."""
    meta: dict[str, Any] = {
        "model": model,
        "modelCalls": usage.requests,
        "toolCalls": usage.tool_calls,
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "cacheReadTokens": usage.cache_read_tokens,
        "cacheWriteTokens": usage.cache_write_tokens,
    }
    if usage.cost is not None:
        meta["costUsd"] = float(usage.cost)
    return meta


def model_history(history: list[Message]) -> list[pm.ModelMessage]:
    """The context's earlier turns as the model's messages: user text and the agent's answers
    (its streamed chunks and tool events left out; the final answer holds the text)."""
    out: list[pm.ModelMessage] = []
    for message in history:
        if (message.metadata or {}).get(_EVENT_KEY) or is_approval_answer(message):
            continue  # the run's events, approvals and their answers: the final answer holds the outcome
        text = "\n".join(_part_text(p) for p in message.parts).strip()
        if not text:
            continue
        if message.role is Role.user:
            out.append(pm.ModelRequest(parts=[pm.UserPromptPart(content=text)]))
        else:
            out.append(pm.ModelResponse(parts=[pm.TextPart(content=text)]))
    return out


def _part_text(part: Any) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, DataPart):
        return json.dumps(part.data, default=str)[:_SHOWN_BYTES]
    return ""


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


def _bounded(value: Any) -> Any:
    text = json.dumps(value, default=str)
    if len(text) <= _SHOWN_BYTES:
        return value
    return {"truncated": text[:_SHOWN_BYTES]}
