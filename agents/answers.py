"""Where an agent's answers go, and sending them.

The final answer to a request (a Task, a result, or a JSON-RPC error) goes to its ``replyTo``,
else to the client response topic of its ``clientId``; with neither it is logged and dropped.
A ``replyTo`` or ``a2aStatusTopic`` outside the agent's answer topics (DESIGN, "Reply topics
are confined"; :func:`topics.answer_topic_problem`) is never published to.
Stream events go to a :class:`~agents.tasks.Listener`'s topic. Every answer carries the
request's Correlation Data and is handed to the transport with ``publish_nowait``, in order,
without waiting for the broker.

With the EMQX profile on (:mod:`agents.profile`), the profile's reply topics
(``$a2a/v1/reply/...``) are a confined family of their own, and the answers of a request that
came in the profile's dialect go out through its :class:`AnswerDialect`, which translates them
(one runtime, one journal; the dialect is a codec and a topic scheme).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from mesh.a2a import InternalFailure, Message, Method, RpcError, Task, success_response_bytes
from mesh.errors import TransportError
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.transport import Transport
from topics import PROFILE_PREFIX, answer_topic_problem, get_client_response_topic, profile_reply_topic_problem

if TYPE_CHECKING:
    from agents.tasks import Listener, TaskRecord

__all__ = ["AnswerDialect", "Answers", "DialectReplies", "Route", "reply_properties"]


class AnswerDialect(Protocol):
    """How the answers to one request of another dialect go out (translated, on its own connection)."""

    def publish(self, topic: str, payload: bytes, correlation: bytes | None) -> list[asyncio.Future[None]]:
        """Translate one 0.3 JSON-RPC response and hand what it becomes to the transport, in order."""
        ...

    def publish_result(
        self, topic: str, request_id: str | int | None, result: Task | Message, correlation: bytes | None
    ) -> list[asyncio.Future[None]]:
        """As :meth:`publish` for a success response whose result is still a model (no JSON round
        trip); ``ValueError`` if it cannot be written (then the JSON path answers)."""
        ...


class DialectReplies(Protocol):
    """The dialect whose reply topics start with :data:`topics.PROFILE_PREFIX`: makes each request's codec."""

    def for_request(self, method: Method | None) -> AnswerDialect:
        """The codec of the answers to one request of ``method`` (``None``: not read yet)."""
        ...


log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Route:
    """Where the answer to one request goes, and the Correlation Data it carries."""

    topic: str | None
    correlation: bytes | None
    request_id: str | int | None = None
    # Identifies the request's bytes (see agents.dispatch): how a redelivered request is known.
    request_key: str | None = None
    #: Set for a request in the EMQX profile's dialect: its answers are translated.
    dialect: AnswerDialect | None = None


def reply_properties(correlation: bytes | None, instance: str | None = None) -> MessageProperties:
    """The MQTT properties of an answer: the request's Correlation Data, JSON content, and the
    replica that owns the task (``a2aInstance``), if the agent runs as replicas."""
    return MessageProperties(
        correlation_data=correlation, content_type=JSON_CONTENT_TYPE, payload_format_utf8=True, instance=instance
    )


