"""Calls whose answers come back on topics of their own (SAM's pattern).

An agent delegating and a gateway forwarding both send a request per task with
``replyTo = .../{role}/response/{owner}/{key}`` and ``a2aStatusTopic = .../{role}/status/{owner}/{key}``,
subscribe once to ``.../{role}/response/{owner}/+`` and ``.../{role}/status/{owner}/+``, and route
what arrives by the last topic level. :class:`CallRouter` does that routing;
:class:`Call` is one open call, read with :meth:`Call.next`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from mesh.a2a import TaskIdParams, request_bytes
from mesh.errors import MeshError
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.transport import InboundMessage, Transport
from topics import (
    get_agent_request_topic,
    get_agent_response_subscription_topic,
    get_agent_response_topic,
    get_agent_status_subscription_topic,
    get_gateway_response_subscription_topic,
    get_gateway_response_topic,
    get_gateway_status_subscription_topic,
    get_gateway_status_topic,
    get_peer_agent_status_topic,
)

log = logging.getLogger(__name__)

Role = Literal["agent", "gateway"]
# What arrived: a stream event (status topic) or the final answer (response topic).
Arrival = tuple[Literal["event", "reply"], bytes]


@dataclass(eq=False)
class Call:
    """One request in flight; its answer and events arrive in order on :meth:`next`."""

    key: str
    reply_topic: str
    status_topic: str
    _inbox: asyncio.Queue[Arrival] = field(default_factory=asyncio.Queue, repr=False)

    async def next(self, timeout: float) -> Arrival:
        """The next event or reply; ``TimeoutError`` after ``timeout`` seconds of silence."""
        if not self._inbox.empty():
            return self._inbox.get_nowait()
        # asyncio.timeout rather than wait_for: wait_for wraps the get in a task of its own,
        # an extra task and loop pass on every hop of a delegation.
        async with asyncio.timeout(timeout):
            return await self._inbox.get()


class CallRouter:
    """Routes answers on one owner's response/status topics to the calls waiting for them."""

    def __init__(self, transport: Transport, namespace: str, owner: str, *, role: Role) -> None:
        self.transport = transport
        self.namespace = namespace
        self.owner = owner
        self.role = role
        self._calls: dict[str, Call] = {}

    async def start(self) -> None:
        """Subscribe to the owner's response and status topics."""
        if self.role == "agent":
            responses = get_agent_response_subscription_topic(self.namespace, self.owner)
            statuses = get_agent_status_subscription_topic(self.namespace, self.owner)
        else:
            responses = get_gateway_response_subscription_topic(self.namespace, self.owner)
            statuses = get_gateway_status_subscription_topic(self.namespace, self.owner)
        await self.transport.subscribe(responses, self._on_reply)
        await self.transport.subscribe(statuses, self._on_event)

    def topics(self, key: str) -> tuple[str, str]:
        """The (replyTo, a2aStatusTopic) of a call with ``key``."""
        if self.role == "agent":
            return (
                get_agent_response_topic(self.namespace, self.owner, key),
                get_peer_agent_status_topic(self.namespace, self.owner, key),
            )
        return (
            get_gateway_response_topic(self.namespace, self.owner, key),
            get_gateway_status_topic(self.namespace, self.owner, key),
        )

    @contextlib.contextmanager
    def open(self, key: str) -> Iterator[Call]:
        """Register a call under ``key`` (its topics' last level) for the duration of the block."""
        if key in self._calls:
            raise ValueError(f"a call with key {key!r} is already open")
        call = Call(key, *self.topics(key))
        self._calls[key] = call
        try:
            yield call
        finally:
            del self._calls[key]

    def cancel(self, agent: str, task_id: str, key: str) -> bool:
        """Ask ``agent`` to cancel ``task_id`` without waiting; False (logged) if it could not be sent.

        The answer comes back under ``key``, which no call has open, so the router drops it.
        """
        props = MessageProperties(
            client_id=self.owner,
            reply_to=self.topics(key)[0],
            correlation_data=key.encode(),
            content_type=JSON_CONTENT_TYPE,
            payload_format_utf8=True,
        )
        try:
            self.transport.publish_nowait(
                get_agent_request_topic(self.namespace, agent),
                request_bytes("tasks/cancel", key, TaskIdParams(id=task_id)),
                properties=props,
            )
        except (MeshError, ValueError) as exc:
            log.warning("%s: could not cancel task %s on %s: %s", self.owner, task_id, agent, exc)
            return False
        return True

    def _on_reply(self, message: InboundMessage) -> None:
        self._route(message, "reply")

    def _on_event(self, message: InboundMessage) -> None:
        self._route(message, "event")

    def _route(self, message: InboundMessage, kind: Literal["event", "reply"]) -> None:
        call = self._calls.get(message.topic.rsplit("/", 1)[-1])
        if call is not None:  # late answers to finished calls are dropped
            call._inbox.put_nowait((kind, message.payload))
