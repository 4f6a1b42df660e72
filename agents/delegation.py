"""Delegation: an agent hands part of its task to another agent on the mesh.

A sub-task goes to the peer's request topic with ``replyTo`` =
``{ns}/a2a/v1/agent/response/{self}/{sub_task_id}`` and ``a2aStatusTopic`` =
``{ns}/a2a/v1/agent/status/{self}/{sub_task_id}``, sent and awaited through the agent's
:class:`mesh.calls.CallPath`, which subscribes to both families once and routes the answers. The caller's ``userId``,
``a2aUserConfig``, ``authToken`` and ``contextId`` travel with the sub-task, ``callDepth``
grows by one and ``a2aCallChain`` records who passed it on, so an
agent can refuse chains that are too deep or that loop back to it.

The wait for the peer is an *idle* timeout: every event from the peer restarts it. When it
runs out, or when the delegating task is itself canceled, the call path sends the peer
``tasks/cancel`` for its exact task id (learned from its events), so no work is left running on
the mesh. A peer that is not there fails the sub-task at once with
:class:`~agents.errors.PeerGoneError`: the broker found no subscriber for the request, or the
agent's registry reported the peer's card removed (its will, or its shutdown). The registry is
the process's shared one (:mod:`mesh.discovery`), started by the first delegation.

What stays here: the allow/deny, depth and cycle checks, finding the peer, passing its events
on, and turning its answer into a Task or a :class:`~agents.errors.DelegationError`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agents.errors import (
    CallCycleError,
    CallDepthExceededError,
    DelegationTimeoutError,
    PeerFailedError,
    PeerGoneError,
    PeerNotAllowedError,
    PeerNotFoundError,
)
from agents.settings import DelegationSettings
from agents.updates import PartsArtifact, Status
from mesh.a2a import (
    InvalidAgentResponse,
    Message,
    MessageSendParams,
    RpcError,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    TextPart,
    create_user_message,
)
from mesh.calls import CallOptions, CallPath
from mesh.discovery import LazyRegistry
from mesh.discovery.registry import name_allowed
from mesh.errors import AgentNotFoundError, AgentUnavailableError, CallTimeoutError
from mesh.profile.requester import ProfileRequester, is_profile_agent
from mesh.timestamps import utc_now_iso

if TYPE_CHECKING:
    from agents.context import TaskContext

__all__ = ["Delegator"]

_FAILED_STATES = frozenset({TaskState.failed, TaskState.rejected, TaskState.canceled})


class Delegator:
    """Sends one agent's sub-tasks and routes the peers' answers back to the waiting handlers."""

    def __init__(
        self,
        agent_name: str,
        namespace: str,
        registry: LazyRegistry,
        settings: DelegationSettings,
        *,
        calls: CallPath,
        profile: ProfileRequester,
        discovery_wait_s: float = 2.0,
    ) -> None:
        """``calls``: the agent's call path (it fails the sub-tasks of a peer whose card is
        removed); ``profile``: its requester of EMQX profile agents (``org/unit/agent``)."""
        self.agent_name = agent_name
        self.namespace = namespace
        self.registry = registry
        self.settings = settings
        self.discovery_wait_s = discovery_wait_s
        self.calls = calls
        self.profile = profile

    async def start(self) -> None:
        """Subscribe to this agent's response and status topics."""
        await self.calls.start()

    # ------------------------------------------------------------------ the call

    async def delegate(
        self,
        ctx: TaskContext,
        peer: str,
        message: str | Message,
        *,
        stream: bool = False,
        timeout: float | None = None,
        forward: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> Task:
        """Send ``message`` to ``peer`` as a sub-task of ``ctx``'s task; return its final Task."""
        chain = [*ctx.call_chain, self.agent_name]
        self._check_call(peer, chain, ctx.call_depth + 1)
        await self._find(peer)
        idle_s = timeout if timeout is not None else self.settings.timeout_s
        forwarder = _forwarder(ctx, peer) if forward else None
        options = CallOptions(
            user_id=ctx.user_id,
            user_config=ctx.user_config or None,
            auth_token=ctx.auth_token,
            call_depth=ctx.call_depth + 1,
            call_chain=chain,
            idle_timeout_s=idle_s,
        )
        params = self._params(ctx, message, metadata)
        method = "message/stream" if stream else "message/send"
        if is_profile_agent(peer):
            return await self._delegate_profile(ctx, peer, params, method, forwarder, idle_s)
        async with self.calls.call(peer, method, params, options) as call:
            try:
                while True:
                    answer = await call.next()
                    if not answer.final:
                        if forwarder is not None:
                            event = answer.value
                            if isinstance(event, TaskStatusUpdateEvent | TaskArtifactUpdateEvent):
                                forwarder(event)
                        continue
                    result = answer.value
                    if isinstance(result, Message):  # a bare Message answer: a completed task for the caller
                        result = _as_task(result, call.task_id or call.key, ctx.context_id)
                    if not isinstance(result, Task):
                        raise PeerFailedError(peer, error=_unexpected(result))
                    if result.status.state in _FAILED_STATES:
                        raise PeerFailedError(peer, task=result)
                    return result
            except CallTimeoutError as exc:
                raise DelegationTimeoutError(peer, exc.task_id or call.key, idle_s) from None
            except AgentUnavailableError as exc:  # nobody listens on its topic, or it went away
                raise PeerGoneError(peer, exc) from None
            except RpcError as exc:  # the peer's error answer, or a malformed one
                raise PeerFailedError(peer, error=exc) from None

    async def _delegate_profile(
        self,
        ctx: TaskContext,
        peer: str,
        params: MessageSendParams,
        method: str,
        forwarder: Callable[[TaskStatusUpdateEvent | TaskArtifactUpdateEvent], None] | None,
        idle_s: float,
    ) -> Task:
        """A sub-task to an EMQX profile agent (:mod:`mesh.profile.requester`); same errors as any peer's."""
        if not params.message.task_id:
            params.message.task_id = str(uuid.uuid4())  # the profile's requester names the task
        try:
            async with asyncio.timeout(idle_s):
                async for item in self.profile.items(peer, method, params, auth_token=ctx.auth_token):
                    if isinstance(item, Message):
                        return _as_task(item, params.message.task_id, ctx.context_id)
                    if isinstance(item, Task):
                        if item.status.state in _FAILED_STATES:
                            raise PeerFailedError(peer, task=item)
                        return item
                    if forwarder is not None:
                        forwarder(item)
        except (CallTimeoutError, TimeoutError):
            raise DelegationTimeoutError(peer, params.message.task_id, idle_s) from None
        except AgentUnavailableError as exc:
            raise PeerGoneError(peer, exc) from None
        except RpcError as exc:
            raise PeerFailedError(peer, error=exc) from None
        raise PeerFailedError(peer, error=InvalidAgentResponse(f"{peer} ended its answer without a task"))

    def _check_call(self, peer: str, chain: list[str], depth: int) -> None:
        settings = self.settings
        if not name_allowed(peer, settings.allow, settings.deny):
            raise PeerNotAllowedError(
                f"agent {self.agent_name!r} may not delegate to {peer!r} "
                f"(delegation.allow: {list(settings.allow)}, delegation.deny: {list(settings.deny)})",
                peer=peer,
            )
        if depth > settings.max_call_depth:
            raise CallDepthExceededError(
                f"delegating to {peer!r} would make the call chain {' -> '.join([*chain, peer])} "
                f"{depth} calls deep; the maximum is {settings.max_call_depth} (delegation.max_call_depth)",
                peer=peer,
            )
        if peer in chain and not settings.allow_cycles:
            raise CallCycleError(
                f"delegating to {peer!r} would close the cycle {' -> '.join([*chain, peer])}; "
                "set delegation.allow_cycles: true to allow it",
                peer=peer,
            )

    async def _find(self, peer: str) -> None:
        registry = await self.registry.get()  # the first delegation starts discovery
        if registry.get(peer) is not None:
            return
        try:
            await registry.wait_for(peer, self.discovery_wait_s)
        except AgentNotFoundError as exc:
            raise PeerNotFoundError(peer, exc.available, self.discovery_wait_s) from None

    def _params(self, ctx: TaskContext, message: str | Message, metadata: dict[str, Any] | None) -> MessageSendParams:
        if isinstance(message, str):
            outgoing = create_user_message([TextPart(text=message)], context_id=ctx.context_id)
        else:
            outgoing = message.model_copy(update={"context_id": message.context_id or ctx.context_id})
        return MessageSendParams(
            message=outgoing,
            metadata={**(metadata or {}), "parentTaskId": ctx.task_id, "delegatingAgent": self.agent_name},
        )


def _forwarder(ctx: TaskContext, peer: str) -> Callable[[Any], None]:
    """Pass a peer's events on as the delegating task's own, tagged with where they came from."""

    def forward(event: TaskStatusUpdateEvent | TaskArtifactUpdateEvent) -> None:
        if ctx.emit is None:
            return
        if isinstance(event, TaskArtifactUpdateEvent):
            artifact = event.artifact
            ctx.emit(
                PartsArtifact(
                    artifact.name,
                    list(artifact.parts),
                    artifact_id=f"{peer}:{artifact.artifact_id}",
                    append=bool(event.append),
                    last_chunk=event.last_chunk,
                    metadata={**(artifact.metadata or {}), "forwardedFrom": peer},
                )
            )
        elif event.status.message is not None and not event.final:
            ctx.emit(Status(parts=list(event.status.message.parts), metadata={"forwardedFrom": peer}))

    return forward


def _as_task(message: Message, task_id: str, context_id: str) -> Task:
    """A peer's bare Message answer as the completed Task :meth:`Delegator.delegate` returns."""
    status = TaskStatus(state=TaskState.completed, message=message, timestamp=utc_now_iso())
    return Task(id=task_id, context_id=message.context_id or context_id, status=status, history=[message])


def _unexpected(result: object) -> RpcError:
    return InvalidAgentResponse(f"expected the final Task, got a {type(result).__name__}")
