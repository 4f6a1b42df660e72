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

Presence heals itself (DESIGN, "Trust"): a component watches its own card topic and, when
something else replaced or cleared its card (an empty retained message from anyone who may
publish there, a forged card), publishes its own again at once, at most twice a second so two
processes claiming one name cannot spin; each heal is counted (``mesh_cards_healed_total``)
and logged at most once a minute (:class:`CardHealer`). Replicas, whose shared card each of
them publishes, leave that to the broker. An agent's EMQX profile card heals the same way
(:mod:`agents.profile`; each replica there has a card of its own).

A component also answers the discovery roll call (:mod:`mesh.discovery.rollcall`): what makes a watcher on
another node of a cluster, where retained cards may not reach, see it.

A component clears only a card it published itself: one that failed to start leaves the card
of a live instance of its name alone (see :mod:`mesh.discovery.ownership`, which keeps a second instance
from starting at all).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

from mesh.background import BackgroundTasks
from mesh.discovery.rollcall import RollCallAnswers
from mesh.errors import TransportError
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.transport import InboundMessage, Transport, Will

log = logging.getLogger(__name__)

#: A heal waits this long after the previous one: two claimants of a topic cannot spin.
HEAL_INTERVAL_S = 0.5
#: One log line per this many seconds, however many heals.
HEAL_LOG_INTERVAL_S = 60.0


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
        heal: bool | None = None,
        on_heal: Callable[[], None] | None = None,
    ) -> None:
        """``heartbeat_topic`` (SAM's bare card topic) turns the heartbeat on; ``extra_topics``
        get the same retained card (a replica's instance card). ``heal`` (default: unless a
        replica) republishes the card when anything else replaced or cleared it, calling
        ``on_heal`` each time (a metric)."""
        self.transport = transport
        self.card_topic = card_topic
        self._topics = (card_topic, *extra_topics)
        self._card = card
        self.heartbeat_topic = heartbeat_topic
        self.heartbeat_interval_s = heartbeat_interval_s
        self._task: asyncio.Task[None] | None = None
        self._stopped = False
        self.withdrawn = False
        self._published: set[str] = set()
        self.heal = not extra_topics if heal is None else heal
        self._last_card: bytes | None = None
        self.healer = CardHealer(card_topic, lambda: self.publish((card_topic,)), on_heal=on_heal)
        self.rollcall = RollCallAnswers(transport, card_topic, lambda: self.publish((card_topic,)))

    async def start(self) -> None:
        """Publish the card now (raising if the broker refuses it), then after every reconnect,
        when another replaced it and in answer to roll calls."""
        if self.heal:
            # Before publishing, and without our own messages (no_local): what arrives is someone
            # else's, and our own card does not come back to us (at a start of 1,000 agents, a
            # thousand deliveries and acknowledgements saved).
            await self.transport.subscribe(self.card_topic, self._seen, no_local=True)
        await self.publish()
        self.transport.add_connect_listener(self._on_reconnect)
        await self.rollcall.start()
        if self.heartbeat_topic is not None:
            self._task = asyncio.get_running_loop().create_task(self._heartbeat(self.heartbeat_topic))

    async def withdraw(self) -> None:
        """Take the card off the mesh while the component keeps running (a remote agent that
        stopped answering): cleared now, and not republished (reconnects, roll calls, heals)
        until :meth:`restore`."""
        self.withdrawn = True
        if not self.transport.is_connected:  # before the start: the card is simply not published
            return
        for topic in self._topics:
            await self.transport.publish(topic, b"", retain=True)

    async def restore(self) -> None:
        """Publish the card again after :meth:`withdraw` (or because it changed)."""
        self.withdrawn = False
        await self.publish()

    async def publish(self, topics: tuple[str, ...] | None = None) -> None:
        """Publish the card (again): at start, after a reconnect, and when it changed."""
        if self.withdrawn:
            return
        props = MessageProperties(content_type=JSON_CONTENT_TYPE, payload_format_utf8=True)
        card = self._card()
        self._last_card = card
        for topic in topics or self._topics:
            self._published.add(topic)  # from the moment it is handed over, the card there may be ours
            await self.transport.publish(topic, card, retain=True, properties=props)

    async def stop(self, *, keep: tuple[str, ...] = ()) -> None:
        """Stop and clear (an empty retained message) the cards we published, but those in ``keep``."""
        self._stopped = True
        self.healer.stop()
        await self.rollcall.stop()
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

    @property
    def heals(self) -> int:
        """How many times the card was republished because another connection replaced or cleared it."""
        return self.healer.heals

    # ------------------------------------------------------------------ healing

    def _seen(self, message: InboundMessage) -> None:
        """What the broker holds on our card topic: ours, or something to replace at once."""
        if self._stopped or self.withdrawn or self._last_card is None or message.payload == self._last_card:
            return
        self.healer.schedule(cleared=not message.payload)


class CardHealer:
    """Republishes a card another connection replaced or cleared on its retained topic: at once,
    but at most once per :data:`HEAL_INTERVAL_S` (two claimants of a topic cannot spin), each heal
    counted (``on_heal``) and logged at most once per :data:`HEAL_LOG_INTERVAL_S`.

    Its owner decides what is foreign (:meth:`schedule`); the SAM card's (:class:`CardPresence`)
    and the EMQX profile's (:mod:`agents.profile`) heal alike.
    """

    def __init__(
        self, topic: str, republish: Callable[[], Awaitable[None]], *, on_heal: Callable[[], None] | None = None
    ) -> None:
        self.topic = topic
        self._republish_card = republish
        self.on_heal = on_heal
        self._healing: asyncio.TimerHandle | None = None
        self._healed_at = 0.0
        self._logged_at = -HEAL_LOG_INTERVAL_S
        self._unlogged = 0
        self._stopped = False
        self.heals = 0
        self._republishing = BackgroundTasks(log, f"card healer of {topic}")

    @property
    def pending(self) -> bool:
        """Whether a heal is scheduled or its republish under way."""
        return self._healing is not None or len(self._republishing) > 0

    def schedule(self, *, cleared: bool) -> None:
        """Another connection's message is on the topic (``cleared``: an empty one): republish soon."""
        if self._stopped or self._healing is not None:
            return  # stopped, or a heal is already on its way
        wait = max(0.0, self._healed_at + HEAL_INTERVAL_S - time.monotonic())
        self._healing = asyncio.get_running_loop().call_later(wait, self._heal, cleared)

    def stop(self) -> None:
        """No more heals (the component stops; what it publishes now is its own last word)."""
        self._stopped = True
        if self._healing is not None:
            self._healing.cancel()
            self._healing = None

    def _heal(self, cleared: bool) -> None:
        self._healing = None
        if self._stopped:
            return
        self._healed_at = time.monotonic()
        self.heals += 1
        if self.on_heal is not None:
            self.on_heal()
        self._unlogged += 1
        now = time.monotonic()
        if now - self._logged_at >= HEAL_LOG_INTERVAL_S:
            log.warning(
                "the card on %s was %s by another connection; republished it (%d time(s) since the last such line)",
                self.topic,
                "cleared" if cleared else "replaced",
                self._unlogged,
            )
            self._logged_at, self._unlogged = now, 0
        self._republishing.spawn(self._republish(), name="republish card")

    async def _republish(self) -> None:
        try:
            await self._republish_card()
        except TransportError as exc:
            log.warning("card republish on %s failed: %s", self.topic, exc)
