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

Retained cards are the fast path, not the only one: some clustered brokers (ejabberd) deliver a
retained message only to subscribers on the node that received it. So a component also answers
the **roll call** (``{ns}/a2a/v1/discovery/rollcall``) a registry holds when it starts: it
publishes its card again after a random delay within :data:`ROLLCALL_WINDOW_S`, so thousands of
agents do not answer in the same millisecond, and at most once per window however many roll
calls come (what one roll call can cost the broker is bounded by the number of components).

A component clears only a card it published itself: one that failed to start leaves the card
of a live instance of its name alone (see :mod:`mesh.ownership`, which keeps a second instance
from starting at all).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import Callable

from mesh.errors import TransportError
from mesh.properties import JSON_CONTENT_TYPE, MessageProperties
from mesh.transport import InboundMessage, Subscription, Transport, Will
from topics import get_discovery_rollcall_topic

log = logging.getLogger(__name__)

#: Answers to a roll call are spread at random over this many seconds, unless the roll call asks
#: for another window (``{"windowMs": N}``), which is kept within [0.05 s, ROLLCALL_MAX_WINDOW_S].
ROLLCALL_WINDOW_S = 1.0
ROLLCALL_MAX_WINDOW_S = 5.0


def rollcall_payload(window_s: float) -> bytes:
    """A roll call asking for answers spread over ``window_s``."""
    return json.dumps({"windowMs": round(window_s * 1000)}).encode()


def rollcall_window(payload: bytes) -> float:
    """The window a roll call asks for, bounded; the default for anything malformed."""
    try:
        asked = json.loads(payload).get("windowMs")
    except (ValueError, AttributeError, RecursionError):
        return ROLLCALL_WINDOW_S
    if not isinstance(asked, int | float) or isinstance(asked, bool) or asked != asked:  # NaN
        return ROLLCALL_WINDOW_S
    return min(max(asked / 1000, 0.05), ROLLCALL_MAX_WINDOW_S)


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
        self.rollcall_topic = rollcall_topic_of(card_topic)
        self._rollcall: Subscription | None = None
        self._answer: asyncio.TimerHandle | asyncio.Task[None] | None = None  # the pending roll-call answer
        #: Roll calls answered (each by one publish of the card).
        self.rollcalls_answered = 0

    async def start(self) -> None:
        """Publish the card now (raising if the broker refuses it), then after every reconnect
        and in answer to roll calls."""
        await self.publish()
        self.transport.add_connect_listener(self._on_reconnect)
        self._rollcall = await self.transport.subscribe(self.rollcall_topic, self._on_rollcall)
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
        if self._answer is not None:
            self._answer.cancel()
        if self._rollcall is not None and self.transport.is_connected:
            await self.transport.unsubscribe(self._rollcall)
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

    def _on_rollcall(self, message: InboundMessage) -> None:
        if self._stopped or self._answer is not None:  # one answer per window, however many calls
            return
        delay = random.uniform(0, rollcall_window(message.payload))  # noqa: S311 - jitter, not a secret
        self._answer = asyncio.get_running_loop().call_later(delay, self._answer_rollcall)

    def _answer_rollcall(self) -> None:
        self._answer = task = asyncio.get_running_loop().create_task(self.publish((self.card_topic,)))
        task.add_done_callback(self._answered)

    def _answered(self, task: asyncio.Task[None]) -> None:
        self._answer = None
        if task.cancelled():
            return
        if (exc := task.exception()) is not None:
            log.warning("card republish on %s for a roll call failed: %s", self.card_topic, exc)
        else:
            self.rollcalls_answered += 1


def rollcall_topic_of(card_topic: str) -> str:
    """The roll-call topic of the namespace a card topic (``{ns}/a2a/v1/discovery/...``) lies in."""
    namespace, found, _ = card_topic.rpartition("/a2a/v1/discovery/")
    if not found:
        raise ValueError(f"{card_topic!r} is not a card topic ({{ns}}/a2a/v1/discovery/...)")
    return get_discovery_rollcall_topic(namespace)
