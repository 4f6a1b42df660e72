"""Errors of the A2E worker bridge::

WorkerError (agents.errors.AgentError)
├── WorkerStartError     the worker could not be run, refused the handshake or did not answer it
├── WorkerGone           the worker exited or was killed before answering a request
└── WorkerUnavailable    the supervisor gave up on the worker (or is stopping)
"""

from __future__ import annotations

from agents.errors import AgentError

__all__ = ["WorkerError", "WorkerGone", "WorkerStartError", "WorkerUnavailable"]


class WorkerError(AgentError):
    """Root of the worker bridge's errors."""


class WorkerStartError(WorkerError):
    """The worker could not be started, refused the handshake, or did not answer it."""


class WorkerGone(WorkerError):
    """The worker exited (or was killed) before answering; ``sent`` says whether the request reached it."""

    def __init__(self, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


class WorkerUnavailable(WorkerError):
    """The supervisor gave up on the worker (or is stopping): no call can be made."""
