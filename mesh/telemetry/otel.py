"""The OpenTelemetry side of :mod:`mesh.telemetry.tracing`: imported only once tracing is on.

``from_environment`` is how ``mesh run`` turns tracing on: the standard variables
(``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_SERVICE_NAME``,
``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_TRACES_SAMPLER``...) read by
the SDK itself, spans exported over OTLP/HTTP in batches.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer, TracerProvider
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from mesh.telemetry.tracing import ENDPOINT_VARIABLES
from mesh.version import DISTRIBUTION, __version__

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

__all__ = ["activated", "end_span", "from_environment", "start_span", "traceparent_of", "use"]

_KINDS = {
    "server": SpanKind.SERVER,
    "client": SpanKind.CLIENT,
    "consumer": SpanKind.CONSUMER,
    "internal": SpanKind.INTERNAL,
}
_PROPAGATOR = TraceContextTextMapPropagator()
_tracer: Tracer = trace.NoOpTracer()


def use(provider: TracerProvider) -> None:
    global _tracer
    _tracer = provider.get_tracer(DISTRIBUTION, __version__)


def start_span(name: str, kind: str, traceparent: str | None, attributes: Mapping[str, Any] | None) -> Span:
    parent = _PROPAGATOR.extract({"traceparent": traceparent}) if traceparent else None
    return _tracer.start_span(name, parent, kind=_KINDS[kind], attributes=attributes)


def traceparent_of(span: Span) -> str | None:
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, trace.set_span_in_context(span))
    return carrier.get("traceparent")


def activated(span: Span) -> AbstractContextManager[Span]:
    return trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False)


def end_span(span: Span, error: BaseException | None, attributes: Mapping[str, Any]) -> None:
    if attributes:
        span.set_attributes(attributes)
    if error is not None and not isinstance(error, GeneratorExit):  # a reader that stopped early: no failure
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
    span.end()


def from_environment(environ: Mapping[str, str] = os.environ) -> TracerProvider | None:
    """The SDK's tracer provider exporting over OTLP/HTTP, when the environment names an endpoint
    (and ``OTEL_SDK_DISABLED`` is not true); ``None`` otherwise."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if not any(environ.get(name) for name in ENDPOINT_VARIABLES):
        return None
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkTracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    name = environ.get("OTEL_SERVICE_NAME")
    if not name and "service.name=" not in environ.get("OTEL_RESOURCE_ATTRIBUTES", ""):
        name = "mesh"
    provider = SdkTracerProvider(resource=Resource.create({"service.name": name} if name else {}))
    endpoint = environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") or (
        environ["OTEL_EXPORTER_OTLP_ENDPOINT"].rstrip("/") + "/v1/traces"  # the spec's path for the base endpoint
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint)))
    return provider
