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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from mesh.a2a import TERMINAL_STATES, AgentCard, ErrorCode, RpcError
from mesh.broker import BrokerSettings
from mesh.calls import Answer, Call, CallOptions, CallPath, follow_registry
from mesh.discovery import LazyRegistry
from mesh.e2a import E2AEnvelope, E2AResponse, ResponseLog, ResponseSequencer
from mesh.errors import AgentUnavailableError, CallTimeoutError, MeshError
from mesh.presence import CardPresence, presence_will
from mesh.registry import DiscoveryRegistry, Entry
from mesh.telemetry import METRICS
from mesh.transport import MqttTransport, Transport
from mesh.trust import Trust
from topics import get_gateway_discovery_topic, validate_identifier, validate_namespace

log = logging.getLogger(__name__)

#: The user id of a caller the edge did not authenticate (gateways.http.auth.ANONYMOUS).
ANONYMOUS_USER = "anonymous"

# JAF's codes (they collide with A2A's -32003..-32007: data.errorType tells them apart).
AGENT_NOT_FOUND = -32000
TIMEOUT = -32006
SEND_METHODS = {"session/prompt", "message/send", "message/stream"}
_TERMINAL = {state.value for state in TERMINAL_STATES}


@dataclass(slots=True)
class TaskRoute:
    """What the gateway remembers of a task it forwarded: which agent has it, its last state."""

    task_id: str
    agent: str
    context_id: str | None
    owner: str | None
    state: str | None = None
    task: dict[str, Any] | None = None  # the last Task seen, as A2A 0.3 JSON
    updated: float = 0.0


class GatewayError(MeshError):
    """A request the gateway refuses before it reaches the mesh; ``code`` is its JSON-RPC code."""

    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.data = data or {}


