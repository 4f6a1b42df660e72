"""Messages exchanged between users and agents."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import Field

from .base import A2AModel
from .parts import Part


class Role(StrEnum):
    """Who sent a message. A2A 0.3 has no ``system`` role."""

    user = "user"
    agent = "agent"


class Message(A2AModel):
    """One turn of a conversation: who sent it and its parts (at least one)."""

    message_id: str
    role: Role
    parts: list[Part] = Field(min_length=1)
    kind: Literal["message"] = "message"
    task_id: str | None = None
    context_id: str | None = None
    reference_task_ids: list[str] | None = None
    extensions: list[str] | None = None
    metadata: dict[str, Any] | None = None
