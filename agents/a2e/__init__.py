"""A2E workers: agents in any language that serve skills over A2E NDJSON on stdio.

:class:`WorkerAgent` runs a worker process (the A2E host) and serves its skills on the mesh;
:mod:`agents.a2e.messages` holds the A2E 1.0 models, :mod:`agents.a2e.framing` the NDJSON lines.
"""

from agents.a2e.errors import WorkerError, WorkerGone, WorkerStartError, WorkerUnavailable
from agents.a2e.process import WorkerCommand
from agents.a2e.registry import TypeRegistry
from agents.a2e.supervisor import SupervisorSettings
from agents.a2e.worker import WorkerAgent

__all__ = [
    "SupervisorSettings",
    "TypeRegistry",
    "WorkerAgent",
    "WorkerCommand",
    "WorkerError",
    "WorkerGone",
    "WorkerStartError",
    "WorkerUnavailable",
]
