"""A gateway on the mesh: its id, topics, card and registry, and how it forwards requests.

Every request a gateway takes in is first an :class:`~mesh.e2a.E2AEnvelope`;
:meth:`GatewayRuntime.forward` sends it to an agent on the mesh (``replyTo`` =
``{ns}/a2a/v1/gateway/response/{gateway}/{key}``, ``a2aStatusTopic`` = ``.../gateway/status/...``)
and yields the answer as :class:`~mesh.e2a.E2AResponse` frames, sequenced by a
:class:`~mesh.e2a.ResponseSequencer`:

- progress (status and artifact events) as ``a2a.stream_event`` frames;
- the answer as one final ``a2a.task`` / ``a2a.message`` / ``e2a.complete`` frame;
- a failure as one final ``e2a.error`` frame whose ``code`` is the JSON-RPC code.

A task silent for ``idle_timeout_s`` (or past the request's deadline) is canceled on the mesh
and answered with a timeout error, so no client is left waiting on a task nobody works on. An
agent that is not there (nobody listens on its request topic, or its card is removed while the
gateway waits) is answered at once with the mesh's "agent gone" error
(:attr:`~mesh.a2a.ErrorCode.AGENT_GONE`, ``data.errorType`` ``AgentGone``).

This module connects, publishes the gateway's card and forwards; the rest is one concept each:
:mod:`gateways.answers` (a call's answers as frames), :mod:`gateways.taskroutes` (what the
gateway remembers of the tasks it forwarded) and :mod:`gateways.errors` (what it answers itself).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from gateways.answers import answer_frames
from gateways.errors import GatewayError, agent_not_found_error
from gateways.profile_answers import profile_frames
from gateways.taskroutes import TaskRoute, TaskRoutes
from mesh.a2a.methods import SEND_METHODS, Method
from mesh.broker import BrokerSettings
from mesh.calls import CallOptions
from mesh.discovery.registry import Entry
from mesh.e2a import E2AEnvelope, E2AResponse, ResponseLog, ResponseSequencer
from mesh.member import MeshMember, member_transport
from mesh.profile.requester import is_profile_agent
from mesh.transport import Transport
from mesh.trust import Trust
from topics import get_gateway_discovery_topic, validate_identifier, validate_namespace

log = logging.getLogger(__name__)

__all__ = ["SEND_REQUESTS", "GatewayError", "GatewayRuntime", "TaskRoute"]

#: The user id of a caller the edge did not authenticate (gateways.http.auth.ANONYMOUS).
ANONYMOUS_USER = "anonymous"
# The requests that send a message: A2A's, and ACP's prompt.
SEND_REQUESTS = frozenset({"session/prompt", *SEND_METHODS})


class GatewayRuntime(MeshMember):
    """The mesh side of a gateway (the HTTP side is in :mod:`gateways.http`)."""

    def __init__(
        self,
        gateway_id: str,
        *,
        namespace: str,
        card: Callable[[], bytes],
        broker: BrokerSettings | None = None,
        transport: Transport | None = None,
        idle_timeout_s: float = 300.0,
        discovery_ttl_s: float = 60.0,
        max_remembered_tasks: int = 10_000,
        response_log: ResponseLog | None = None,
        trust: Trust | None = None,
    ) -> None:
        """``trust``: the gateway signs its card, accepts only signed cards and, with its own key,
        mints a user token per request (``authToken``) that agents trusting it verify."""
        self.gateway_id = validate_identifier(gateway_id, "gateway id")
        namespace = validate_namespace(namespace)
        self.idle_timeout_s = idle_timeout_s
        card_topic = get_gateway_discovery_topic(namespace, self.gateway_id)
        # The process's shared registry (mesh.discovery), leased at start; with credentials, one on
        # its own connection (its user is bound to that connection's client id).
        shared_broker = broker if transport is None else None
        if transport is None:
            if broker is None:
                raise TypeError("GatewayRuntime needs a broker (BrokerSettings) or a transport")
            transport = member_transport(broker, "gateway", namespace, self.gateway_id, card_topic)
            if broker.password:
                shared_broker = None
        # The gateway's card is published at start, after a reconnect and when it changes: no interval.
        super().__init__(
            self.gateway_id,
            namespace,
            kind="gateway",
            transport=transport,
            card_topic=card_topic,
            card=card,
            trust=trust,
            registry_owner=self.gateway_id,
            registry_broker=shared_broker,
            discovery_ttl_s=discovery_ttl_s,
        )
        self.tokens = trust.token_minter(self.namespace) if trust is not None else None
        self.response_log = response_log
        self.tasks = TaskRoutes(self.calls, self._user_token, max_tasks=max_remembered_tasks)

    async def stop(self) -> None:
        await super().stop()
        if self.response_log is not None:
            self.response_log.close()

    # ------------------------------------------------------------------ routing help

    def agent_card(self, name: str) -> Any:
        """The card of agent ``name``, or the JAF agent-not-found error listing the others."""
        entry = self.registry.get(name)
        if entry is None:
            raise agent_not_found_error(name, self.registry.agent_names())
        return entry.card

    def task_route(self, task_id: str) -> TaskRoute | None:
        return self.tasks.get(task_id)

    def task_routes(self) -> list[TaskRoute]:
        return self.tasks.all()

    async def refresh_tasks(self, owner: str | None, *, limit: int = 100, timeout_s: float = 2.0) -> None:
        """Ask the agents where ``owner``'s unfinished tasks stand (see :meth:`TaskRoutes.refresh`)."""
        await self.tasks.refresh(owner, limit=limit, timeout_s=timeout_s)

    # ------------------------------------------------------------------ forwarding

    async def forward(
        self,
        envelope: E2AEnvelope,
        agent: str,
        *,
        deadline_s: float | None = None,
        owner: str | None = None,
        events: bool = True,
        cancel_on_abandon: bool = False,
    ) -> AsyncIterator[E2AResponse]:
        """Send ``envelope`` to ``agent`` and yield the E2A frames of the answer, final last.

        ``deadline_s`` bounds the whole request (the HTTP timeout); the idle timeout bounds the
        silence between two events. Closing the iterator early (a client that went away)
        leaves the task running, to be fetched or resubscribed to later, unless
        ``cancel_on_abandon`` (an MCP client that gave up has nobody to deliver the answer to).
        ``events=False`` asks for no stream events (a blocking call nobody watches).
        """
        sequencer = ResponseSequencer(envelope)
        method, params = self._mesh_call(envelope)
        try:
            self.agent_card(agent)
        except GatewayError as exc:
            yield self._logged(sequencer.error(exc.code, str(exc), exc.data))
            return
        user_id = envelope.user_id
        options = CallOptions(
            # The client's own credential stays at the edge: agents get the identity as userId,
            # proven by a token the gateway signs when it has a key.
            user_id=user_id,
            auth_token=self._user_token(user_id),
            idle_timeout_s=self.idle_timeout_s,
            deadline_s=deadline_s,
            events=events,
            cancel_on_abandon=cancel_on_abandon,
        )
        if is_profile_agent(agent):  # an EMQX profile agent (org/unit/agent)
            message = params.get("message")
            frames = profile_frames(
                self.profile_requester, sequencer, agent, method, params, options, self.tasks.observe
            )
            async with contextlib.aclosing(frames) as answers:
                async for frame in answers:
                    if isinstance(message, dict) and message.get("taskId"):
                        self.tasks.remember(message["taskId"], agent, params, owner)
                    yield self._logged(frame)
            return
        async with self.calls.call(agent, method, params, options) as call:
            if method in SEND_METHODS and call.task_id:
                self.tasks.remember(call.task_id, agent, params, owner)
            async with contextlib.aclosing(answer_frames(sequencer, call, self.tasks.observe)) as answers:
                async for frame in answers:
                    yield self._logged(frame)

    def _user_token(self, user_id: str | None) -> str | None:
        """The token the gateway signs for ``user_id`` (when it has a key and a user). An
        unauthenticated caller gets none: a verified identity is never vouched for anonymously."""
        if self.tokens is None or not user_id or user_id == ANONYMOUS_USER:
            return None
        return self.tokens.mint(user_id)

    def _mesh_call(self, envelope: E2AEnvelope) -> tuple[str, dict[str, Any]]:
        """The mesh method and 0.3 params an envelope stands for."""
        method = envelope.method or ""
        params = dict(envelope.params)
        if method in SEND_REQUESTS:
            method = Method.message_stream if envelope.is_stream else Method.message_send
            if envelope.a2a_metadata:
                params["metadata"] = envelope.a2a_metadata
            if not params.get("configuration"):
                params.pop("configuration", None)
        return method, params

    def _logged(self, frame: E2AResponse) -> E2AResponse:
        if self.response_log is not None:
            self.response_log.write(frame)
        return frame

    # ------------------------------------------------------------------ facade for the edges
    # What an edge (the HTTP app) reads of the mesh, so that it never reaches into the
    # transport or the registry.

    @property
    def is_connected(self) -> bool:
        """Whether the gateway is connected to the broker now."""
        return self.transport.is_connected

    @property
    def broker_url(self) -> str:
        """The broker's URL (no credentials)."""
        return self.transport.url

    def agents(self) -> list[Entry]:
        """The agents on the mesh now."""
        return self.registry.agents()

    def agent(self, name: str) -> Entry | None:
        """Agent ``name`` as discovery knows it, or ``None``."""
        return self.registry.get(name)

    def agent_names(self) -> list[str]:
        """The names of the agents on the mesh now."""
        return self.registry.agent_names()
