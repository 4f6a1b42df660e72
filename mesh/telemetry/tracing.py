"""Tracing: an OpenTelemetry span for every hop, continued across MQTT by ``traceparent``.

Off unless :func:`enable` was given a tracer provider (``mesh run`` does so from the standard
``OTEL_*`` variables, :mod:`mesh.telemetry.otel`). While it is off, every hook in the hot path
is one read of :data:`enabled`, and OpenTelemetry is not even imported: the core runs without
it installed.

The spans (each a child of the one before it, one trace per request)::

    HTTP request (server)              gateways.http.observability
      message/send <agent> (client)    mesh.calls: every request a gateway or agent sends
        task <agent> (consumer)        agents.runner: the handler's run, parent from traceparent
          message/send <peer> (client) a delegation: the same call path, inside the task
            task <peer> (consumer)

The ``traceparent`` user property of a request is its client span's, so the receiving agent
continues the caller's trace.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from mesh.errors import ConfigError

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from opentelemetry.trace import Span, TracerProvider

__all__ = [
    "ENDPOINT_VARIABLES",
    "SpanKind",
    "activated",
    "disable",
    "enable",
    "enable_from_environment",
    "enabled",
    "end_span",
    "start_span",
    "traceparent_of",
]

#: Whether spans are made; hot paths read it before anything else.
enabled = False

SpanKind = Literal["server", "client", "consumer", "internal"]

#: The variables naming where spans go (OTLP/HTTP): with neither, ``mesh run`` makes no spans.
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")


def enable(provider: TracerProvider) -> None:
    """Make spans with ``provider``'s tracer from now on (e.g. the SDK's, with an exporter)."""
    global enabled
    from mesh.telemetry import otel

    otel.use(provider)
    enabled = True


def enable_from_environment(environ: Mapping[str, str] = os.environ) -> bool:
    """Turn tracing on when the standard ``OTEL_*`` variables name an OTLP endpoint (see
    :func:`mesh.telemetry.otel.from_environment`); whether it did."""
    if not any(environ.get(name) for name in ENDPOINT_VARIABLES):
        return False
    try:
        from mesh.telemetry import otel
    except ImportError as exc:
        raise ConfigError(
            f"{' or '.join(n for n in ENDPOINT_VARIABLES if environ.get(n))} asks for traces, but OpenTelemetry is "
            f"not installed ({exc}); pip install 'mqtt-agent-mesh[otel]', or unset the variable"
        ) from None
    provider = otel.from_environment(environ)
    if provider is None:
        return False
    enable(provider)
    return True


def disable() -> None:
    """Make no more spans (the ones open still end)."""
    global enabled
    enabled = False


def start_span(
    name: str, kind: SpanKind, *, traceparent: str | None = None, attributes: dict[str, Any] | None = None
) -> Span:
    """A started span: a child of ``traceparent`` when given (a request from the wire), else of
    the current span. Call only while :data:`enabled`."""
    from mesh.telemetry import otel

    return otel.start_span(name, kind, traceparent, attributes)


def traceparent_of(span: Span) -> str | None:
    """The W3C ``traceparent`` that makes a receiver's span a child of ``span``."""
    from mesh.telemetry import otel

    return otel.traceparent_of(span)


def activated(span: Span) -> AbstractContextManager[Span]:
    """``with activated(span):`` the current span within the block (and the tasks it starts);
    end it with :func:`end_span`."""
    from mesh.telemetry import otel

    return otel.activated(span)


def end_span(span: Span, error: BaseException | None = None, **attributes: Any) -> None:
    """Set ``attributes``, record ``error`` if any, and end ``span``."""
    from mesh.telemetry import otel

    otel.end_span(span, error, attributes)
