"""Delegation: an agent hands part of its task to another agent on the mesh.

A sub-task goes to the peer's request topic with ``replyTo`` =
``{ns}/a2a/v1/agent/response/{self}/{sub_task_id}`` and ``a2aStatusTopic`` =
``{ns}/a2a/v1/agent/status/{self}/{sub_task_id}``; a :class:`mesh.calls.CallRouter`
subscribes to both families once and routes the answers. The caller's ``userId``,
``a2aUserConfig``, ``authToken`` and ``contextId`` travel with the sub-task, ``callDepth``
grows by one and ``a2aCallChain`` records who passed it on, so an
agent can refuse chains that are too deep or that loop back to it.

The wait for the peer is an *idle* timeout: every event from the peer restarts it. When it
runs out, or when the delegating task is itself canceled, the peer gets ``tasks/cancel`` for
its exact task id (learned from its events), so no work is left running on the mesh.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agents.errors import (
    CallCycleError,
    CallDepthExceededError,
    DelegationTimeoutError,
    PeerFailedError,
    PeerNotAllowedError,
    PeerNotFoundError,
)
from agents.settings import DelegationSettings
from agents.updates import PartsArtifact, Status
from mesh.a2a import (
    InvalidAgentResponse,
    JSONRPCErrorResponse,
    Message,
    MessageSendParams,
    RpcError,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
    TextPart,
    create_user_message,
    parse_response,
    parse_result,
    request_bytes,
)
from mesh.calls import Call, CallRouter
from mesh.errors import AgentNotFoundError
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.registry import DiscoveryRegistry, name_allowed
from mesh.transport import Transport
from topics import get_agent_request_topic

if TYPE_CHECKING:
    from agents.context import TaskContext

log = logging.getLogger(__name__)

_FAILED_STATES = frozenset({TaskState.failed, TaskState.rejected, TaskState.canceled})


@dataclass(eq=False)
class _SubTask:
    peer: str
    call: Call
    # The peer's own id for its task: our request id unless its events say otherwise.
    peer_task_id: str
    forward: Callable[[Any], None] | None
    # Whether an event of the peer has told us its task id yet.
    peer_task_known: bool = False

    @property
    def sub_task_id(self) -> str:
        return self.call.key


class Delegator:
    """Sends one agent's sub-tasks and routes the peers' answers back to the waiting handlers."""

    def __init__(
        self,
        agent_name: str,
        namespace: str,
        transport: Transport,
        registry: DiscoveryRegistry,
        settings: DelegationSettings,
        *,
        discovery_wait_s: float = 2.0,
    ) -> None:
        self.agent_name = agent_name
        self.namespace = namespace
        self.transport = transport
        self.registry = registry
        self.settings = settings
        self.discovery_wait_s = discovery_wait_s
        self.router = CallRouter(transport, namespace, agent_name, role="agent")

    async def start(self) -> None:
        """Subscribe to this agent's response and status topics."""
        await self.router.start()

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
        sub_task_id = f"a2a_subtask_{uuid.uuid4().hex}"
        idle_s = timeout if timeout is not None else self.settings.timeout_s
        forwarder = _forwarder(ctx, peer) if forward else None
        with self.router.open(sub_task_id) as call:
            pending = _SubTask(peer, call, sub_task_id, forwarder)
            try:
                await self._send(ctx, pending, message, chain, stream, idle_s, metadata)
                return await self._wait(pending, idle_s)
            except asyncio.CancelledError:
                # The delegating task was canceled: cancel the work it started, down the chain.
                self._cancel_peer(pending)
                raise

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
        if self.registry.get(peer) is not None:
            return
        try:
            await self.registry.wait_for(peer, self.discovery_wait_s)
        except AgentNotFoundError as exc:
            raise PeerNotFoundError(peer, exc.available, self.discovery_wait_s) from None

    async def _send(
        self,
        ctx: TaskContext,
        pending: _SubTask,
        message: str | Message,
        chain: list[str],
        stream: bool,
        idle_s: float,
        metadata: dict[str, Any] | None,
    ) -> None:
        if isinstance(message, str):
            outgoing = create_user_message([TextPart(text=message)], context_id=ctx.context_id)
        else:
            outgoing = message.model_copy(update={"context_id": message.context_id or ctx.context_id})
        params = MessageSendParams(
            message=outgoing,
            metadata={**(metadata or {}), "parentTaskId": ctx.task_id, "delegatingAgent": self.agent_name},
        )
        props = MessageProperties(
            client_id=self.agent_name,
            user_id=ctx.user_id,
            user_config=ctx.user_config or None,
            auth_token=ctx.auth_token,
            call_depth=ctx.call_depth + 1,
            call_chain=chain,
            timestamp_ms=int(time.time() * 1000),
            reply_to=pending.call.reply_topic,
            status_topic=pending.call.status_topic,
            correlation_data=pending.sub_task_id.encode(),
            content_type=JSON_CONTENT_TYPE,
            payload_format_utf8=True,
            message_expiry_s=max(1, int(idle_s)),
        )
        method = "message/stream" if stream else "message/send"
        payload = request_bytes(method, pending.sub_task_id, params)
        await self.transport.publish(get_agent_request_topic(self.namespace, pending.peer), payload, properties=props)

    async def _wait(self, pending: _SubTask, idle_s: float) -> Task:
        while True:
            try:
                kind, payload = await pending.call.next(idle_s)
            except TimeoutError:
                self._cancel_peer(pending)
                raise DelegationTimeoutError(pending.peer, pending.peer_task_id, idle_s) from None
            if kind == "event" and pending.forward is None and pending.peer_task_known:
                continue  # it only restarts the idle timer: not worth parsing
            try:
                response = parse_response(payload)
                if isinstance(response, JSONRPCErrorResponse):
                    raise PeerFailedError(pending.peer, error=RpcError.from_response(response))
                result = parse_result(response.result)
            except RpcError as exc:  # a malformed answer
                raise PeerFailedError(pending.peer, error=exc) from None
            if kind == "event":
                if isinstance(result, TaskStatusUpdateEvent | TaskArtifactUpdateEvent):
                    pending.peer_task_id, pending.peer_task_known = result.task_id, True
                    if pending.forward is not None:
                        pending.forward(result)
                continue
            if not isinstance(result, Task):
                raise PeerFailedError(pending.peer, error=_unexpected(result))
            pending.peer_task_id = result.id
            if result.status.state in _FAILED_STATES:
                raise PeerFailedError(pending.peer, task=result)
            return result

    def _cancel_peer(self, pending: _SubTask) -> None:
        """Ask the peer to cancel its task; its answer is not waited for."""
        if self.router.cancel(pending.peer, pending.peer_task_id, f"{pending.sub_task_id}-cancel"):
            log.info("%s: canceling sub-task %s on %s", self.agent_name, pending.peer_task_id, pending.peer)


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


def _unexpected(result: object) -> RpcError:
    return InvalidAgentResponse(f"expected the final Task, got a {type(result).__name__}")
