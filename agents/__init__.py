"""Agents as broker-connected services.

Write an :class:`Agent` subclass with an async ``handle(message, ctx)`` and run it with
``mesh run agents.yaml`` (or :class:`AgentService` from code). A handler returns or yields
updates (:class:`Reply`, :class:`Status`, the artifacts...) and may delegate to other agents
through its :class:`TaskContext`; every error it may see is an :class:`AgentError`.
"""

from agents.agent import Agent, HandlerResult
from agents.context import TaskContext
from agents.errors import (
    AgentError,
    CallCycleError,
    CallDepthExceededError,
    DelegationError,
    DelegationTimeoutError,
    PeerFailedError,
    PeerGoneError,
    PeerNotAllowedError,
    PeerNotFoundError,
)
from agents.service import AgentService
from agents.settings import AgentSettings, DelegationSettings
from agents.updates import (
    AuthRequired,
    DataArtifact,
    FileArtifact,
    InputRequired,
    MessageOnly,
    PartsArtifact,
    Rejected,
    Reply,
    Status,
    TaskFailed,
    TextArtifact,
    Update,
)
from mesh.limits import MessageLimits
from mesh.version import __version__

__all__ = [
    "Agent",
    "AgentError",
    "AgentService",
    "AgentSettings",
    "AuthRequired",
    "CallCycleError",
    "CallDepthExceededError",
    "DataArtifact",
    "DelegationError",
    "DelegationSettings",
    "DelegationTimeoutError",
    "FileArtifact",
    "HandlerResult",
    "InputRequired",
    "MessageLimits",
    "MessageOnly",
    "PartsArtifact",
    "PeerFailedError",
    "PeerGoneError",
    "PeerNotAllowedError",
    "PeerNotFoundError",
    "Rejected",
    "Reply",
    "Status",
    "TaskContext",
    "TaskFailed",
    "TextArtifact",
    "Update",
    "__version__",
]
