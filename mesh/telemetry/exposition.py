"""The Prometheus text format of :data:`mesh.telemetry.metrics.METRICS` (with prometheus_client).

The families, labelled by ``namespace`` and the component (an agent's or gateway's name):

=========================================  =========  ==============================================
``mesh_tasks_total``                        counter    tasks that reached a final state, by ``state``
``mesh_task_duration_seconds``              histogram  accepting a task to its final state
``mesh_tasks_in_flight``                    gauge      an agent's handlers running now, a gateway's
                                                       calls waiting for their answer
``mesh_call_round_trip_seconds``            histogram  a request sent to its final answer, by callee
                                                       ``agent`` and ``method``
``mesh_queue_depth``                        gauge      publishes waiting for the broker's PUBACK
``mesh_reconnects_total``                   counter    connections to the broker after the first
``mesh_cards_healed_total``                 counter    card republished: something else replaced or cleared it
``mesh_bad_inputs_total``                   counter    requests refused, by ``reason``
``mesh_tasks_taken_over_total``             counter    a dead replica's running tasks taken over, by
                                                       ``outcome`` (failed, resumed, running)
``mesh_discovery_agents``                   gauge      agents in the component's registry
``mesh_llm_model_calls_total``              counter    an LLM agent's model requests, by ``model``
``mesh_llm_tool_calls_total``               counter    the tool calls its models made, by ``model``
``mesh_llm_tokens_total``                   counter    tokens, by ``model`` and ``kind`` (input, output)
``mesh_llm_cost_usd_total``                 counter    the cost in USD genai-prices gives, by ``model``
``mesh_llm_user_tokens_total``              counter    tokens, by ``user`` (at most 100) and ``kind``
=========================================  =========  ==============================================

:func:`render` gives the text for the gateway's ``/metrics``; :func:`serve_metrics` serves it
on a port of its own (``mesh run --metrics-port``), on the event loop, as the counts are.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from mesh.errors import ConfigError
from mesh.telemetry.metrics import METRICS, Gauge, Histogram, MeshMetrics

__all__ = ["CONTENT_TYPE", "MeshCollector", "render", "serve_metrics"]

log = logging.getLogger(__name__)

CONTENT_TYPE = CONTENT_TYPE_LATEST
_NAMES = ["namespace", "component"]


class MeshCollector(Collector):
    """The families of one :class:`MeshMetrics`, built at each scrape."""

    def __init__(self, metrics: MeshMetrics = METRICS) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        tasks = CounterMetricFamily(
            "mesh_tasks", "Tasks that reached a final state", labels=["namespace", "agent", "state"]
        )
        durations = HistogramMetricFamily(
            "mesh_task_duration_seconds", "From accepting a task to its final state", labels=["namespace", "agent"]
        )
        in_flight = GaugeMetricFamily(
            "mesh_tasks_in_flight", "An agent's running handlers, a gateway's calls waiting for answers", labels=_NAMES
        )
        round_trips = HistogramMetricFamily(
            "mesh_call_round_trip_seconds",
            "From sending a request to its final answer",
            labels=["namespace", "component", "agent", "method"],
        )
        queue = GaugeMetricFamily("mesh_queue_depth", "Publishes the broker has not acknowledged", labels=_NAMES)
        reconnects = CounterMetricFamily("mesh_reconnects", "Connections to the broker after the first", labels=_NAMES)
        healed = CounterMetricFamily(
            "mesh_cards_healed", "Card republished after something else replaced or cleared it", labels=_NAMES
        )
        refused = CounterMetricFamily(
            "mesh_bad_inputs", "Requests refused, by reason", labels=["namespace", "component", "reason"]
        )
        taken_over = CounterMetricFamily(
            "mesh_tasks_taken_over",
            "A dead replica's running tasks taken over, by outcome",
            labels=["namespace", "agent", "outcome"],
        )
        discovery = GaugeMetricFamily("mesh_discovery_agents", "Agents in the component's registry", labels=_NAMES)
        llm_labels = ["namespace", "agent", "model"]
        model_calls = CounterMetricFamily("mesh_llm_model_calls", "An LLM agent's model requests", labels=llm_labels)
        tool_calls = CounterMetricFamily(
            "mesh_llm_tool_calls", "Tool calls an LLM agent's model made", labels=llm_labels
        )
        tokens = CounterMetricFamily(
            "mesh_llm_tokens", "Tokens of an LLM agent's model requests", labels=[*llm_labels, "kind"]
        )
        cost = CounterMetricFamily("mesh_llm_cost_usd", "The cost in USD of an LLM agent's requests", labels=llm_labels)
        user_tokens = CounterMetricFamily(
            "mesh_llm_user_tokens",
            "Tokens of an LLM agent's requests by user",
            labels=["namespace", "agent", "user", "kind"],
        )
        for c in self.metrics.components():
            ns, name = c.namespace, c.name
            for state, count in list(c.ended.items()):
                tasks.add_metric([ns, name, state], count)
            if c.ended:
                _add_histogram(durations, [ns, name], c.duration)
            for (agent, method), histogram in list(c.round_trips.items()):
                _add_histogram(round_trips, [ns, name, agent, method], histogram)
            reconnects.add_metric([ns, name], c.reconnects)
            healed.add_metric([ns, name], c.cards_healed)
            for reason, count in list(c.refusals.items()):
                refused.add_metric([ns, name, reason], count)
            for outcome, count in list(c.taken_over.items()):
                taken_over.add_metric([ns, name, outcome], count)
            _add_gauge(in_flight, [ns, name], c.in_flight)
            _add_gauge(queue, [ns, name], c.queue_depth)
            _add_gauge(discovery, [ns, name], c.discovery_size)
            for model, usage in list(c.llm.items()):
                model_calls.add_metric([ns, name, model], usage.model_calls)
                tool_calls.add_metric([ns, name, model], usage.tool_calls)
                tokens.add_metric([ns, name, model, "input"], usage.input_tokens)
                tokens.add_metric([ns, name, model, "output"], usage.output_tokens)
                if usage.cost_usd:
                    cost.add_metric([ns, name, model], usage.cost_usd)
            for (user, kind), count in list(c.llm_users.items()):
                user_tokens.add_metric([ns, name, user, kind], count)
        yield from (tasks, durations, in_flight, round_trips, queue, reconnects, healed, refused, discovery)
        yield from (model_calls, tool_calls, tokens, cost, user_tokens, taken_over)


def _add_histogram(family: HistogramMetricFamily, labels: list[str], histogram: Histogram) -> None:
    buckets = [(_le(bound), float(count)) for bound, count in histogram.cumulative()]
    family.add_metric(labels, buckets, histogram.total)


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


def _add_gauge(family: GaugeMetricFamily, labels: list[str], gauge: Gauge | None) -> None:
    if gauge is None:
        return
    try:
        family.add_metric(labels, gauge())
    except Exception as exc:  # a scrape must not fail because one component is half stopped
        log.debug("gauge %s %s failed: %s", family.name, labels, exc)


_registered: CollectorRegistry | None = None


def _registry() -> CollectorRegistry:
    """prometheus_client's default registry (the process and platform collectors) with ours."""
    global _registered
    if _registered is None:
        REGISTRY.register(MeshCollector())
        _registered = REGISTRY
    return _registered


