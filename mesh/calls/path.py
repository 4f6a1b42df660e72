"""Sending requests and routing their answers: :class:`CallPath` (see :mod:`mesh.calls`)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
import uuid
from typing import TYPE_CHECKING, Literal

from mesh.a2a import TaskIdParams, request_bytes
from mesh.calls.answers import Answer
from mesh.calls.call import SEND_METHODS, Call, CallOptions, Params
from mesh.calls.owners import Owners
from mesh.calls.resync import Resync
from mesh.errors import AgentUnavailableError, MeshError, NoSubscribersError
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.telemetry import METRICS, tracing
from mesh.transport import InboundMessage, Transport
from topics import (
    get_agent_instance_request_topic,
    get_agent_request_topic,
    get_agent_response_subscription_topic,
    get_agent_status_subscription_topic,
    get_client_response_topic,
    get_client_status_subscription_topic,
    get_gateway_response_subscription_topic,
    get_gateway_status_subscription_topic,
    validate_identifier,
    validate_namespace,
)

if TYPE_CHECKING:  # the JOSE library loads with a signer, not with the call path
    from mesh.trust.callers import CallerMinter

__all__ = ["CallPath", "Role"]

log = logging.getLogger(__name__)

#: How long a card removal waits to see whether it was the broker's shutdown (which publishes
#: every client's will, then drops the connections) before failing the calls on that agent.
GONE_SETTLE_S = 0.3
#: How long after its own reconnection a component treats a card removal as possibly the
#: broker's restart.
RESUME_WINDOW_S = 5.0
#: How long such a removal waits for the agent's card to come back before failing its calls:
#: long enough for the agent's own capped reconnect backoff (10 s by default) and its card.
RESTART_GRACE_S = 15.0
#: A card removal seen while no call waited on the agent still counts for a call sent this soon
#: after it (unless the card came back); at most this many such agents are remembered.
GONE_IDLE_S = 30.0
MAX_GONE_IDLE = 1024

Role = Literal["agent", "gateway", "client"]
_KEY_PREFIXES: dict[str, str] = {"agent": "a2a_subtask_", "gateway": "gw_", "client": ""}


class CallPath:
    """Sends one owner's requests and routes the answers to its open calls (see the module doc)."""

    def __init__(
        self,
        transport: Transport,
        namespace: str,
        owner: str,
        *,
        role: Role,
        key_prefix: str | None = None,
        signer: CallerMinter | None = None,
    ) -> None:
        self.transport = transport
        #: Signs each request's ``a2aCallerToken`` (mesh.trust.callers): the agent's proof of who asks.
        self.signer = signer
        self.namespace = validate_namespace(namespace)
        self.owner = validate_identifier(owner, f"{role} id")
        self.role = role
        self.key_prefix = _KEY_PREFIXES[role] if key_prefix is None else key_prefix
        if role == "agent":
            self._responses = get_agent_response_subscription_topic(self.namespace, self.owner)
            self._statuses = get_agent_status_subscription_topic(self.namespace, self.owner)
        elif role == "gateway":
            self._responses = get_gateway_response_subscription_topic(self.namespace, self.owner)
            self._statuses = get_gateway_status_subscription_topic(self.namespace, self.owner)
        else:
            self._responses = get_client_response_topic(self.namespace, self.owner)
            self._statuses = get_client_status_subscription_topic(self.namespace, self.owner)
        self._calls: dict[bytes, Call] = {}
        self._by_agent: dict[str, set[Call]] = {}
        self._started: asyncio.Future[None] | None = None
        self._cancels: set[asyncio.Future[None]] = set()  # tasks/cancel not yet acknowledged
        # A broker that shuts down publishes every client's will, so a removal seen across an
        # outage of our own may be the broker's restart, not the agent's death (see agent_gone).
        self._offline = False
        self._offline_since = math.inf  # time.perf_counter() of the last drop (the calls' clock)
        self._resumed_at = -math.inf
        # After a reconnect, each call in flight asks its agent for its task (mesh.calls.resync).
        self.resync = Resync(self)
        self._unconfirmed_gone: dict[str, asyncio.TimerHandle] = {}
        # Agents whose card went while no call waited on them: (when, why), until it comes back. A
        # call registered after the removal (its sender was still subscribing, say) would otherwise
        # wait for its timeout on a request the broker keeps for the dead agent's session.
        self._gone_idle: dict[str, tuple[float, str | None]] = {}
        # Replicas: the instance that owns each task; follow-ups go to its instance topic.
        self.owners = Owners(self)
        self.gone_settle_s = GONE_SETTLE_S
        # Round trips are counted per gateway and agent; a client's name is a random one-off.
        self.metrics = METRICS.component(self.namespace, self.owner) if role != "client" else None
        transport.add_disconnect_listener(self._went_offline)
        transport.add_connect_listener(self._came_back)

    # ------------------------------------------------------------------ topics

    def reply_topic(self, key: str) -> str:
        """The ``replyTo`` of the call with ``key``."""
        if self.role == "client":
            return self._responses
        return self._responses[:-1] + key  # the filter's "+" is the key level

    def status_topic(self, key: str) -> str:
        """The ``a2aStatusTopic`` of the call with ``key``."""
        return self._statuses[:-1] + key

    def caller_token(self, agent: str) -> str | None:
        """The ``a2aCallerToken`` of a request to ``agent`` (None without a signing key)."""
        return self.signer.mint(agent) if self.signer is not None else None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Subscribe to the owner's answer topics (once; later calls wait for the same SUBACKs)."""
        if self._started is None:
            self._started = asyncio.ensure_future(self._subscribe())
        try:
            await asyncio.shield(self._started)
        except Exception:
            self._started = None
            raise

    async def _subscribe(self) -> None:
        await asyncio.gather(
            self.transport.subscribe(self._responses, self._on_reply),
            self.transport.subscribe(self._statuses, self._on_event),
        )

    # ------------------------------------------------------------------ calls

    def call(self, agent: str, method: str, params: Params, options: CallOptions | None = None) -> Call:
        """A call of ``method`` on ``agent``, sent when its ``async with`` block is entered."""
        return Call(self, agent, method, params, options if options is not None else CallOptions())

    async def request(self, agent: str, method: str, params: Params, options: CallOptions | None = None) -> Answer:
        """Send one request and return its final answer (raising its error, or a timeout)."""
        async with self.call(agent, method, params, options) as call:
            return await call.result()

    @property
    def open_calls(self) -> int:
        """How many calls wait for their answers."""
        return len(self._calls)

    def open_call_list(self) -> list[Call]:
        """The calls waiting for their answers."""
        return list(self._calls.values())

    def calls_to(self, agent: str) -> list[Call]:
        """The open calls waiting on ``agent``."""
        return list(self._by_agent.get(agent, ()))

    def fail_calls_to(self, agent: str, error: BaseException) -> int:
        """Fail every open call waiting on ``agent`` with ``error``; return how many there were."""
        calls = self.calls_to(agent)
        for call in calls:
            call.fail(error)
        return len(calls)

    def agent_gone(self, agent: str, why: str | None = None) -> None:
        """``agent``'s card was removed: fail the calls waiting on it with "agent 'x' went away: why".

        The calls fail :data:`GONE_SETTLE_S` later, unless by then this component's own
        connection has dropped or just come back: a broker that shuts down publishes every
        client's will first, so such a removal may be the broker's restart, not the agent's
        death. Those calls fail only if the agent's card has not come back (:meth:`agent_back`)
        within :data:`RESTART_GRACE_S`, so answers finished during a broker restart still arrive.
        """
        if agent in self._unconfirmed_gone:
            return
        if not self.calls_to(agent):
            if len(self._gone_idle) >= MAX_GONE_IDLE:  # bounded: the oldest note goes
                del self._gone_idle[next(iter(self._gone_idle))]
            self._gone_idle[agent] = (time.monotonic(), why)
            return
        if self._maybe_restarted():
            self._wait_for_return(agent, why)
        else:
            self._unconfirmed_gone[agent] = asyncio.get_running_loop().call_later(
                GONE_SETTLE_S, self._settled, agent, why
            )

    def agent_back(self, agent: str) -> None:
        """``agent``'s card is there (again): a removal still unconfirmed was the broker's restart."""
        self._gone_idle.pop(agent, None)
        unconfirmed = self._unconfirmed_gone.pop(agent, None)
        if unconfirmed is not None:
            unconfirmed.cancel()

    def owner_of(self, agent: str, task_id: str) -> str | None:
        """The replica of ``agent`` that owns ``task_id``, as its answers said (``None``: not known)."""
        return self.owners.owner_of(agent, task_id)

    def learned_owner(self, agent: str, task_id: str, instance: str) -> None:
        self.owners.learned(agent, task_id, instance)

    def instance_gone(self, agent: str, instance: str) -> None:
        """A replica's card was removed: fail its calls (see :mod:`mesh.calls.owners`)."""
        self.owners.gone(agent, instance)

    def instance_back(self, agent: str, instance: str) -> None:
        """A replica's card is there."""
        self.owners.back(agent, instance)

    def maybe_restarted(self) -> bool:
        """Whether a card removal now may be the broker's restart rather than its owner's end."""
        return self._maybe_restarted()

    def _settled(self, agent: str, why: str | None) -> None:
        del self._unconfirmed_gone[agent]
        if self._maybe_restarted():  # our own connection dropped meanwhile: the broker's shutdown
            self._wait_for_return(agent, why)
        else:
            self._fail_gone(agent, why)

    def _wait_for_return(self, agent: str, why: str | None) -> None:
        self._unconfirmed_gone[agent] = asyncio.get_running_loop().call_later(RESTART_GRACE_S, self._waited, agent, why)

    def _waited(self, agent: str, why: str | None) -> None:
        del self._unconfirmed_gone[agent]
        if self._offline:  # the broker is still away: nothing to tell yet (the calls' own timeouts run)
            self._wait_for_return(agent, why)
        else:
            self._fail_gone(agent, why)

    def _maybe_restarted(self) -> bool:
        return self._offline or time.monotonic() - self._resumed_at < RESUME_WINDOW_S

    def _fail_gone(self, agent: str, why: str | None) -> None:
        failed = self.fail_calls_to(agent, AgentUnavailableError.went_away(agent, why))
        if failed:
            log.warning("%s: agent %s went away; failed the %d call(s) waiting on it", self.owner, agent, failed)

    def _went_offline(self, _reason: str) -> None:
        if not self._offline:
            self._offline, self._offline_since = True, time.perf_counter()

    def _came_back(self, _session_present: bool) -> None:
        if not self._offline:
            return
        self._offline, self._resumed_at = False, time.monotonic()
        # The broker's session is an optimisation, not the guarantee: see mesh.calls.resync.
        self.resync.after_reconnect(self._offline_since)

    def cancel(
        self,
        agent: str,
        task_id: str,
        *,
        key: str | None = None,
        why: str = "",
        user_id: str | None = None,
        auth_token: str | None = None,
    ) -> bool:
        """Send ``tasks/cancel`` for ``task_id`` to ``agent`` without waiting for its answer.

        The answer comes back under ``{key}-cancel``, which no call has open, so it is dropped.
        False (logged) when the request could not be sent. ``user_id`` and ``auth_token`` are
        the task's own, for an agent that requires user tokens.
        """
        cancel_key = f"{key or self.key_prefix + uuid.uuid4().hex}-cancel"
        props = MessageProperties(
            client_id=self.owner,
            user_id=user_id,
            auth_token=auth_token,
            caller_token=self.caller_token(agent),
            reply_to=self.reply_topic(cancel_key),
            timestamp_ms=int(time.time() * 1000),
            correlation_data=cancel_key.encode(),
            content_type=JSON_CONTENT_TYPE,
            payload_format_utf8=True,
        )
        owner = self.owners.owner_of(agent, task_id)
        try:
            topic = get_agent_request_topic(self.namespace, agent)
            if owner is not None:
                topic = get_agent_instance_request_topic(self.namespace, agent, owner)
            ack = self.transport.publish_nowait(
                topic,
                request_bytes("tasks/cancel", cancel_key, TaskIdParams(id=task_id)),
                properties=props,
            )
        except (MeshError, ValueError) as exc:
            log.warning("%s: could not cancel task %s on %s: %s", self.owner, task_id, agent, exc)
            return False
        self._cancels.add(ack)
        ack.add_done_callback(self._cancel_sent)
        log.info("%s: canceling task %s on %s (%s)", self.owner, task_id, agent, why or "asked to")
        return True

    async def flush(self, timeout: float = 1.0) -> None:
        """Wait (up to ``timeout``) until the broker took every ``tasks/cancel`` sent: call before closing."""
        if self._cancels:
            await asyncio.wait(list(self._cancels), timeout=timeout)

    def _cancel_sent(self, ack: asyncio.Future[None]) -> None:
        self._cancels.discard(ack)
        if not ack.cancelled() and ack.exception() is not None:
            log.debug("%s: a tasks/cancel was refused: %s", self.owner, ack.exception())

    async def send(self, call: Call) -> None:
        """Publish ``call``'s request (``Call.__aenter__``): to the agent's shared topic for a new
        task, to the replica that owns it for a follow-up."""
        if call.state != "new":
            raise RuntimeError(f"{call!r} was already sent; make a new call with CallPath.call()")
        # A new task goes to the agent's (shared) topic; a follow-up to the replica that owns it.
        topic = self.owners.route(call, call.method not in SEND_METHODS or call.task_id != call.key)
        if self._started is None or not self._started.done():
            await self.start()
        options = call.options
        props = MessageProperties(
            client_id=self.owner,
            user_id=options.user_id,
            reply_to=call.reply_topic,
            status_topic=call.status_topic if options.events else None,
            user_config=options.user_config,
            auth_token=options.auth_token,
            caller_token=self.caller_token(call.agent),
            call_depth=options.call_depth,
            call_chain=options.call_chain,
            timestamp_ms=int(time.time() * 1000),
            traceparent=options.traceparent,
            correlation_data=call.correlation,
            content_type=JSON_CONTENT_TYPE,
            payload_format_utf8=True,
            message_expiry_s=options.expiry_s,
        )
        if tracing.enabled:
            call.span = span = tracing.start_span(
                f"{call.method} {call.agent}",
                "client",
                traceparent=options.traceparent,
                attributes={"a2a.agent": call.agent, "a2a.method": call.method, "messaging.destination.name": topic},
            )
            props.traceparent = tracing.traceparent_of(span)
        loop = asyncio.get_running_loop()
        call.sent_at = time.perf_counter()
        # Registered before the publish: an answer can come back before publish_nowait returns.
        self._calls[call.correlation] = call
        self._by_agent.setdefault(call.agent, set()).add(call)
        call.opened(loop.time() + options.deadline_s if options.deadline_s is not None else None)
        if (gone := self._gone_idle.get(call.agent)) is not None:
            when, why = gone
            if time.monotonic() - when < GONE_IDLE_S:
                self.agent_gone(call.agent, why)  # as if it went now: the same settle and restart grace
            else:
                del self._gone_idle[call.agent]
        call.topic, call.props = topic, props
        try:
            ack = self.transport.publish_nowait(topic, call.payload, properties=props, require_subscriber=True)
        except BaseException as exc:
            self.close(call)
            call.end_span(exc)
            raise
        ack.add_done_callback(lambda done: _fail_on_refusal(call, done))

    def resend(self, call: Call, until: float) -> None:
        """Publish ``call``'s request again (the agent was busy, its replica gone, the broker
        restarted), expiring at ``until`` (loop time)."""
        if call.state != "open" or call.failed:
            return
        props = dataclasses.replace(call.props)
        props.timestamp_ms = int(time.time() * 1000)
        props.message_expiry_s = max(1, math.ceil(until - asyncio.get_running_loop().time()))
        try:
            ack = self.transport.publish_nowait(call.topic, call.payload, properties=props, require_subscriber=True)
        except (MeshError, ValueError) as exc:
            call.fail(exc)
            return
        ack.add_done_callback(lambda done: _fail_on_refusal(call, done))

    def close(self, call: Call) -> None:
        """Forget ``call`` (``Call.__aexit__``): its answers from now on match no open call."""
        call.closed()
        self.resync.forget(call)
        if self._calls.get(call.correlation) is call:
            del self._calls[call.correlation]
        waiting = self._by_agent.get(call.agent)
        if waiting is not None:
            waiting.discard(call)
            if not waiting:
                del self._by_agent[call.agent]

    # ------------------------------------------------------------------ routing

    def _on_reply(self, message: InboundMessage) -> None:
        self._route(message, True)

    def _on_event(self, message: InboundMessage) -> None:
        self._route(message, False)

    def _route(self, message: InboundMessage, final: bool) -> None:
        correlation = message.properties.correlation_data
        call = self._calls.get(correlation) if correlation is not None else None
        if call is None:
            if correlation is not None and self.resync.route(correlation, final, message):
                return
            log.debug("%s: an answer on %s matches no open call (late or foreign); dropped", self.owner, message.topic)
            return
        if final and self.metrics is not None:
            self.metrics.round_trip(call.agent, call.method, time.perf_counter() - call.sent_at)
        call.deliver(final, message)


def _fail_on_refusal(call: Call, ack: asyncio.Future[None]) -> None:
    if ack.cancelled() or (error := ack.exception()) is None:
        return
    if isinstance(error, NoSubscribersError):  # PUBACK 0x10: nobody subscribes to the request topic
        if call.instance is not None:  # the replica that owns the task is gone
            if call.path.owners.readdress(call):  # others live: sent to the agent's shared topic
                return
            error = call.path.owners.gone_error(call)
        else:
            error = AgentUnavailableError.not_listening(call.agent, error.topic)
    call.fail(error)
