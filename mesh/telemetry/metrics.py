"""Metrics: what each component of this process counts, kept cheap for the hot path.

Counting is always on: an increment is a dict update and a histogram observation one bisect,
with no lock (every count happens on the event loop's thread, as do the scrapes). The values
become Prometheus families only when scraped (:mod:`mesh.telemetry.exposition`); gauges are
read then, from callbacks, and cost nothing in between.

One :class:`ComponentMetrics` per (namespace, component name), kept for the process's life so
that counters only ever grow (a component started again continues its own)::

    metrics = METRICS.component("acme", "echo")
    metrics.task_ended("completed", 0.012)
    metrics.refused("JSONParseError")
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mesh.transport import Transport

__all__ = ["DURATION_BUCKETS", "LLM_MODELS_KEPT", "METRICS", "ComponentMetrics", "Histogram", "LlmUsage", "MeshMetrics"]

#: Upper bounds (seconds) of the task duration and round-trip histograms.
DURATION_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

#: Models an agent's LLM counts are kept for, by name; later ones count as ``other`` (labels stay few).
LLM_MODELS_KEPT = 8
#: Users whose LLM tokens are counted apart (a label each); the others count as ``other``.
LLM_USERS_KEPT = 100

Gauge = Callable[[], float]


class Histogram:
    """Counts per bucket (the last one: above every bound) and the sum of what was observed."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...] = DURATION_BUCKETS) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1  # bucket i: value <= bounds[i]
        self.total += value

    def cumulative(self) -> Iterator[tuple[float, int]]:
        """(upper bound, observations at or below it), ending with (inf, all of them)."""
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            yield bound, running


class LlmUsage:
    """What an LLM agent's runs of one model used: model requests, tool calls and tokens."""

    __slots__ = ("cost_usd", "input_tokens", "model_calls", "output_tokens", "tool_calls")

    def __init__(self) -> None:
        self.model_calls = 0
        self.tool_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost_usd = 0.0


class ComponentMetrics:
    """The counts of one agent or gateway, and the gauges it reports while it runs."""

    __slots__ = (
        "cards_healed",
        "discovery_size",
        "duration",
        "ended",
        "in_flight",
        "llm",
        "llm_users",
        "name",
        "namespace",
        "queue_depth",
        "reconnects",
        "refusals",
        "round_trips",
        "taken_over",
    )

    def __init__(self, namespace: str, name: str) -> None:
        self.namespace = namespace
        self.name = name
        #: Tasks that reached a final state, by state.
        self.ended: dict[str, int] = {}
        #: From accepting a task to its final state.
        self.duration = Histogram()
        #: Requests refused, by reason (the JSON-RPC error's type).
        self.refusals: dict[str, int] = {}
        self.reconnects = 0
        #: Its card republished because something else replaced or cleared it (mesh.discovery.presence).
        self.cards_healed = 0
        #: From sending a request to its final answer, by (callee, method).
        self.round_trips: dict[tuple[str, str], Histogram] = {}
        #: An LLM agent's usage, by model (at most :data:`LLM_MODELS_KEPT`, then ``other``).
        self.llm: dict[str, LlmUsage] = {}
        #: Its tokens by (user, kind): at most :data:`LLM_USERS_KEPT` users, then ``other``.
        self.llm_users: dict[tuple[str, str], int] = {}
        #: Running tasks of a dead replica this one took over (a shared store), by outcome.
        self.taken_over: dict[str, int] = {}
        self.in_flight: Gauge | None = None
        self.queue_depth: Gauge | None = None
        self.discovery_size: Gauge | None = None

    def task_ended(self, state: str, seconds: float) -> None:
        self.ended[state] = self.ended.get(state, 0) + 1
        self.duration.observe(seconds)

    def took_over(self, outcome: str, count: int = 1) -> None:
        """Tasks of a dead replica taken over: ``failed``, ``resumed`` or ``running`` (already here)."""
        self.taken_over[outcome] = self.taken_over.get(outcome, 0) + count

    def card_healed(self) -> None:
        self.cards_healed += 1

    def refused(self, reason: str) -> None:
        self.refusals[reason] = self.refusals.get(reason, 0) + 1

    def llm_used(
        self,
        model: str,
        *,
        model_calls: int,
        tool_calls: int,
        input_tokens: int,
        output_tokens: int,
        user: str | None = None,
        cost_usd: float = 0.0,
    ) -> None:
        """Count what one LLM run used (its model requests, tool calls, tokens and cost), and by whom."""
        usage = self.llm.get(model)
        if usage is None:
            if len(self.llm) >= LLM_MODELS_KEPT:
                model = "other"
            usage = self.llm.setdefault(model, LlmUsage())
        usage.model_calls += model_calls
        usage.tool_calls += tool_calls
        usage.input_tokens += input_tokens
        usage.output_tokens += output_tokens
        usage.cost_usd += cost_usd
        if user is not None:
            if (user, "input") not in self.llm_users and len(self.llm_users) >= 2 * LLM_USERS_KEPT:
                user = "other"
            for kind, count in (("input", input_tokens), ("output", output_tokens)):
                self.llm_users[(user, kind)] = self.llm_users.get((user, kind), 0) + count

    def round_trip(self, agent: str, method: str, seconds: float) -> None:
        histogram = self.round_trips.get((agent, method))
        if histogram is None:
            histogram = self.round_trips[(agent, method)] = Histogram()
        histogram.observe(seconds)

    def watch(self, *, in_flight: Gauge | None = None, discovery_size: Gauge | None = None) -> None:
        """Report these gauges while the component runs (read at each scrape)."""
        self.in_flight, self.discovery_size = in_flight, discovery_size

    def unwatch(self) -> None:
        """The component stopped: no more gauges (its counters stay)."""
        self.in_flight = self.queue_depth = self.discovery_size = None

    def watch_transport(self, transport: Transport) -> None:
        """Count the reconnections of ``transport`` (every connection after its first) and
        report its publishes waiting for the broker as the queue depth."""
        from mesh.transport import MqttTransport

        if isinstance(transport, MqttTransport):
            self.queue_depth = lambda: transport.queued_publishes
        first = True

        def connected(_session_present: bool) -> None:
            nonlocal first
            if first:
                first = False
            else:
                self.reconnects += 1

        transport.add_connect_listener(connected)


class MeshMetrics:
    """Every component's metrics in this process."""

    def __init__(self) -> None:
        self._components: dict[tuple[str, str], ComponentMetrics] = {}

    def component(self, namespace: str, name: str) -> ComponentMetrics:
        """The metrics of ``name`` on ``namespace`` (made on first use, then the same)."""
        metrics = self._components.get((namespace, name))
        if metrics is None:
            metrics = self._components[(namespace, name)] = ComponentMetrics(namespace, name)
        return metrics

    def components(self) -> list[ComponentMetrics]:
        return list(self._components.values())


#: The process's metrics (Prometheus scrapes a process: one registry, as prometheus_client's own).
METRICS = MeshMetrics()