class GatewayRuntime:
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
        card_interval_s: float = 10.0,
        discovery_ttl_s: float = 60.0,
        max_remembered_tasks: int = 10_000,
        response_log: ResponseLog | None = None,
        trust: Trust | None = None,
    ) -> None:
        """``trust``: the gateway signs its card, accepts only signed cards and, with its own key,
        mints a user token per request (``authToken``) that agents trusting it verify."""
        self.gateway_id = validate_identifier(gateway_id, "gateway id")
        self.namespace = validate_namespace(namespace)
        self.idle_timeout_s = idle_timeout_s
        card_topic = get_gateway_discovery_topic(self.namespace, self.gateway_id)
        shared_broker = broker if transport is None else None
        if transport is None:
            if broker is None:
                raise TypeError("GatewayRuntime needs a broker (BrokerSettings) or a transport")
            transport = MqttTransport(
                broker, client_id=f"{self.gateway_id}-{uuid.uuid4().hex[:8]}", will=presence_will(card_topic)
            )
        self.transport: Transport = transport
        self.trust = trust
        self.tokens = trust.token_minter(self.namespace) if trust is not None else None
        if trust is not None and trust.signing_key is None:
            log.warning(
                "gateway %s has trust settings but no key: its card is unsigned and it mints no user tokens; "
                "make one with `mesh keys %s` (trust.keys or trust.signing_key)",
                self.gateway_id,
                self.gateway_id,
            )
        # The process's shared registry (mesh.discovery), leased at start; card_interval_s is
        # kept for configs that set it: cards are published at start, reconnect and change.
        verifier = trust.card_verifier() if trust is not None else None
        self.discovery = LazyRegistry(
            self.namespace,
            owner=self.gateway_id,
            broker=shared_broker,
            transport=self.transport,
            ttl_s=discovery_ttl_s,
            verifier=verifier,
        )
        # Before start: nobody known (with the trust it will check cards with).
        self._no_registry = DiscoveryRegistry(self.transport, self.namespace, verifier=verifier)
        self.calls = CallPath(self.transport, self.namespace, self.gateway_id, role="gateway")
        follow_registry(self.calls, self.discovery)  # an agent's card removed fails the calls waiting on it
        if trust is not None and trust.signing_key is not None:
            card = _signed(card, trust)
        healed = METRICS.component(self.namespace, self.gateway_id).card_healed
        self.presence = CardPresence(self.transport, card_topic, card, on_heal=healed)
        self.response_log = response_log
        self._tasks: OrderedDict[str, TaskRoute] = OrderedDict()
        self._max_tasks = max_remembered_tasks
        self.metrics = METRICS.component(self.namespace, self.gateway_id)

    async def start(self) -> None:
        self.metrics.watch_transport(self.transport)
        await self.transport.connect()
        await self.discovery.get()
        await self.calls.start()
        await self.presence.start()
        self.metrics.watch(in_flight=lambda: self.calls.open_calls, discovery_size=lambda: len(self.registry.agents()))

    async def stop(self) -> None:
        await self.presence.stop()
        await self.discovery.close()
        await self.calls.flush()
        await self.transport.close()
        self.metrics.unwatch()
        if self.response_log is not None:
            self.response_log.close()

    @property
    def registry(self) -> DiscoveryRegistry:
        """The registry of the agents on the mesh (an empty one before :meth:`start`)."""
        return self.discovery.current or self._no_registry

    # ------------------------------------------------------------------ routing help

    def agent_card(self, name: str) -> Any:
        """The card of agent ``name``, or the JAF agent-not-found error listing the others."""
        entry = self.registry.get(name)
        if entry is None:
            available = self.registry.agent_names()
            raise GatewayError(
                AGENT_NOT_FOUND,
                f"Agent not found: {name!r} is not on namespace {self.namespace!r}; "
                f"available agents: {', '.join(available) or 'none'}",
                {"errorType": "AgentNotFound", "agentName": name, "availableAgents": available},
            )
        return entry.card

    def task_route(self, task_id: str) -> TaskRoute | None:
        return self._tasks.get(task_id)

    def task_routes(self) -> list[TaskRoute]:
        return list(self._tasks.values())

    # ------------------------------------------------------------------ forwarding

    async def forward(
        self,
        envelope: E2AEnvelope,
        agent: str,
        *,
        deadline_s: float | None = None,
        owner: str | None = None,
    ) -> AsyncIterator[E2AResponse]:
        """Send ``envelope`` to ``agent`` and yield the E2A frames of the answer, final last.

        ``deadline_s`` bounds the whole request (the HTTP timeout); the idle timeout bounds the
        silence between two events. Closing the iterator early (a client that went away)
        leaves the task running: it can be fetched or resubscribed to later.
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
            cancel_on_abandon=False,  # a client that went away can fetch or resubscribe later
        )
        async with self.calls.call(agent, method, params, options) as call:
            if method in ("message/send", "message/stream") and call.task_id:
                self._remember(call.task_id, agent, params, owner)
            async with contextlib.aclosing(self._answers(sequencer, call)) as answers:
                async for frame in answers:
                    yield frame

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
        if method in SEND_METHODS:
            method = "message/stream" if envelope.is_stream else "message/send"
            if envelope.a2a_metadata:
                params["metadata"] = envelope.a2a_metadata
            if not params.get("configuration"):
                params.pop("configuration", None)
        return method, params

    async def _answers(self, sequencer: ResponseSequencer, call: Call) -> AsyncGenerator[E2AResponse, None]:
        """The call's answers as E2A frames: events, then one final frame (an answer or an error)."""
        try:
            while True:
                answer = await call.next()
                if answer.final:
                    break
                result = answer.json
                if isinstance(result, dict):
                    self._observe(result)
                    branch = _BRANCHES.get(str(result.get("kind")), "status_update")
                    yield self._logged(sequencer.a2a_stream_event(branch, result))
        except CallTimeoutError as exc:
            reason = (
                "the request's timeout ran out" if exc.reason == "deadline" else f"nothing came for {exc.waited_s:g} s"
            )
            final = sequencer.error(
                TIMEOUT,
                f"Timeout: agent {call.agent!r} did not finish task {exc.task_id!r} ({reason})"
                + ("; the task was canceled" if exc.canceled else ""),
                {"errorType": "Timeout", "agentName": call.agent, "taskId": exc.task_id},
            )
        except RpcError as exc:  # the agent's error answer, or a malformed answer
            final = sequencer.error(exc.code, exc.error.message, exc.data)
        except AgentUnavailableError as exc:  # nobody listens on its topic, or it went away
            final = sequencer.error(
                int(ErrorCode.AGENT_GONE),
                str(exc),
                {"errorType": "AgentGone", "agentName": call.agent, "taskId": call.task_id, "reason": exc.reason},
            )
        except MeshError as exc:  # the request could not be delivered
            final = sequencer.error(-32603, f"the request to agent {call.agent!r} failed: {exc}")
        else:
            final = self._final(sequencer, answer)
        yield self._logged(final)

    def _final(self, sequencer: ResponseSequencer, answer: Answer) -> E2AResponse:
        result = answer.json
        if isinstance(result, dict) and result.get("kind") == "task":
            self._observe(result)
            return sequencer.finish("a2a.task", result)
        if isinstance(result, dict) and result.get("kind") == "message":
            return sequencer.finish("a2a.message", result)
        return sequencer.complete(result)

    def _logged(self, frame: E2AResponse) -> E2AResponse:
        if self.response_log is not None:
            self.response_log.write(frame)
        return frame

    # ------------------------------------------------------------------ task memory

    def _remember(self, task_id: str, agent: str, params: dict[str, Any], owner: str | None) -> None:
        message = params.get("message") or {}
        route = self._tasks.get(task_id)
        if route is None:
            route = self._tasks[task_id] = TaskRoute(task_id, agent, message.get("contextId"), owner)
            while len(self._tasks) > self._max_tasks:
                self._tasks.popitem(last=False)
        route.updated = time.time()

    async def refresh_tasks(self, owner: str | None, *, limit: int = 100, timeout_s: float = 2.0) -> None:
        """Ask the agents where ``owner``'s unfinished tasks stand (the ``limit`` most recent), so
        ListTasks shows live states: a task sent without blocking goes on without the gateway
        seeing it. A task whose agent does not answer within ``timeout_s`` keeps its last state."""
        unfinished = [
            route
            for route in reversed(self._tasks.values())  # the most recent first
            if route.owner == owner and route.state not in _TERMINAL
        ][:limit]
        gate = asyncio.Semaphore(16)  # a page of tasks must not become a burst of requests

        async def refresh(route: TaskRoute) -> None:
            options = CallOptions(
                user_id=owner,
                auth_token=self._user_token(owner),
                idle_timeout_s=timeout_s,
                deadline_s=timeout_s,
                events=False,
            )
            async with gate:
                try:
                    async with self.calls.call(route.agent, "tasks/get", {"id": route.task_id}, options) as call:
                        answer = await call.result()
                except MeshError as exc:  # gone, timed out, forgotten by the agent: keep what we know
                    log.debug("ListTasks: task %s of %r not refreshed: %s", route.task_id, route.agent, exc)
                    return
            if isinstance(answer.json, dict):
                self._observe(answer.json)

        await asyncio.gather(*(refresh(route) for route in unfinished))

    def _observe(self, result: dict[str, Any]) -> None:
        """Keep the latest known state of tasks the gateway forwarded (for ListTasks, routing)."""
        task_id = result.get("id") if result.get("kind") == "task" else result.get("taskId")
        route = self._tasks.get(task_id) if isinstance(task_id, str) else None
        if route is None:
            return
        status = result.get("status")
        if isinstance(status, dict):
            route.state = status.get("state")
        if result.get("kind") == "task":
            route.task = result
            route.context_id = result.get("contextId", route.context_id)
        route.updated = time.time()

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


def _signed(card: Callable[[], bytes], trust: Trust) -> Callable[[], bytes]:
    """``card`` signed with the gateway's key, signed again only when the card changes."""
    last: list[bytes] = [b"", b""]

    def signed() -> bytes:
        unsigned = card()
        if unsigned != last[0]:
            last[:] = [unsigned, trust.sign(AgentCard.model_validate_json(unsigned)).to_json_bytes()]
        return last[1]

    return signed


_BRANCHES = {
    "status-update": "status_update",
    "artifact-update": "artifact_update",
    "task": "task",
    "message": "message",
}
