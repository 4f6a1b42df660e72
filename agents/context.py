"""What a handler knows about the task it works on, and how it reaches other agents."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.errors import DelegationError
from mesh.a2a import AgentCard, Message, Task
from mesh.trust import Identity

if TYPE_CHECKING:
    from agents.delegation import Delegator
    from agents.updates import Update


@dataclass(eq=False)
class TaskContext:
    """The task a handler works on, who asked, and a signal for cancellation.

    ``history`` holds the earlier messages of the same ``context_id`` (user messages and the
    agent's replies), oldest first, not including the message being handled.
    ``call_chain`` lists the agents the request came through when it was delegated.
    ``identity`` says who the user is and whether a trusted token proves it: ``user_id`` is the
    token's subject when ``user_verified``, else only what the sender claimed (``userId``).
    """

    task_id: str
    context_id: str
    agent_name: str
    history: list[Message] = field(default_factory=list)
    user_id: str | None = None
    identity: Identity = field(default_factory=lambda: Identity(None))
    user_config: dict[str, Any] = field(default_factory=dict)
    auth_token: str | None = field(default=None, repr=False)
    metadata: dict[str, Any] = field(default_factory=dict)
    call_depth: int = 0
    call_chain: list[str] = field(default_factory=list)
    # The request's W3C traceparent: the task's span continues its caller's trace.
    traceparent: str | None = None
    # Set when the task is canceled; the handler's await is interrupted as well.
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    delegator: Delegator | None = field(default=None, repr=False)
    # Emits a progress update (Status or an artifact) now, as if the handler had yielded it.
    emit: Callable[[Update], None] | None = field(default=None, repr=False)

    @property
    def user_verified(self) -> bool:
        """Whether a trusted user token proves ``user_id`` (see :mod:`mesh.trust.tokens`)."""
        return self.identity.verified

    @property
    def is_cancelled(self) -> bool:
        return self.cancelled.is_set()

    async def delegate(
        self,
        agent: str,
        message: str | Message,
        *,
        stream: bool = False,
        timeout: float | None = None,
        forward: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> Task:
        """Hand work to another agent and return its final Task (see :mod:`agents.delegation`).

        ``forward=True`` passes the peer's status and artifact events on as this task's own.
        Raises a :class:`~agents.errors.DelegationError` subclass when there is no usable answer.
        """
        if self.delegator is None:
            raise DelegationError("this task context cannot delegate (no delegator attached)", peer=agent)
        return await self.delegator.delegate(
            self, agent, message, stream=stream, timeout=timeout, forward=forward, metadata=metadata
        )

    def peers(self) -> list[AgentCard]:
        """The cards of the other agents on the mesh now, by name."""
        registry = self.delegator.registry.current if self.delegator is not None else None
        if registry is None:  # discovery not started: the agent declares no use of it (Agent.uses_discovery)
            return []
        return [e.card for e in registry.agents() if e.name != self.agent_name]
