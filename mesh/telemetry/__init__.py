"""Observability: OpenTelemetry traces and Prometheus metrics of the mesh's components.

- :mod:`mesh.telemetry.tracing`: spans for every hop, continued across MQTT by ``traceparent``;
  off (and OpenTelemetry not imported) until enabled, e.g. by ``mesh run`` from ``OTEL_*``.
- :mod:`mesh.telemetry.metrics`: the counts each component keeps (always on, cheap);
- :mod:`mesh.telemetry.exposition`: their Prometheus text, for ``/metrics``.
"""

from __future__ import annotations

from mesh.telemetry import tracing
from mesh.telemetry.metrics import METRICS, ComponentMetrics, MeshMetrics

__all__ = ["METRICS", "ComponentMetrics", "MeshMetrics", "tracing"]