class Answers:
    """Sends one agent's answers and keeps track of those the broker has not acknowledged yet."""

    def __init__(self, transport: Transport, namespace: str, agent_name: str, instance: str | None = None) -> None:
        self.transport = transport
        self.instance = instance
        self.namespace = namespace
        self.agent_name = agent_name
        self._in_flight: set[asyncio.Future[None]] = set()
        #: The EMQX profile's replies, when the agent serves the profile (see agents.profile).
        self.profile: DialectReplies | None = None

    def _is_profile(self, topic: str | None) -> bool:
        return self.profile is not None and topic is not None and topic.startswith(PROFILE_PREFIX + "/")

    def route(self, props: MessageProperties) -> Route:
        """The route of a request's answer, from its user properties (before it is parsed)."""
        topic = props.reply_to
        if topic is None and props.client_id:
            try:
                topic = get_client_response_topic(self.namespace, props.client_id)
            except ValueError:  # a clientId that is no identifier: no fallback topic
                topic = None
        correlation = props.correlation_data
        request_id = correlation.decode(errors="replace") if correlation else None
        dialect = self.profile.for_request(None) if self.profile is not None and self._is_profile(topic) else None
        return Route(topic, correlation, request_id, dialect=dialect)

    def for_request(self, route: Route, request_id: str | int | None, key: str | None, method: Method) -> Route:
        """The route once the request is read: its id, its :func:`~agents.dispatch.request_key`, its method's codec."""
        dialect = route.dialect
        if dialect is not None and self.profile is not None:
            dialect = self.profile.for_request(method)
        return Route(route.topic, route.correlation, request_id, key, dialect)

    def topic_problem(self, topic: str) -> str | None:
        """Why the agent may not answer on ``topic`` (see :func:`topics.answer_topic_problem`), or ``None``.

        With the profile on, its reply topics are allowed too (:func:`topics.profile_reply_topic_problem`).
        """
        if self._is_profile(topic):
            return profile_reply_topic_problem(topic)
        return answer_topic_problem(topic, self.namespace)

    def send(self, route: Route, payload: bytes) -> None:
        """Publish a whole JSON-RPC response on the route."""
        if route.topic is None:
            log.warning(
                "%s: request %r had no replyTo and no clientId; its answer is dropped",
                self.agent_name,
                route.request_id,
            )
            return
        if route.dialect is not None:
            self._publish_dialect(route.dialect, route.topic, payload, route.correlation, route.request_id)
            return
        self._publish(route.topic, payload, reply_properties(route.correlation, self.instance), route.request_id)

    def _publish_dialect(
        self,
        dialect: AnswerDialect,
        topic: str,
        payload: bytes,
        correlation: bytes | None,
        request_id: str | int | None,
    ) -> None:
        try:
            acks = dialect.publish(topic, payload, correlation)
        except (TransportError, ValueError) as exc:
            log.warning("%s: could not answer request %r on %r: %s", self.agent_name, request_id, topic, exc)
            return
        for ack in acks:
            self._in_flight.add(ack)
            ack.add_done_callback(self._in_flight.discard)

    def _publish(self, topic: str, payload: bytes, props: MessageProperties, request_id: str | int | None) -> None:
        try:
            ack = self.transport.publish_nowait(topic, payload, properties=props)
        except (TransportError, ValueError) as exc:
            log.warning("%s: could not answer request %r on %r: %s", self.agent_name, request_id, topic, exc)
            return
        self._in_flight.add(ack)
        ack.add_done_callback(self._in_flight.discard)

    def result(self, route: Route, result_json: bytes) -> None:
        """Answer with a success response around an already serialized ``result``."""
        self.send(route, success_response_bytes(route.request_id, result_json))

    def _dialect_result(self, route: Route, result: Task | Message) -> bool:
        """Answer a request of another dialect with a model result, translated without a JSON
        round trip; False if it must take the JSON path (text no JSON can carry: an error)."""
        dialect, topic = route.dialect, route.topic
        if dialect is None or topic is None:
            return False
        try:
            acks = dialect.publish_result(topic, route.request_id, result, route.correlation)
        except TransportError as exc:
            log.warning("%s: could not answer request %r on %r: %s", self.agent_name, route.request_id, topic, exc)
            return True
        except ValueError:
            return False
        for ack in acks:
            self._in_flight.add(ack)
            ack.add_done_callback(self._in_flight.discard)
        return True

    def task(self, route: Route, record: TaskRecord, history_length: int | None = None) -> None:
        """Answer with the task as it is now (an internal error if it cannot be serialized)."""
        if route.dialect is not None and self._dialect_result(route, record.snapshot(history_length)):
            return
        try:
            result_json = record.snapshot(history_length).to_json_bytes()
        except ValueError as exc:  # a handler's text no JSON can carry (a lone surrogate)
            log.warning("%s: task %s cannot be serialized: %s", self.agent_name, record.id, exc)
            self.error(route, InternalFailure(f"task {record.id!r} holds text that is not valid UTF-8: {exc}"))
            return
        self.result(route, result_json)

    def outcome(self, route: Route, record: TaskRecord, history_length: int | None = None) -> None:
        """Answer a request that waited for the task to settle: the handler's bare Message if it
        answered with one (:class:`~agents.updates.MessageOnly`), else the Task."""
        if record.message_answer is not None:
            if route.dialect is not None and self._dialect_result(route, record.message_answer):
                return
            self.result(route, record.message_answer.to_json_bytes())
        else:
            self.task(route, record, history_length)

    def error(self, route: Route, error: RpcError) -> None:
        """Answer with a JSON-RPC error (under the request id it carries, else the route's)."""
        request_id = error.request_id if error.request_id is not None else route.request_id
        try:
            payload = error.to_response(request_id).to_json_bytes()
        except ValueError:  # an error text or data no JSON can carry: say so, without them
            payload = InternalFailure("the error could not be serialized").to_response(route.request_id).to_json_bytes()
        self.send(route, payload)

    def stream(self, listener: Listener, result_json: bytes) -> None:
        """Publish one event (or the current Task) of a stream to its listener."""
        payload = success_response_bytes(listener.request_id, result_json)
        if listener.dialect is not None:
            self._publish_dialect(listener.dialect, listener.topic, payload, listener.correlation, listener.request_id)
            return
        self._publish(
            listener.topic, payload, reply_properties(listener.correlation, self.instance), listener.request_id
        )

    async def drain(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for the answers on their way to be acknowledged."""
        if self._in_flight:
            await asyncio.wait(list(self._in_flight), timeout=timeout)