def render() -> bytes:
    """The process's metrics in the Prometheus text format (:data:`CONTENT_TYPE`)."""
    return generate_latest(_registry())


@contextlib.asynccontextmanager
async def serve_metrics(
    port: int,
    host: str = "0.0.0.0",  # noqa: S104 - scraped from other hosts; the port is opt-in (--metrics-port)
) -> AsyncIterator[asyncio.Server]:
    """``GET /metrics`` (any path, in fact) on ``host:port`` while the block runs."""
    try:
        server = await asyncio.start_server(_answer, host, port)
    except OSError as exc:
        raise ConfigError(
            f"cannot serve metrics on {host}:{port}: {exc.strerror or exc}; pick a free port with --metrics-port"
        ) from None
    log.info("metrics on http://%s:%d/metrics", host, server.sockets[0].getsockname()[1])
    try:
        yield server
    finally:
        server.close()
        await server.wait_closed()


async def _answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        async with asyncio.timeout(10):
            request = await reader.readuntil(b"\r\n\r\n")
        if request.startswith(b"GET "):
            body, status, kind = render(), "200 OK", CONTENT_TYPE
        else:
            body, status, kind = b"only GET /metrics is served here\n", "405 Method Not Allowed", "text/plain"
        head = f"HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        writer.write(head.encode() + body)
        await writer.drain()
    except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        pass  # the scraper went away or sent nonsense: nothing to answer
    finally:
        writer.close()
