"""mesh.telemetry: the histogram, tracing's switch and environment, and ``mesh run --metrics-port``."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client.parser import text_string_to_metric_families

from mesh.brokertools.localbroker import free_port
from mesh.client import MeshClient
from mesh.telemetry import MeshMetrics, tracing
from mesh.telemetry.exposition import MeshCollector
from mesh.telemetry.metrics import Histogram
from tests.mesh.cli_process import ROOT, start_mesh
from tests.support import answer_of


def test_a_histogram_counts_each_value_in_the_first_bucket_it_fits_and_cumulates() -> None:
    histogram = Histogram((0.1, 1.0))
    for seconds in (0.05, 0.1, 0.5, 1.0, 7.0):
        histogram.observe(seconds)
    assert list(histogram.cumulative()) == [(0.1, 2), (1.0, 4), (float("inf"), 5)]
    assert histogram.total == pytest.approx(8.65)


def test_the_collector_renders_families_prometheus_can_read() -> None:
    metrics = MeshMetrics()
    echo = metrics.component("acme", "echo")
    echo.task_ended("completed", 0.02)
    echo.task_ended("failed", 3.0)
    echo.refused("InvalidJSON")
    echo.watch(in_flight=lambda: 2, discovery_size=lambda: 4)
    families = {f.name: f for f in MeshCollector(metrics).collect()}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}
    assert samples[("mesh_tasks_total", (("agent", "echo"), ("namespace", "acme"), ("state", "failed")))] == 1
    assert samples[("mesh_task_duration_seconds_count", (("agent", "echo"), ("namespace", "acme")))] == 2
    assert samples[("mesh_tasks_in_flight", (("component", "echo"), ("namespace", "acme")))] == 2
    assert samples[("mesh_discovery_agents", (("component", "echo"), ("namespace", "acme")))] == 4
    reason = (("component", "echo"), ("namespace", "acme"), ("reason", "InvalidJSON"))
    assert samples[("mesh_bad_inputs_total", reason)] == 1
    echo.unwatch()  # a stopped component's gauges go, its counters stay
    names = {s.name for f in MeshCollector(metrics).collect() for s in f.samples}
    assert "mesh_tasks_in_flight" not in names and "mesh_tasks_total" in names


def test_a_span_passes_its_traceparent_on_and_a_child_continues_it() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.enable(provider)
    try:
        caller = tracing.start_span("message/send echo", "client")
        traceparent = tracing.traceparent_of(caller)
        assert traceparent is not None and traceparent.startswith("00-")
        callee = tracing.start_span("task echo", "server", traceparent=traceparent)
        tracing.end_span(callee, RuntimeError("boom"), **{"a2a.task.state": "failed"})
        tracing.end_span(caller)
    finally:
        tracing.disable()
    task, call = exporter.get_finished_spans()
    assert task.parent is not None and call.context is not None and task.context is not None
    assert (task.parent.span_id, task.context.trace_id) == (call.context.span_id, call.context.trace_id)
    assert not task.status.is_ok and task.attributes == {"a2a.task.state": "failed"}
    assert [e.name for e in task.events] == ["exception"]


def test_tracing_stays_off_without_an_otlp_endpoint_in_the_environment() -> None:
    assert tracing.enable_from_environment({"OTEL_SERVICE_NAME": "mesh"}) is False
    assert tracing.enable_from_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "", "OTEL_SDK_DISABLED": "true"}) is False
    assert not tracing.enabled


_WITHOUT_OPENTELEMETRY = """
import asyncio, sys
sys.modules["opentelemetry"] = None  # as if not installed: any import of it fails

from agents.builtin.echo import EchoAgent
from agents.service import AgentService
from agents.settings import AgentSettings
from mesh.client import MeshClient
from mesh.errors import ConfigError
from mesh.telemetry import tracing
from mesh.transport.memory import MemoryBroker, MemoryTransport
import gateways.http.app

