"""The discovery roll call (DESIGN, "Discovery and presence").

Retained cards are the fast path, not the only one: some clustered brokers (ejabberd) deliver a
retained message only to subscribers on the node that received it. So a registry that starts
(or reconnects) publishes ``{ns}/a2a/v1/discovery/rollcall`` with the window it wants answers in
(``{"windowMs": N}``, bounded), and every live component answers by publishing its card again on
its own card topic (:class:`RollCallAnswers`), after a random delay within the window so
thousands of agents do not answer in the same millisecond, and at most once per window however
many roll calls come: what roll calls can cost the broker is bounded by the number of components.
An answer leaves at least :data:`ROLLCALL_MIN_DELAY_S` after the roll call it answers arrived
(an answer already due sooner, for an earlier roll call, is put off; one already on its way is
followed by another): the watcher subscribed just before it called, and on a cluster a
subscription made on one node may reach the others a moment after its SUBACK (seen on ejabberd:
an answer published at once was lost to the watcher on the other node, rarely).

The components of one process on one broker that share a broker identity (or use none) hear
the roll calls of a namespace once: a connection of their own (that identity, a random client
id, no will, no session) subscribes to the roll-call topic while any of them runs and hands each roll call to all of
them, and each answers on its own connection (:class:`_Hearing`). A ``mesh run`` of 5,000 agents
thus costs the broker one roll-call delivery, not 5,000, and a SUBSCRIBE per agent less at start.
Components with a broker password of their own (per-component identities, whose client ids the
generated rules bind) and components on other transports (in memory, or injected) subscribe each.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
from collections.abc import Callable, Coroutine
from typing import Any

from mesh.broker import BrokerSettings
from mesh.errors import TransportError
from mesh.transport import InboundMessage, MqttTransport, Subscription, Transport
from topics import get_discovery_rollcall_topic

__all__ = [
    "ROLLCALL_MAX_WINDOW_S",
    "ROLLCALL_MIN_DELAY_S",
    "ROLLCALL_WINDOW_S",
    "RollCallAnswers",
    "rollcall_payload",
    "rollcall_topic_of",
    "rollcall_window",
]

log = logging.getLogger(__name__)

#: Answers to a roll call are spread at random over this many seconds, unless the roll call asks
#: for another window, which is kept within [0.05 s, ROLLCALL_MAX_WINDOW_S].
ROLLCALL_WINDOW_S = 1.0
ROLLCALL_MAX_WINDOW_S = 5.0
#: The least time between a roll call's arrival and its answer (see the module doc).
ROLLCALL_MIN_DELAY_S = 0.05


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
    return float(min(max(asked / 1000, 0.05), ROLLCALL_MAX_WINDOW_S))


def rollcall_topic_of(card_topic: str) -> str:
    """The roll-call topic of the namespace a card topic (``{ns}/a2a/v1/discovery/...``) lies in."""
    namespace, found, _ = card_topic.rpartition("/a2a/v1/discovery/")
    if not found:
        raise ValueError(f"{card_topic!r} is not a card topic ({{ns}}/a2a/v1/discovery/...)")
    return get_discovery_rollcall_topic(namespace)


class RollCallAnswers:
    """Answers the roll calls of one namespace by calling ``republish`` (the card, again)."""

    def __init__(
        self, transport: Transport, card_topic: str, republish: Callable[[], Coroutine[Any, Any, None]]
    ) -> None:
        self.transport = transport
        self.topic = rollcall_topic_of(card_topic)
        self.card_topic = card_topic
        self._republish = republish
        self._subscription: Subscription | None = None
        self._hearing: _Hearing | None = None  # where it hears roll calls, on an MQTT transport
        self._answer: asyncio.TimerHandle | asyncio.Task[None] | None = None  # the pending answer
        self._again = False  # a roll call came while the answer was being published: answer again
        self._stopped = False
        #: Roll calls answered (each by one publish of the card).
        self.answered = 0

    async def start(self) -> None:
        # A component with a broker identity of its own may connect only under its own client id
        # (the generated rules bind them): it hears roll calls on its own connection.
        if isinstance(self.transport, MqttTransport) and not self.transport.settings.password:
            hearing = _hearing_of(self.transport, self.topic)
            await hearing.join(self)
            self._hearing = hearing
        else:
            self._subscription = await self.transport.subscribe(self.topic, self._on_rollcall)

    async def stop(self) -> None:
        self._stopped = True
        if self._answer is not None:
            self._answer.cancel()
        if self._subscription is not None and self.transport.is_connected:
            await self.transport.unsubscribe(self._subscription)
        if self._hearing is not None:
            hearing, self._hearing = self._hearing, None
            await hearing.leave(self)

    def _on_rollcall(self, message: InboundMessage) -> None:
        if self._stopped:
            return
        loop = asyncio.get_running_loop()
        window = rollcall_window(message.payload)
        pending = self._answer
        if isinstance(pending, asyncio.Task):  # being published: it may reach this caller too soon
            self._again = True
            return
        if pending is not None:  # one answer per window, however many calls, if not too soon
            if pending.when() >= loop.time() + ROLLCALL_MIN_DELAY_S:
                return
            pending.cancel()
        self._schedule(window)

    def _schedule(self, window_s: float) -> None:
        delay = random.uniform(min(ROLLCALL_MIN_DELAY_S, window_s), window_s)  # noqa: S311 - jitter, not a secret
        self._answer = asyncio.get_running_loop().call_later(delay, self._answer_now)

    def _answer_now(self) -> None:
        self._answer = task = asyncio.get_running_loop().create_task(self._republish())
        task.add_done_callback(self._answered)

    def _answered(self, task: asyncio.Task[None]) -> None:
        self._answer = None
        if self._again and not self._stopped and not task.cancelled():
            self._again = False
            self._schedule(ROLLCALL_MIN_DELAY_S)  # for the roll call that came meanwhile
        if task.cancelled():
            return
        if (exc := task.exception()) is not None:
            if isinstance(exc, TransportError):
                log.warning("card republish on %s for a roll call failed: %s", self.card_topic, exc)
            else:
                log.error("card republish on %s for a roll call failed", self.card_topic, exc_info=exc)
        else:
            self.answered += 1


class _Hearing:
    """The roll calls of one namespace on one broker, heard for every member of this process
    (event loop) on a connection of their own; see the module doc."""

    def __init__(self, key: tuple[asyncio.AbstractEventLoop, str, str], settings: BrokerSettings) -> None:
        self.key = key
        self.topic = key[2]
        self.members: dict[RollCallAnswers, None] = {}
        # Its own connection: no member's stop ends it, and its session ends with it.
        self.transport = MqttTransport(dataclasses.replace(settings, session_expiry_s=0))
        self._ready: asyncio.Future[None] | None = None  # connected and subscribed

    async def join(self, member: RollCallAnswers) -> None:
        """Hear roll calls for ``member`` from the moment this returns (raising as a subscribe would)."""
        self.members[member] = None
        try:
            if self._ready is None:
                self._ready = asyncio.ensure_future(self._listen())
            await asyncio.shield(self._ready)
        except BaseException:
            await self.leave(member)
            raise

    async def _listen(self) -> None:
        await self.transport.connect()
        await self.transport.subscribe(self.topic, self._on_rollcall)

    async def leave(self, member: RollCallAnswers) -> None:
        self.members.pop(member, None)
        if self.members or _hearings.get(self.key) is not self:
            return
        del _hearings[self.key]  # the next member to start opens another
        if self._ready is not None:
            self._ready.cancel()
        await self.transport.close()

    def _on_rollcall(self, message: InboundMessage) -> None:
        for member in list(self.members):
            member._on_rollcall(message)


#: By (loop, broker URL, roll-call topic).
_hearings: dict[tuple[asyncio.AbstractEventLoop, str, str], _Hearing] = {}


def _hearing_of(transport: MqttTransport, topic: str) -> _Hearing:
    key = (asyncio.get_running_loop(), transport.url, topic)
    hearing = _hearings.get(key)
    if hearing is None:
        hearing = _hearings[key] = _Hearing(key, transport.settings)
    return hearing
