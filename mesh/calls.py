"""The one call path: every request to an agent, and every wait on its answer, goes through here.

:class:`CallPath` belongs to one component (an agent that delegates, a gateway, a client) and
sends its requests; :class:`Call` is one request in flight. ``MeshClient``, the ``Delegator``
and the ``GatewayRuntime`` are built on it and keep only what is their own::

    calls = CallPath(transport, "acme", "orchestrator", role="agent")
    await calls.start()                                       # subscribe to the answer topics
    options = CallOptions(user_id="ada", idle_timeout_s=30)
    async with calls.call("echo", "message/stream", params, options) as call:
        async for answer in call.events():                   # events, then the final answer
            print(answer.value)                               # typed on demand (mesh.answers)
    task = (await calls.request("echo", "message/send", params)).parse(Task)

Topics (DESIGN, topic table). Each call has a *key*, a fresh id that is at once its JSON-RPC
id, its MQTT Correlation Data and the last level of its answer topics:

=========  ==========================================  ======================================
role       replyTo                                     a2aStatusTopic
=========  ==========================================  ======================================
agent      ``.../agent/response/{owner}/{key}``        ``.../agent/status/{owner}/{key}``
gateway    ``.../gateway/response/{owner}/{key}``      ``.../gateway/status/{owner}/{key}``
client     ``.../client/response/{owner}``             ``.../client/status/{owner}/{key}``
=========  ==========================================  ======================================

:meth:`CallPath.start` subscribes once to the owner's two answer families (``.../+`` filters;
the client's response topic has no key level). **Routing rule:** an answer goes to the open call
whose key equals its Correlation Data (agents answer and stream with the request's Correlation
Data). It is the one rule that fits all three roles, since the client response topic carries no
key. What arrives on the response family is the final answer, on the status family an event.
An answer matching no open call (late, or for a call already closed) is dropped.

A call's life:

- :meth:`Call.__aenter__` registers the key, then publishes the JSON-RPC request with the
  options' user properties (:class:`CallOptions`), Correlation Data, content type, payload format
  and a Message Expiry of the call's timeout, without waiting for the PUBACK: a refused publish
  fails the call through :meth:`Call.fail`;
- :meth:`Call.events` yields each answer as an :class:`~mesh.answers.Answer`, the final one
  last; :meth:`Call.result` returns only the final one. Answers are parsed there, once
  (:func:`mesh.answers.read_answer`): an error answer raises its ``RpcError``, a malformed one
  ``InvalidAgentResponse``;
- the wait is an *idle* timeout, restarted by every answer, and optionally bounded by an overall
  deadline; when it runs out the call sends ``tasks/cancel`` for the remote task (fire and
  forget) and raises :class:`~mesh.errors.CallTimeoutError` naming the agent, the task and the
  wait. The remote task id is the one the request names, else the key (an agent takes the
  request id as the id of a new task), updated from every answer. Only calls that start or
  follow work cancel it: ``message/send``, ``message/stream``, ``tasks/resubscribe``;
- when the coroutine waiting on a call is cancelled, the remote task is canceled the same way
  unless ``cancel_on_abandon=False`` (the gateway keeps tasks of clients that went away, to be
  fetched later). Closing the ``events()`` iterator early cancels nothing;
- leaving the ``async with`` block closes the call.

From outside, :meth:`Call.fail` ends a waiting call with an error (answers already received
are delivered first), and :meth:`CallPath.fail_calls_to` does so for every open call to one
agent: the hooks for "the callee is gone" (a PUBACK "no matching subscribers", the removal of
the callee's card).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import uuid
from collections import deque
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal

from mesh.a2a import A2AModel, TaskIdParams, request_bytes
from mesh.answers import Answer, read_answer
from mesh.errors import CallTimeoutError, MeshError
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.transport import InboundMessage, Transport
from topics import (
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

__all__ = ["Call", "CallOptions", "CallPath", "Params", "Role"]

log = logging.getLogger(__name__)

Role = Literal["agent", "gateway", "client"]
#: A request's params: a typed model, or 0.3 JSON as the gateway has it.
Params = A2AModel | Mapping[str, Any]

_SEND_METHODS = frozenset({"message/send", "message/stream"})
# The calls that start or follow work on the callee, which a timeout therefore cancels.
_WORK_METHODS = _SEND_METHODS | {"tasks/resubscribe"}
_KEY_PREFIXES: dict[str, str] = {"agent": "a2a_subtask_", "gateway": "gw_", "client": ""}


@dataclass(slots=True)
class CallOptions:
    """What goes with a request besides its method and params, and how long to wait for it."""

    user_id: str | None = None
    user_config: dict[str, Any] | None = None
    auth_token: str | None = None
    call_depth: int | None = None
    call_chain: list[str] | None = None
    traceparent: str | None = None
    #: The longest silence between two answers; every event restarts it.
    idle_timeout_s: float = 60.0
    #: An overall bound on the call, if any.
    deadline_s: float | None = None
    #: Ask for stream events (send an ``a2aStatusTopic``); they also restart the idle timeout.
    events: bool = True
    #: Cancel the remote task when the waiting coroutine is cancelled.
    cancel_on_abandon: bool = True

    @property
    def expiry_s(self) -> int:
        """The request's Message Expiry: how long the call is prepared to wait, in whole seconds."""
        return max(1, math.ceil(self.deadline_s if self.deadline_s is not None else self.idle_timeout_s))


