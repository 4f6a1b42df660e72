"""Agents as broker-connected services.

Write an :class:`Agent` subclass with an async ``handle(message, ctx)`` and run it with
``mesh run agents.yaml`` (or :class:`AgentService` from code).
"""

from agents.agent import Agent, HandlerResult
from agents.context import TaskContext
from agents.settings import AgentSettings, DelegationSettings, Limits
from agents.updates import (
    DataArtifact,
    FileArtifact,
    InputRequired,
    PartsArtifact,
    Reply,
    Status,
    TaskFailed,
    TextArtifact,
    Update,
)

__all__ = [
    "Agent",
    "AgentSettings",
    "DataArtifact",
    "DelegationSettings",
    "FileArtifact",
    "HandlerResult",
    "InputRequired",
    "Limits",
    "PartsArtifact",
    "Reply",
    "Status",
    "TaskContext",
    "TaskFailed",
    "TextArtifact",
    "Update",
]
