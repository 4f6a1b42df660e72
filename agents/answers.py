"""Where an agent's answers go, and sending them.

The final answer to a request (a Task, a result, or a JSON-RPC error) goes to its ``replyTo``,
else to the client response topic of its ``clientId``; with neither it is logged and dropped.
A ``replyTo`` or ``a2aStatusTopic`` outside the agent's answer topics (DESIGN, "Reply topics
are confined"; :func:`topics.answer_topic_problem`) is never published to.
Stream events go to a :class:`~agents.tasks.Listener`'s topic. Every answer carries the
request's Correlation Data and is handed to the transport with ``publish_nowait``, in order,
without waiting for the broker.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from agents.tasks import Listener, TaskRecord
from mesh.a2a import InternalFailure, RpcError, success_response_bytes
from mesh.errors import TransportError
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.transport import Transport
from topics import answer_topic_problem, get_client_response_topic

__all__ = ["Answers", "Route", "reply_properties"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Route:
    """Where the answer to one request goes, and the Correlation Data it carries."""

    topic: str | None
    correlation: bytes | None
    request_id: str | int | None = None
    # Identifies the request's bytes (see agents.dispatch): how a redelivered request is known.
    request_key: str | None = None


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
        return Route(topic, correlation, request_id)

    def topic_problem(self, topic: str) -> str | None:
        """Why the agent may not answer on ``topic`` (see :func:`topics.answer_topic_problem`), or ``None``."""
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
        self._publish(route.topic, payload, reply_properties(route.correlation, self.instance), route.request_id)

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

    def task(self, route: Route, record: TaskRecord, history_length: int | None = None) -> None:
        """Answer with the task as it is now (an internal error if it cannot be serialized)."""
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
        self._publish(
            listener.topic, payload, reply_properties(listener.correlation, self.instance), listener.request_id
        )

    async def drain(self, timeout: float) -> None:
        """Wait (at most ``timeout`` seconds) for the answers on their way to be acknowledged."""
        if self._in_flight:
            await asyncio.wait(list(self._in_flight), timeout=timeout)
