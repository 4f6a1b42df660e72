"""What a handler knows about the task it works on."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from mesh.a2a import Message

if TYPE_CHECKING:
    from agents.delegation import Delegator


@dataclass(eq=False)
class TaskContext:
    """The task a handler works on, who asked, and a signal for cancellation.

    ``history`` holds the earlier messages of the same ``context_id`` (user messages and the
    agent's replies), oldest first, not including the message being handled.
    """

    task_id: str
    context_id: str
    agent_name: str
    history: list[Message] = field(default_factory=list)
    user_id: str | None = None
    user_config: dict[str, Any] = field(default_factory=dict)
    auth_token: str | None = field(default=None, repr=False)
    metadata: dict[str, Any] = field(default_factory=dict)
    call_depth: int = 0
    # Set when the task is canceled; the handler's await is interrupted as well.
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    delegator: Delegator | None = field(default=None, repr=False)

    @property
    def is_cancelled(self) -> bool:
        return self.cancelled.is_set()
