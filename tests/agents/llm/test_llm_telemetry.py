"""An LLM agent's usage in the Prometheus metrics, and its model and tool calls in the task's trace,
on the real broker with a scripted model."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from prometheus_client.parser import text_string_to_metric_families
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agents.builtin.echo import EchoAgent
from agents.testing import llm_agent
from mesh.a2a import Task, TaskState
from mesh.client import MeshClient
from mesh.telemetry import tracing
from mesh.telemetry.exposition import render
from tests.agents.llm.scripts import Chunk, call, tool_returns
from tests.conftest import ServeAgent

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape() -> Samples:
    """The process's /metrics text, parsed as Prometheus would."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(render().decode())
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def echo_then_answer() -> FunctionModel:
    """Each run: a call of the echo tool, then an answer with what it returned."""

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[Chunk]:
        returned = tool_returns(messages)
        if returned:
            yield f"echo: {returned[0].content}"
        else:
            yield call("echo", {"message": "hi"})

    return FunctionModel(stream_function=stream)


async def test_model_calls_tool_calls_and_tokens_are_counted_by_agent_and_model(
    serve_agent: ServeAgent, client: MeshClient, namespace: str
) -> None:
    await serve_agent(EchoAgent())
    await serve_agent(llm_agent({"model": "test:scripted", "peers": ["echo"]}, echo_then_answer()))
    # A second agent with another model: its counts are its own.
    await serve_agent(llm_agent({"model": "test:other", "max_model_calls": 1}, echo_then_answer(), name="limited"))
    labels = {"namespace": namespace, "agent": "assistant", "model": "test:scripted"}

    tasks = [await client.send("assistant", "ask echo") for _ in range(2)]
    samples = scrape()

    metas = []
    for task in tasks:
        assert isinstance(task, Task) and task.status.state is TaskState.completed
        assert task.status.message is not None and task.status.message.metadata is not None
        metas.append(task.status.message.metadata["llm"])
    assert value(samples, "mesh_llm_model_calls_total", **labels) == 4 == sum(m["modelCalls"] for m in metas)
    assert value(samples, "mesh_llm_tool_calls_total", **labels) == 2 == sum(m["toolCalls"] for m in metas)
    tokens_in = value(samples, "mesh_llm_tokens_total", **labels, kind="input")
    tokens_out = value(samples, "mesh_llm_tokens_total", **labels, kind="output")
    assert tokens_in == sum(m["inputTokens"] for m in metas) > 0
    assert tokens_out == sum(m["outputTokens"] for m in metas) > 0
    # By user too (here the proven caller, the test's client): the same tokens.
    by_user = {
        dict(labels_)["user"]: count
        for (name, labels_), count in samples.items()
        if name == "mesh_llm_user_tokens_total"
        and {("namespace", namespace), ("agent", "assistant"), ("kind", "input")} <= labels_
    }
    assert sum(by_user.values()) == tokens_in and "unknown" not in by_user, by_user
    assert value(samples, "mesh_llm_model_calls_total", namespace=namespace, agent="limited", model="test:other") == 0

    # A run that fails (here: at its model-call limit) still counts the requests it made.
    failed = await client.send("limited", "ask echo")
    assert isinstance(failed, Task) and failed.status.state is TaskState.failed
    limited = {"namespace": namespace, "agent": "limited", "model": "test:other"}
    assert value(scrape(), "mesh_llm_model_calls_total", **limited) == 1
    assert value(scrape(), "mesh_llm_model_calls_total", **labels) == 4  # the other agent's stayed


class Spans:
    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    async def wait_for(self, name: str, timeout: float = 5.0) -> tuple[ReadableSpan, ...]:
        # A task's span ends just after its answer left: wait for it, polling briefly.
        async with asyncio.timeout(timeout):
            while not any(s.name == name for s in self.exporter.get_finished_spans()):
                await asyncio.sleep(0.01)
        return self.exporter.get_finished_spans()


@pytest.fixture
def spans() -> Iterator[Spans]:
    collected = Spans()
    tracing.enable(collected.provider)
    try:
        yield collected
    finally:
        tracing.disable()
        collected.provider.shutdown()


def one(spans: tuple[ReadableSpan, ...], name: str, kind: SpanKind | None = None) -> ReadableSpan:
    found = [s for s in spans if s.name == name and (kind is None or s.kind == kind)]
    assert len(found) == 1, f"{len(found)} span(s) named {name!r} in {[s.name for s in spans]}"
    return found[0]


def parent_of(child: ReadableSpan, spans: tuple[ReadableSpan, ...]) -> ReadableSpan:
    assert child.parent is not None and child.context is not None
    [parent] = [s for s in spans if s.context is not None and s.context.span_id == child.parent.span_id]
    assert parent.context is not None and parent.context.trace_id == child.context.trace_id
    return parent


async def test_each_model_call_and_tool_call_is_a_span_of_the_task_trace(
    spans: Spans, serve_agent: ServeAgent, client: MeshClient
) -> None:
    await serve_agent(EchoAgent())
    await serve_agent(llm_agent({"model": "test", "peers": ["echo"]}, echo_then_answer()))
    task = await client.send("assistant", "ask echo")
    assert isinstance(task, Task) and task.status.state is TaskState.completed
    ended = await spans.wait_for("task assistant")

    request = one(ended, "message/send assistant", SpanKind.CLIENT)
    run = one(ended, "task assistant", SpanKind.SERVER)
    assert parent_of(run, ended) is request
    models = [s for s in ended if s.name.startswith("llm ")]
    assert len(models) == 2 and all(parent_of(m, ended) is run for m in models)
    assert all((m.attributes or {}).get("gen_ai.usage.output_tokens", 0) > 0 for m in models)
    tool = one(ended, "tool echo")
    assert parent_of(tool, ended) is run and (tool.attributes or {})["gen_ai.tool.call.id"] == "c1"
    # The peer tool's delegation is the tool's child, and the peer's task continues it.
    delegation = one(ended, "message/send echo", SpanKind.CLIENT)
    assert parent_of(delegation, ended) is tool
    assert parent_of(one(ended, "task echo", SpanKind.SERVER), ended) is delegation
    assert run.start_time is not None and tool.start_time is not None and tool.start_time > run.start_time