async def main():
    hub = MemoryBroker()
    settings = AgentSettings(task_store=":memory:")
    agent = AgentService(EchoAgent(), namespace="ns", transport=MemoryTransport(hub), settings=settings)
    await agent.start()
    client = MeshClient(MemoryTransport(hub), "ns")
    await client.transport.connect()
    task = await client.send("echo", "hi", timeout=5)
    await agent.stop()
    try:
        tracing.enable_from_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    except ConfigError as exc:
        print(task.status.state.value, exc)

asyncio.run(main())
"""


def test_the_core_runs_without_opentelemetry_and_says_how_to_get_traces() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_OPENTELEMETRY], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("completed OTEL_EXPORTER_OTLP_ENDPOINT asks for traces, but OpenTelemetry is not")
    assert "pip install 'mqtt-agent-mesh[otel]'" in done.stdout


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value for f in text_string_to_metric_families(text) for s in f.samples
    }


async def test_mesh_run_serves_metrics_on_its_port_and_they_move_as_tasks_run(
    broker_url: str, namespace: str, tmp_path: Path
) -> None:
    config = tmp_path / "echo.yaml"
    config.write_text(
        textwrap.dedent(f"""
        namespace: {namespace}
        broker: {broker_url}
        agents:
          - class: agents.builtin.echo:EchoAgent
        """)
    )
    port = free_port()
    run = await start_mesh("run", str(config), "--metrics-port", str(port))
    try:
        await run.wait_for_line("running agent echo")
        completed = (
            "mesh_tasks_total",
            frozenset({"namespace": namespace, "agent": "echo", "state": "completed"}.items()),
        )
        refused = frozenset({"namespace": namespace, "component": "echo", "reason": "InvalidJSON"}.items())
        async with httpx.AsyncClient(timeout=10) as http, MeshClient.connect(broker_url, namespace) as client:
            before = _samples((await http.get(f"http://127.0.0.1:{port}/metrics")).text)
            for n in range(4):
                await client.send("echo", f"hi {n}", timeout=10)
            answer = await answer_of(client, b"{not json")
            assert answer["error"]["code"] == -32700, json.dumps(answer)
            response = await http.get(f"http://127.0.0.1:{port}/metrics")
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain; version=")
        after = _samples(response.text)
        assert after[completed] == before.get(completed, 0) + 4
        assert after[("mesh_bad_inputs_total", refused)] == before.get(("mesh_bad_inputs_total", refused), 0) + 1
        echo = frozenset({"namespace": namespace, "component": "echo"}.items())
        assert after[("mesh_tasks_in_flight", echo)] == 0
        assert ("process_cpu_seconds_total", frozenset()) in after  # prometheus_client's own process metrics
    finally:
        assert await run.stop() == 0, run.output
    assert any(f"metrics on http://0.0.0.0:{port}/metrics" in line for line in run.stderr_lines)


async def test_mesh_run_says_so_when_the_metrics_port_is_taken(broker_url: str, namespace: str, tmp_path: Path) -> None:
    config = tmp_path / "echo.yaml"
    config.write_text(
        f"namespace: {namespace}\nbroker: {broker_url}\nagents:\n  - class: agents.builtin.echo:EchoAgent\n"
    )
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        run = await start_mesh("run", str(config), "--metrics-port", str(port))
        code = await asyncio.wait_for(run.proc.wait(), 30)
        await asyncio.gather(*run._readers)
    assert code != 0
    assert f"cannot serve metrics on 0.0.0.0:{port}" in run.output and "--metrics-port" in run.output
    assert "Traceback" not in run.output


def test_an_otlp_endpoint_in_the_environment_makes_an_sdk_provider_named_after_the_service() -> None:
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider

    from mesh.telemetry import otel

    provider = otel.from_environment({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_SERVICE_NAME": "edge"})
    assert isinstance(provider, SdkTracerProvider)
    try:
        assert provider.resource.attributes["service.name"] == "edge"
    finally:
        provider.shutdown()
    defaulted = otel.from_environment({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"})
    assert isinstance(defaulted, SdkTracerProvider)
    try:
        assert defaulted.resource.attributes["service.name"] == "mesh"
        exporter = defaulted._active_span_processor._span_processors[0].span_exporter  # type: ignore[attr-defined]
        assert exporter._endpoint == "http://127.0.0.1:9/v1/traces"
    finally:
        defaulted.shutdown()
