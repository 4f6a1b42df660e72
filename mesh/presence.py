"""Presence on the discovery topics (DESIGN, "Discovery and presence").

A component publishes its card retained on its card topic when it starts and every
``interval`` seconds, with a Message Expiry of a few intervals, so a card whose owner vanished
without a trace still disappears from the broker. Its MQTT will is an empty retained message
on the same topic ("gone"), which the broker sends if the connection dies; a clean shutdown
publishes the same. After a reconnect the card is published at once: a restarted broker
without persistence has forgotten it.

A component clears only a card it published itself: one that failed to start leaves the card
of a live instance of its name alone (see :mod:`mesh.ownership`, which keeps a second instance
from starting at all).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from mesh.errors import TransportError
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.transport import Transport, Will

log = logging.getLogger(__name__)


def presence_will(card_topic: str) -> Will:
    """The will that clears ``card_topic`` when the connection dies without DISCONNECT."""
    return Will(topic=card_topic, payload=b"", qos=1, retain=True)


class CardPresence:
    """Keeps one card published on its retained topic while the component runs."""

    def __init__(
        self,
        transport: Transport,
        card_topic: str,
        card: Callable[[], bytes],
        *,
        interval_s: float = 10.0,
        expiry_intervals: int = 3,
    ) -> None:
        self.transport = transport
        self.card_topic = card_topic
        self._card = card
        self.interval_s = interval_s
        self._expiry_s = max(1, round(interval_s * expiry_intervals))
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._published = False

    async def start(self) -> None:
        """Publish the card now (raising if the broker refuses it), then keep it fresh."""
        await self.publish()
        self.transport.add_connect_listener(self._on_reconnect)
        self._task = asyncio.get_running_loop().create_task(self._refresh())

    async def publish(self) -> None:
        self._published = True  # from the moment it is handed over, the card on the broker may be ours
        props = MessageProperties(
            content_type=JSON_CONTENT_TYPE, payload_format_utf8=True, message_expiry_s=self._expiry_s
        )
        await self.transport.publish(self.card_topic, self._card(), retain=True, properties=props)

    async def stop(self) -> None:
        """Stop refreshing and clear the retained card (an empty retained message) if we published it."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._published and self.transport.is_connected:
            try:
                await self.transport.publish(self.card_topic, b"", retain=True, timeout=5)
            except TransportError as exc:
                log.warning("could not clear the card on %s: %s", self.card_topic, exc)

    async def _refresh(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await self.publish()
            except TransportError as exc:
                log.warning("card refresh on %s failed: %s", self.card_topic, exc)

    async def _on_reconnect(self, _session_present: bool) -> None:
        if self._stopped:
            return
        try:
            await self.publish()
        except TransportError as exc:
            log.warning("card republish on %s after reconnect failed: %s", self.card_topic, exc)
