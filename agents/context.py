"""What a handler knows about the task it works on, and how it reaches other agents."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents.errors import DelegationError
from mesh.a2a import AgentCard, Message, Task
from mesh.artifacts import ArtifactError, ArtifactInfo, ArtifactRef, ArtifactStore, Source, file_part
from mesh.trust import Identity

if TYPE_CHECKING:
    from agents.delegation import Delegator
    from agents.updates import ArtifactUpdate, Update


@dataclass(eq=False)
class TaskContext:
    """The task a handler works on, who asked, and a signal for cancellation.

    ``history`` holds the earlier messages of the same ``context_id`` (user messages and the
    agent's replies), oldest first, not including the message being handled.
    ``call_chain`` lists the agents the request came through when it was delegated.
    ``identity`` says who the user is and whether a trusted token proves it: ``user_id`` is the
    token's subject when ``user_verified``, else only what the sender claimed (``userId``).
    ``caller`` is the component that sent the request, ``kind:name`` (``client:cli`` for ``mesh
    send``, ``gateway:http``, ``agent:orchestrator``): what its caller token proves when the agent
    trusts keys (the secured ``mesh up``), else what its answer topic says; None when unknown (a
    task resumed after a restart). A person is ``user_id``; a program without a user is ``caller``.
    """

    task_id: str
    context_id: str
    agent_name: str
    history: list[Message] = field(default_factory=list)
    user_id: str | None = None
    identity: Identity = field(default_factory=lambda: Identity(None))
    caller: str | None = None
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
    # Whether anyone follows the task's progress as it comes (a stream, a message/send with a
    # status topic, a push subscriber): progress that only they would see may be left out.
    watched: Callable[[], bool] = field(default=lambda: True, repr=False)
    # The namespace's artifact store (mesh.artifacts), for save_artifact and load_artifact.
    artifacts: ArtifactStore | None = field(default=None, repr=False)

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

    # ------------------------------------------------------------------ artifacts

    def _store(self) -> ArtifactStore:
        if self.artifacts is None:
            raise ArtifactError("this task context has no artifact store (serve the agent with AgentService)")
        return self.artifacts

    async def save_artifact(
        self,
        name: str,
        data: Source,
        mime_type: str | None = None,
        *,
        description: str | None = None,
        emit: bool = True,
    ) -> str:
        """Store ``data`` (bytes, a file path, or an async iterator of bytes, read in chunks) as the
        next version of ``name`` in this task's context, emit the artifact-update event carrying
        the seed's FilePart (``size_bytes`` and ``version`` in its metadata), and return the
        ``artifact://{context_id}/{name}?version=N`` URI."""
        info = await self._store().save(
            self.context_id, name, data, mime_type=mime_type, owner_task=self.task_id, owner_user=self.user_id
        )
        if emit and self.emit is not None:
            self.emit(artifact_update(info, description=description))
        return info.uri

    async def load_artifact(self, uri: str) -> bytes:
        """The bytes of an ``artifact://`` URI of this namespace (whole: stream large ones with
        :meth:`open_artifact`); :class:`~mesh.artifacts.ArtifactError` for a foreign or unknown one."""
        info = await self.artifact_info(uri)
        return b"".join([chunk async for chunk in self._store().open(info)])

    async def artifact_info(self, uri: str) -> ArtifactInfo:
        """What the store knows of an ``artifact://`` URI: name, MIME type, size, sha256, version."""
        return await self._store().info(ArtifactRef.parse(uri))

    def open_artifact(self, info: ArtifactInfo, start: int = 0, end: int | None = None) -> AsyncIterator[bytes]:
        """The artifact's bytes in chunks (``end`` exclusive), never whole in memory."""
        return self._store().open(info, start, end)

    async def list_artifacts(self) -> list[ArtifactInfo]:
        """Every stored version of this context's artifacts."""
        return await self._store().list(self.context_id)


def artifact_update(info: ArtifactInfo, *, description: str | None = None) -> ArtifactUpdate:
    """The artifact-update a stored version is announced with: its FilePart, by URI."""
    from agents.updates import PartsArtifact

    return PartsArtifact(
        info.name,
        [file_part(info)],
        description=description,
        metadata={"size_bytes": info.size, "version": info.version, "sha256": info.sha256},
    )