class Call:
    """One request in flight: ``async with`` it, then read :meth:`events` or :meth:`result`."""

    __slots__ = (
        "_deadline",
        "_failure",
        "_inbox",
        "_payload",
        "_state",
        "_waiter",
        "agent",
        "correlation",
        "key",
        "method",
        "options",
        "path",
        "reply_topic",
        "status_topic",
        "task_id",
    )

    def __init__(self, path: CallPath, agent: str, method: str, params: Params, options: CallOptions) -> None:
        self.path = path
        self.agent = agent
        self.method = method
        self.options = options
        self.key = f"{path.key_prefix}{uuid.uuid4().hex}"
        self.correlation = self.key.encode()
        self.reply_topic = path.reply_topic(self.key)
        self.status_topic = path.status_topic(self.key)
        #: The remote task this call is about, as far as known (updated from every answer).
        self.task_id = _named_task(method, params) or (self.key if method in _SEND_METHODS else None)
        self._payload = request_bytes(method, self.key, params)
        self._inbox: deque[tuple[bool, InboundMessage]] = deque()
        self._waiter: asyncio.Future[bool] | None = None
        self._failure: BaseException | None = None
        self._deadline: float | None = None
        # "new" -> "open" (sent) -> "answered" (final answer read) / "closed" (block left)
        self._state = "new"

    def __repr__(self) -> str:
        return f"<Call {self.method} to {self.agent!r} key={self.key!r} task={self.task_id!r} {self._state}>"

    async def __aenter__(self) -> Call:
        await self.path._send(self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.path._close(self)

    # ------------------------------------------------------------------ reading

    async def events(self) -> AsyncGenerator[Answer, None]:
        """Every answer in order: the stream events, then the final answer (and the end)."""
        while True:
            answer = await self.next()
            yield answer
            if answer.final:
                return

    async def result(self) -> Answer:
        """The final answer; events only restart the idle timeout."""
        while True:
            answer = await self.next()
            if answer.final:
                return answer

    async def next(self) -> Answer:
        """The next answer, event or final (don't ask again after the final one)."""
        while not self._inbox:
            if self._failure is not None:
                raise self._failure
            await self._wait()
        final, message = self._inbox.popleft()
        if final:
            self._state = "answered"  # nothing left to cancel, whatever the answer says
        answer = read_answer(message.payload, message.properties, final=final)
        task_id = answer.task_id
        if task_id is not None:
            self.task_id = task_id
        return answer

    def fail(self, error: BaseException) -> None:
        """End the call with ``error``: its reader raises it once the answers already in are read."""
        if self._state != "open" or self._failure is not None:
            return
        self._failure = error
        self._wake(True)

    # ------------------------------------------------------------------ internals

    def _deliver(self, final: bool, message: InboundMessage) -> None:
        self._inbox.append((final, message))
        self._wake(True)

    def _wake(self, woken: bool) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(woken)

    async def _wait(self) -> None:
        """Wait for the next arrival; raise :class:`CallTimeoutError` when the wait runs out."""
        loop = asyncio.get_running_loop()
        wait, reason, waited = self.options.idle_timeout_s, "idle", self.options.idle_timeout_s
        if self._deadline is not None:
            remaining = self._deadline - loop.time()
            if remaining < wait:
                wait, reason, waited = remaining, "deadline", self.options.deadline_s or 0.0
        if wait > 0:
            # A timer on a bare future: lighter than asyncio.timeout() on every hop.
            waiter = self._waiter = loop.create_future()
            timer = loop.call_later(wait, self._wake, False)
            try:
                if await waiter:
                    return
            except asyncio.CancelledError:
                if self.options.cancel_on_abandon:
                    self._cancel_remote("its caller stopped waiting")
                raise
            finally:
                timer.cancel()
                self._waiter = None
        canceled = self._cancel_remote(f"{reason} timeout")
        raise CallTimeoutError(
            agent=self.agent,
            method=self.method,
            task_id=self.task_id,
            waited_s=waited,
            reason=reason,
            canceled=canceled,
        )

    def _cancel_remote(self, why: str) -> bool:
        if self._state != "open" or self.method not in _WORK_METHODS or self.task_id is None:
            return False
        self._state = "answered"  # once
        return self.path.cancel(self.agent, self.task_id, key=self.key, why=why)


class CallPath:
    """Sends one owner's requests and routes the answers to its open calls (see the module doc)."""

    def __init__(
        self, transport: Transport, namespace: str, owner: str, *, role: Role, key_prefix: str | None = None
    ) -> None:
        self.transport = transport
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

    # ------------------------------------------------------------------ topics

    def reply_topic(self, key: str) -> str:
        """The ``replyTo`` of the call with ``key``."""
        if self.role == "client":
            return self._responses
        return self._responses[:-1] + key  # the filter's "+" is the key level

    def status_topic(self, key: str) -> str:
        """The ``a2aStatusTopic`` of the call with ``key``."""
        return self._statuses[:-1] + key

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

    def calls_to(self, agent: str) -> list[Call]:
        """The open calls waiting on ``agent``."""
        return list(self._by_agent.get(agent, ()))

    def fail_calls_to(self, agent: str, error: BaseException) -> int:
        """Fail every open call waiting on ``agent`` with ``error``; return how many there were."""
        calls = self.calls_to(agent)
        for call in calls:
            call.fail(error)
        return len(calls)

    def cancel(self, agent: str, task_id: str, *, key: str | None = None, why: str = "") -> bool:
        """Send ``tasks/cancel`` for ``task_id`` to ``agent`` without waiting for its answer.

        The answer comes back under ``{key}-cancel``, which no call has open, so it is dropped.
        False (logged) when the request could not be sent.
        """
        cancel_key = f"{key or self.key_prefix + uuid.uuid4().hex}-cancel"
        props = MessageProperties(
            client_id=self.owner,
            reply_to=self.reply_topic(cancel_key),
            timestamp_ms=int(time.time() * 1000),
            correlation_data=cancel_key.encode(),
            content_type=JSON_CONTENT_TYPE,
            payload_format_utf8=True,
        )
        try:
            ack = self.transport.publish_nowait(
                get_agent_request_topic(self.namespace, agent),
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

    async def _send(self, call: Call) -> None:
        if call._state != "new":
            raise RuntimeError(f"{call!r} was already sent; make a new call with CallPath.call()")
        topic = get_agent_request_topic(self.namespace, call.agent)  # validates the agent's name
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
            call_depth=options.call_depth,
            call_chain=options.call_chain,
            timestamp_ms=int(time.time() * 1000),
            traceparent=options.traceparent,
            correlation_data=call.correlation,
            content_type=JSON_CONTENT_TYPE,
            payload_format_utf8=True,
            message_expiry_s=options.expiry_s,
        )
        loop = asyncio.get_running_loop()
        if options.deadline_s is not None:
            call._deadline = loop.time() + options.deadline_s
        # Registered before the publish: an answer can come back before publish_nowait returns.
        self._calls[call.correlation] = call
        self._by_agent.setdefault(call.agent, set()).add(call)
        call._state = "open"
        try:
            ack = self.transport.publish_nowait(topic, call._payload, properties=props)
        except BaseException:
            self._close(call)
            raise
        ack.add_done_callback(lambda done: _fail_on_refusal(call, done))

    def _close(self, call: Call) -> None:
        call._state = "closed"
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
            log.debug("%s: an answer on %s matches no open call (late or foreign); dropped", self.owner, message.topic)
            return
        call._deliver(final, message)


def _named_task(method: str, params: Params) -> str | None:
    """The task a request names: the message's ``taskId``, or the ``id`` / ``taskId`` of tasks/*."""
    if isinstance(params, Mapping):
        if method in _SEND_METHODS:
            message = params.get("message")
            value = message.get("taskId") if isinstance(message, Mapping) else None
        else:
            value = params.get("id", params.get("taskId"))
    elif method in _SEND_METHODS:
        value = getattr(getattr(params, "message", None), "task_id", None)
    else:
        value = getattr(params, "id", None) or getattr(params, "task_id", None)
    return value if isinstance(value, str) else None


def _fail_on_refusal(call: Call, ack: asyncio.Future[None]) -> None:
    if not ack.cancelled() and ack.exception() is not None:
        call.fail(ack.exception())  # type: ignore[arg-type]
