"""Request/reply over any :class:`~mesh.transport.base.Transport`: Response Topic + Correlation Data.

A request carries ``reply_to`` = this connection's reply topic and Correlation Data = a key of
its own; the reply carrying the same Correlation Data resolves the request's future. Kept for
the callers that still use ``transport.request``; the mesh's own calls go through
:mod:`mesh.calls`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid

from mesh.errors import NotConnectedError, RequestTimeoutError, TransportError
from mesh.properties import MessageProperties
from mesh.transport.base import InboundMessage, Subscription, Transport

__all__ = ["RequestReply"]

log = logging.getLogger(__name__)


class RequestReply:
    """The requests of one transport waiting for their replies on ``reply_topic``."""

    def __init__(self, transport: Transport, reply_topic: str | None) -> None:
        self._transport = transport
        self.reply_topic = reply_topic
        self._replies: dict[bytes, asyncio.Future[InboundMessage]] = {}
        self._subscription: asyncio.Task[Subscription] | None = None

    async def request(
        self,
        topic: str,
        payload: bytes | str,
        *,
        timeout: float,
        properties: MessageProperties | None = None,
        correlation_id: str | None = None,
    ) -> InboundMessage:
        """Publish a request and return the reply carrying the same Correlation Data.

        Raises :class:`RequestTimeoutError` when no reply arrives in ``timeout`` seconds,
        or the broker's refusal of the request as a :class:`PublishError`.
        """
        correlation = (correlation_id or uuid.uuid4().hex).encode()
        reply = await self.open_request(
            topic, payload, properties=properties, correlation=correlation, expiry_s=timeout
        )
        try:
            return await asyncio.wait_for(reply, timeout)
        except TimeoutError:
            raise RequestTimeoutError(
                f"no reply to request {correlation.decode()!r} sent to {topic!r} within {timeout:g} s"
            ) from None
        finally:
            self.close_request(correlation)

    async def open_request(
        self,
        topic: str,
        payload: bytes | str,
        *,
        correlation: bytes,
        properties: MessageProperties | None = None,
        expiry_s: float | None = None,
    ) -> asyncio.Future[InboundMessage]:
        """Send a request and return the future of its reply, for callers that wait their own way.

        The future also fails with the broker's refusal of the request. Always call
        :meth:`close_request` when done with it.
        """
        if self.reply_topic is None:
            raise TransportError("request() needs a reply_topic; pass reply_topic= to the transport")
        await self._ensure_subscription()
        if correlation in self._replies:
            raise ValueError(f"a request with correlation id {correlation!r} is already waiting")
        props = dataclasses.replace(properties) if properties is not None else MessageProperties()
        props.reply_to = self.reply_topic
        props.correlation_data = correlation
        if props.message_expiry_s is None and expiry_s is not None:
            props.message_expiry_s = max(1, int(expiry_s + 0.999))
        reply: asyncio.Future[InboundMessage] = asyncio.get_running_loop().create_future()
        self._replies[correlation] = reply
        try:
            ack = self._transport.publish_nowait(topic, payload, properties=props)
        except BaseException:
            self._replies.pop(correlation, None)
            raise
        ack.add_done_callback(lambda done: _fail_with(reply, done))
        return reply

    def close_request(self, correlation: bytes) -> None:
        """Forget a request: a reply arriving later is ignored."""
        self._replies.pop(correlation, None)

    def fail_all(self, error: NotConnectedError) -> None:
        """The transport closed: fail every request still waiting."""
        for reply in self._replies.values():
            if not reply.done():
                reply.set_exception(error)
                reply.exception()  # nobody may be waiting; do not warn about it
        self._replies.clear()

    async def _ensure_subscription(self) -> None:
        if self._subscription is None:
            assert self.reply_topic is not None
            self._subscription = asyncio.ensure_future(self._transport.subscribe(self.reply_topic, self._on_reply))
        try:
            await asyncio.shield(self._subscription)
        except Exception:
            self._subscription = None
            raise

    def _on_reply(self, message: InboundMessage) -> None:
        correlation = message.properties.correlation_data
        future = self._replies.get(correlation) if correlation is not None else None
        if future is None:
            log.debug("reply on %s matches no waiting request (late or foreign)", message.topic)
        elif not future.done():
            future.set_result(message)


def _fail_with(reply: asyncio.Future[InboundMessage], ack: asyncio.Future[None]) -> None:
    if reply.done() or ack.cancelled():
        return
    error = ack.exception()
    if error is not None:
        reply.set_exception(error)
