"""Errors of the agents package::

AgentError (mesh.errors.MeshError)
└── DelegationError               a call to a peer agent did not give a usable answer
    ├── PeerNotFoundError         no such agent on the mesh (lists the ones there are)
    ├── PeerNotAllowedError       delegation.allow / delegation.deny forbid it
    ├── CallDepthExceededError    the chain of calls would get deeper than allowed
    ├── CallCycleError            the peer is already in this chain of calls (A -> B -> A)
    ├── DelegationTimeoutError    the peer went silent for too long; its task was canceled
    ├── PeerGoneError             the peer is not there: nobody listens on its request topic,
    │                             or its card was removed while the sub-task waited
    └── PeerFailedError           the peer's task failed / was rejected or canceled, or it
                                  answered with a JSON-RPC error
"""

from __future__ import annotations

from mesh.a2a import RpcError, Task, TaskState, get_text_from_message
from mesh.errors import AgentUnavailableError, MeshError


class AgentError(MeshError):
    """Root of the errors the agents package raises on purpose."""


class DelegationError(AgentError):
    """A delegated call did not give a usable answer; ``peer`` is the agent called."""

    def __init__(self, message: str, *, peer: str) -> None:
        super().__init__(message)
        self.peer = peer


class PeerNotFoundError(DelegationError, LookupError):
    def __init__(self, peer: str, available: list[str], waited_s: float) -> None:
        listing = ", ".join(sorted(available)) or "none"
        super().__init__(
            f"cannot delegate to {peer!r}: no such agent on the mesh (waited {waited_s:g} s); "
            f"available agents: {listing}",
            peer=peer,
        )
        self.available = available


class PeerNotAllowedError(DelegationError):
    pass


class CallDepthExceededError(DelegationError):
    pass


class CallCycleError(DelegationError):
    pass


class DelegationTimeoutError(DelegationError, TimeoutError):
    def __init__(self, peer: str, peer_task_id: str, idle_s: float) -> None:
        super().__init__(
            f"agent {peer!r} sent nothing on task {peer_task_id!r} for {idle_s:g} s; the task was canceled",
            peer=peer,
        )
        self.peer_task_id = peer_task_id


class PeerGoneError(DelegationError):
    """The peer is not there to answer; ``error`` says which way (``error.reason``)."""

    def __init__(self, peer: str, error: AgentUnavailableError) -> None:
        super().__init__(f"delegation to {peer!r} failed: {error}", peer=peer)
        self.error = error


class PeerFailedError(DelegationError):
    """``task`` is the peer's final Task, or ``error`` the JSON-RPC error it answered with."""

    def __init__(self, peer: str, *, task: Task | None = None, error: RpcError | None = None) -> None:
        if task is not None:
            detail = get_text_from_message(task.status.message) if task.status.message else ""
            reason = f"task {task.id!r} ended {task.status.state.value}" + (f": {detail}" if detail else "")
        elif error is None:
            raise ValueError(f"PeerFailedError for {peer!r} needs a task or an error")
        else:
            reason = f"it answered with error {error.code}: {error.error.message}"
        super().__init__(f"delegation to {peer!r} failed: {reason}", peer=peer)
        self.task = task
        self.error = error

    @property
    def state(self) -> TaskState | None:
        return self.task.status.state if self.task is not None else None
