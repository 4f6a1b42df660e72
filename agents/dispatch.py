"""From a request on the agent's topic to the handler of its method, and every error to an answer.

Requests are handled synchronously in the transport's callback: the answer topics' check
(cached per topic), the size check, one
:func:`~mesh.a2a.parse_request`, one lookup in the handler table, the handler. A handler that
must wait (cancel, a push URL check) returns an awaitable, which runs as a task of its own;
any :class:`~mesh.a2a.RpcError` it raises, or any other failure, is answered as a JSON-RPC
error, so every accepted request ends in an answer.

The handler table is built from :class:`~mesh.a2a.Method`: each method has exactly one
handler, marked with :func:`serves`, whose ``params`` are annotated with the method's params
model (checked when the table is built), so a handler receives its own model, typed.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar, get_type_hints

from agents.admission import AtCapacity
from agents.answers import Answers, Route
from mesh.a2a import DEFAULT_MAX_DEPTH, AgentBusy, InternalFailure, InvalidRequest, Method, RpcError, parse_request
from mesh.background import BackgroundTasks
from mesh.errors import short_repr
from mesh.properties import MessageProperties
from mesh.telemetry import ComponentMetrics
from mesh.transport import InboundMessage

__all__ = ["Handler", "RequestDispatcher", "handler_table", "request_key", "serves"]

log = logging.getLogger(__name__)

#: A method handler: ``handler(params, props, route)``; an awaitable if it must wait.
Handler = Callable[[Any, MessageProperties, Route], Awaitable[None] | None]

F = TypeVar("F", bound=Callable[..., Awaitable[None] | None])

_SERVES = "__serves_method__"


def serves(method: Method) -> Callable[[F], F]:
    """Mark a method of a handler class as the handler of ``method``."""

    def mark(handler: F) -> F:
        setattr(handler, _SERVES, method)
        return handler

    return mark


def handler_table(handlers: object) -> dict[Method, Handler]:
    """The bound handler of every method, from the :func:`serves` marks of ``handlers``' class.

    Raises ``TypeError`` if a method has no handler or two, or if a handler's ``params`` are
    not annotated with its method's params model.
    """
    cls = type(handlers)
    names = _HANDLER_NAMES.get(cls)
    if names is None:
        # Once per class: checking the annotations (typing.get_type_hints) costs a millisecond,
        # and a `mesh run` of 1,000 agents builds 1,000 tables of the same class.
        names = _HANDLER_NAMES[cls] = _handler_names(cls)
    return {method: getattr(handlers, name) for method, name in names.items()}


_HANDLER_NAMES: dict[type, dict[Method, str]] = {}


def _handler_names(cls: type) -> dict[Method, str]:
    names: dict[Method, str] = {}
    for name in dir(cls):
        method = getattr(getattr(cls, name), _SERVES, None)
        if not isinstance(method, Method):
            continue
        if method in names:
            raise TypeError(f"{cls.__name__}: {method} has two handlers; mark one with @serves({method!r})")
        hint = get_type_hints(getattr(cls, name)).get("params")
        if hint is not method.params:
            raise TypeError(
                f"{cls.__name__}.{name} serves {method}, whose params are {method.params.__name__}; "
                f"annotate its params argument with that (got {hint!r})"
            )
        names[method] = name
    if missing := [str(m) for m in Method if m not in names]:
        raise TypeError(f"{cls.__name__} has no handler for {', '.join(missing)}; add one marked with @serves(...)")
    return names


_CREATES_TASKS = frozenset((Method.message_send, Method.message_stream))


def request_key(message: InboundMessage) -> str:
    """What identifies a request across redeliveries: a digest of its bytes and answer route.

    A broker redelivers the very same bytes; a client that reuses a request id for another
    message sends other bytes, so it is not taken for a repeat.
    """
    props = message.properties
    digest = hashlib.blake2b(message.payload, digest_size=16)
    digest.update(b"\0" + (props.reply_to or "").encode(errors="surrogatepass"))
    digest.update(b"\0" + (props.correlation_data or b""))
    return digest.hexdigest()


class RequestDispatcher:
    """Answers every request of one agent: parse, dispatch, and errors as JSON-RPC errors.

    Each refused request costs one log line with its reason. A request whose ``replyTo`` is
    no answer topic of the agent has nowhere to be answered: it is logged and dropped. One
    whose ``a2aStatusTopic`` is no answer topic is answered with the error on its ``replyTo``.
    """

    def __init__(
        self,
        agent_name: str,
        handlers: Mapping[Method, Handler],
        answers: Answers,
        *,
        max_message_bytes: int,
        max_depth: int = DEFAULT_MAX_DEPTH,
        key_requests: bool = False,
        max_waiting: int = 1000,
        guard: Callable[[MessageProperties], object] | None = None,
        metrics: ComponentMetrics | None = None,
    ) -> None:
        """``key_requests``: give each message/send and message/stream its :func:`request_key`;
        ``max_waiting``: methods that wait (cancel, push URL checks) at once, beyond it "busy";
        ``guard``: checks every request's properties first (raising a JSON-RPC error);
        ``metrics``: where refusals are counted, by reason."""
        self.agent_name = agent_name
        self.max_waiting = max_waiting
        self.key_requests = key_requests
        self.handlers = handlers
        self.answers = answers
        self.max_message_bytes = max_message_bytes
        self.max_depth = max_depth
        self.guard = guard
        self.metrics = metrics
        #: Once set, requests are refused (the agent is shutting down).
        self.stopping = False
        #: Requests dropped because their replyTo is no answer topic of the agent.
        self.dropped = 0
        self._waiting = BackgroundTasks(log, f"agent {agent_name!r}")

    def on_request(self, message: InboundMessage, refuse: RpcError | None = None) -> bool:
        """Handle one request; True if it must wait for a place (:class:`~agents.admission.AtCapacity`):
        then nothing was answered. ``refuse``: answer the request with that error instead."""
        props = message.properties
        if props.reply_to is not None and (problem := self.answers.topic_problem(props.reply_to)) is not None:
            self.dropped += 1
            if self.metrics is not None:
                self.metrics.refused("BadReplyTo")
            log.warning(
                "%s: dropped a request: its replyTo %s %s; nothing is answered",
                self.agent_name,
                short_repr(props.reply_to),
                problem,
            )
            return False
        route = self.answers.route(props)
        limit = self.max_message_bytes
        if len(message.payload) > limit:
            self._refuse(
                route,
                InvalidRequest(
                    f"the request is {len(message.payload)} bytes; agent {self.agent_name!r} accepts at most "
                    f"{limit} (limits.max_message_bytes); send large content by URI",
                    data={"size": len(message.payload), "limit": limit},
                ),
            )
            return False
        try:
            request = parse_request(message.payload, max_depth=self.max_depth)
        except RpcError as exc:
            self._refuse(route, exc)
            return False
        key = None
        if self.key_requests and request.method in _CREATES_TASKS:
            key = request_key(message)
        route = self.answers.for_request(route, request.id, key, request.method)
        if refuse is not None:
            self._refuse(route, refuse)
            return False
        if props.status_topic is not None and (problem := self.answers.topic_problem(props.status_topic)) is not None:
            self._refuse(
                route,
                InvalidRequest(
                    f"the a2aStatusTopic {short_repr(props.status_topic)} {problem}",
                    data={"property": "a2aStatusTopic"},
                ),
            )
            return False
        try:
            if self.stopping:
                raise InternalFailure(f"agent {self.agent_name!r} is shutting down; send the request again later")
            if self.guard is not None:
                self.guard(props)
            pending = self.handlers[request.method](request.params, props, route)
        except AtCapacity:
            return True
        except Exception as exc:
            self._fail(request.method, route, exc)
            return False
        if pending is not None:
            if len(self._waiting) >= self.max_waiting:
                if inspect.iscoroutine(pending):
                    pending.close()  # never started: nothing to undo
                self._refuse(
                    route,
                    AgentBusy(
                        f"agent {self.agent_name!r} has {len(self._waiting)} requests waiting (cancels, push URL "
                        "checks), its maximum; send the request again later",
                        data={"waiting": len(self._waiting)},
                    ),
                )
                return False
            self._waiting.spawn(self._finish(request.method, route, pending))
        return False

    def _refuse(self, route: Route, error: RpcError) -> None:
        log.info("%s: refused request %r: %s", self.agent_name, route.request_id, error.error.message)
        if self.metrics is not None:
            self.metrics.refused(type(error).__name__)
        self.answers.error(route, error)

    async def _finish(self, method: Method, route: Route, pending: Awaitable[None]) -> None:
        """The rest of a method that had to wait, with the same error answers."""
        try:
            await pending
        except Exception as exc:
            self._fail(method, route, exc)

    def _fail(self, method: Method, route: Route, exc: Exception) -> None:
        if isinstance(exc, AtCapacity):  # found at capacity after a wait (a push URL check): cannot be held
            exc = AgentBusy(
                f"agent {self.agent_name!r} runs as many tasks as it may (max_concurrent_tasks); "
                "send the request again later"
            )
        if not isinstance(exc, RpcError):
            log.error("%s: %s failed", self.agent_name, method, exc_info=exc)
            self.answers.error(route, InternalFailure(f"{type(exc).__name__}: {exc}"))
            return
        self._refuse(route, exc)

    async def drain(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for the methods still waiting to answer."""
        if self._waiting:
            await asyncio.wait(list(self._waiting), timeout=timeout)
