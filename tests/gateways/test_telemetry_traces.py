"""Traces: one request through the gateway, the orchestrator and two peers is one trace.

The spans are collected by the OpenTelemetry SDK's in-memory exporter; the agents and the gateway
run in this process on the session broker, so the trace crosses MQTT only through ``traceparent``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from agents.builtin.calculator import CalculatorAgent
from agents.builtin.echo import EchoAgent
from agents.builtin.orchestrator import OrchestratorAgent
from mesh.telemetry import tracing
from tests.conftest import ServeAgent
from tests.gateways.conftest import StartGateway
from tests.gateways.jsonrpc_http import message, rpc


class Spans:
    """The spans ended so far, and a way to wait for some."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def described(self) -> list[tuple[str, str]]:
        return [(s.name, s.kind.name) for s in self.ended]

    @property
    def ended(self) -> tuple[ReadableSpan, ...]:
        return self.exporter.get_finished_spans()

    async def wait_for(self, count: int, timeout: float = 5.0) -> tuple[ReadableSpan, ...]:
        # The agents end their task spans just after their answers leave: poll briefly for them.
        try:
            async with asyncio.timeout(timeout):
                while len(self.ended) < count:
                    await asyncio.sleep(0.01)
        except TimeoutError:
            raise AssertionError(f"{len(self.ended)} span(s), not {count}: {self.described()}") from None
        return self.ended


@pytest.fixture
def spans() -> Iterator[Spans]:
    """Tracing on (before anything starts: the gateway adds its HTTP span when built) and off after."""
    collected = Spans()
    tracing.enable(collected.provider)
    try:
        yield collected
    finally:
        tracing.disable()
        collected.provider.shutdown()


def one(spans: tuple[ReadableSpan, ...], kind: SpanKind, name: str) -> ReadableSpan:
    found = [s for s in spans if s.kind == kind and s.name == name]
    assert len(found) == 1, f"{len(found)} {kind.name} span(s) named {name!r} in {[(s.name, s.kind) for s in spans]}"
    return found[0]


def is_child(child: ReadableSpan, parent: ReadableSpan) -> bool:
    assert child.parent is not None and parent.context is not None and child.context is not None
    return child.parent.span_id == parent.context.span_id and child.context.trace_id == parent.context.trace_id


async def serve_orchestration(serve_agent: ServeAgent, start_gateway: StartGateway) -> str:
    await serve_agent(EchoAgent())
    await serve_agent(CalculatorAgent())
    orchestrator = await serve_agent(OrchestratorAgent())
    for peer in ("echo", "calculator"):
        await orchestrator.registry.wait_for(peer, 5)
    gateway = await start_gateway(wait_for=("orchestrator",))
    return gateway.public_url


async def test_a_request_through_the_gateway_orchestrator_echo_and_calculator_is_one_trace(
    spans: Spans, serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    url = await serve_orchestration(serve_agent, start_gateway)
    body = rpc("message/send", {"message": message("echo hi and 2+2")})
    response = await http.post(f"{url}/a2a/agents/orchestrator", json=body)
    task = response.json()["result"]
    assert task["status"]["state"] == "completed", task

    ended = await spans.wait_for(7)
    request = one(ended, SpanKind.SERVER, "POST /a2a/agents/{name}")
    to_orchestrator = one(ended, SpanKind.CLIENT, "message/send orchestrator")
    orchestrator = one(ended, SpanKind.SERVER, "task orchestrator")
    assert request.parent is None  # the client sent no traceparent: the trace starts at the gateway
    assert is_child(to_orchestrator, request)
    assert is_child(orchestrator, to_orchestrator)
    for peer in ("echo", "calculator"):
        [to_peer] = [s for s in ended if s.kind == SpanKind.CLIENT and _agent(s) == peer]
        peer_task = one(ended, SpanKind.SERVER, f"task {peer}")
        assert is_child(to_peer, orchestrator), f"the delegation to {peer} is not the orchestrator task's child"
        assert is_child(peer_task, to_peer)
        assert peer_task.attributes is not None and peer_task.attributes["a2a.task.state"] == "completed"
    assert len(ended) == 7, [(s.name, s.kind.name) for s in ended]
    assert {s.context.trace_id for s in ended if s.context is not None} == {request.context.trace_id}  # type: ignore[union-attr]
    assert request.attributes is not None and request.attributes["http.response.status_code"] == 200
    assert [s.name for s in ended if not s.status.is_unset] == []  # nothing failed


def _agent(span: ReadableSpan) -> object:
    return (span.attributes or {}).get("a2a.agent")


async def test_a_traceparent_header_from_the_http_client_is_continued(
    spans: Spans, serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(EchoAgent())
    gateway = await start_gateway(default_agent="echo")
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    response = await http.post(
        f"{gateway.public_url}/a2a",
        json=rpc("message/send", {"message": message("hi")}),
        headers={"traceparent": f"00-{trace_id}-{parent_id}-01"},
    )
    assert response.json()["result"]["status"]["state"] == "completed"
    ended = await spans.wait_for(3)
    request = one(ended, SpanKind.SERVER, "POST /a2a")
    assert request.parent is not None and format(request.parent.span_id, "016x") == parent_id
    assert {format(s.context.trace_id, "032x") for s in ended if s.context is not None} == {trace_id}
    assert is_child(one(ended, SpanKind.SERVER, "task echo"), one(ended, SpanKind.CLIENT, "message/send echo"))


async def test_with_tracing_off_no_span_is_made_and_no_traceparent_sent(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    collected = Spans()  # a provider nobody enabled
    seen: list[str | None] = []
    echo = await serve_agent(EchoAgent())
    dispatch = echo.dispatcher.on_request
    # The dispatcher is what the request topic calls: note each request's traceparent.
    echo.dispatcher.on_request = lambda m: (seen.append(m.properties.traceparent), dispatch(m))[-1]  # type: ignore[method-assign]
    gateway = await start_gateway(default_agent="echo")
    assert not tracing.enabled
    response = await http.post(f"{gateway.public_url}/a2a", json=rpc("message/send", {"message": message("hi")}))
    assert response.json()["result"]["status"]["state"] == "completed"
    assert collected.ended == ()
    assert seen == [None]
