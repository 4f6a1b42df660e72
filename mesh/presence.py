"""Presence on the discovery topics (DESIGN, "Discovery and presence").

A component publishes its card retained on its card topic when it starts, after every
reconnect (a restarted broker without persistence has forgotten it) and when the card
changes (:meth:`CardPresence.publish`); never periodically: an idle mesh sends nothing on the
discovery topics, so discovery costs O(changes), not O(agents x watchers / interval). The card
carries no Message Expiry: liveness is the broker's job. The component's MQTT will is an empty
retained message on the same topic ("gone"), which the broker sends when the connection dies or
stops answering keepalive (a frozen process leaves within 1.5 x keepalive); a clean shutdown
publishes the same.

For meshes shared with SAM agents, an optional heartbeat publishes the card, not retained, on
SAM's bare ``.../discovery/agentcards`` topic every interval; registries apply a TTL to those
cards only.

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
        heartbeat_topic: str | None = None,
        heartbeat_interval_s: float = 10.0,
        extra_topics: tuple[str, ...] = (),
    ) -> None:
        """``heartbeat_topic`` (SAM's bare card topic) turns the heartbeat on; ``extra_topics``
        get the same retained card (a replica's instance card)."""
        self.transport = transport
        self.card_topic = card_topic
        self._topics = (card_topic, *extra_topics)
        self._card = card
        self.heartbeat_topic = heartbeat_topic
        self.heartbeat_interval_s = heartbeat_interval_s
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self._published: set[str] = set()

    async def start(self) -> None:
        """Publish the card now (raising if the broker refuses it), then after every reconnect."""
        await self.publish()
        self.transport.add_connect_listener(self._on_reconnect)
        if self.heartbeat_topic is not None:
            self._task = asyncio.get_running_loop().create_task(self._heartbeat(self.heartbeat_topic))

    async def publish(self, topics: tuple[str, ...] | None = None) -> None:
        """Publish the card (again): at start, after a reconnect, and when it changed."""
        props = MessageProperties(content_type=JSON_CONTENT_TYPE, payload_format_utf8=True)
        card = self._card()
        for topic in topics or self._topics:
            self._published.add(topic)  # from the moment it is handed over, the card there may be ours
            await self.transport.publish(topic, card, retain=True, properties=props)

    async def stop(self, *, keep: tuple[str, ...] = ()) -> None:
        """Stop and clear (an empty retained message) the cards we published, but those in ``keep``."""
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if not self.transport.is_connected:
            return
        for topic in reversed(self._topics):
            if topic not in self._published or topic in keep:
                continue
            try:
                await self.transport.publish(topic, b"", retain=True, timeout=5)
            except TransportError as exc:
                log.warning("could not clear the card on %s: %s", topic, exc)

    async def _heartbeat(self, topic: str) -> None:
        props = MessageProperties(content_type=JSON_CONTENT_TYPE, payload_format_utf8=True)
        while True:
            try:
                await self.transport.publish(topic, self._card(), properties=props)
            except TransportError as exc:
                log.warning("SAM heartbeat on %s failed: %s", topic, exc)
            await asyncio.sleep(self.heartbeat_interval_s)

    async def _on_reconnect(self, _session_present: bool) -> None:
        if self._stopped:
            return
        try:
            await self.publish()
        except TransportError as exc:
            log.warning("card republish on %s after reconnect failed: %s", self.card_topic, exc)
