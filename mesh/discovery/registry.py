"""Who is on the mesh: agent and gateway cards from the discovery topics.

The registry subscribes to ``{ns}/a2a/v1/discovery/#`` and keeps, per name, the latest card
and when it was last seen:

- a card on ``.../agentcards/{name}`` or ``.../gatewaycards/{name}`` (retained, published by
  its owner at start, on reconnect and on change) adds or updates an entry; SAM-style
  heartbeats on the bare ``.../discovery/agentcards`` topic are accepted too, named by the card;
- an empty payload on a card topic (the owner's will, or its clean shutdown) removes it;
- an entry known only from heartbeats and not seen for ``ttl_s`` is removed (a SAM agent
  that stopped); retained cards have no TTL: their owner's will removes them;
- allow / deny fnmatch patterns decide which names are kept at all.

A card is accepted only on the topic of its own name, and only with a valid identifier as
its name (a heartbeat on the bare topic: its name must be one). With a
:class:`~mesh.trust.CardVerifier` (a trust store), a card must also carry a signature by the
trusted key of its own name, and bare-topic heartbeats are refused (they name no owner a
broker ACL could check). A refused card leaves the entry already held for its name alone, and
is logged once per name (until that name is accepted again).

Trust is live when the verifier's keys come from a file: :mod:`mesh.discovery.cardtrust`.

Replicas of an agent also publish ``.../agentcards/{agent}/{instance}`` (retained, cleared by
each replica's will): the registry keeps the live instances per agent, tells instance
listeners when one comes or goes, and removes an agent whose last instance card went away.

Changes are reported as :class:`RegistryEvent`\\ s (added / updated / removed) to listeners
and to :meth:`DiscoveryRegistry.events` iterators.

The other dialect: the registry also watches the EMQX profile's cards (:mod:`mesh.discovery.cards`).
One agent serving both dialects is one entry (:mod:`mesh.discovery.merging`).
What it holds is in :mod:`mesh.discovery.entries`; what it refused in :mod:`mesh.discovery.refusals`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Literal

from mesh.a2a import AgentCard
from mesh.background import cancel_and_wait
from mesh.discovery.cards import card_problem, read_card, read_profile_card
from mesh.discovery.cardtrust import Admit, CardTrust, StillRefused
from mesh.discovery.entries import (
    GATEWAY_ROLE_EXTENSION,
    Entry,
    EventType,
    Kind,
    RegistryEvent,
    is_gateway_card,
    name_allowed,
)
from mesh.discovery.fanout import Fanout, LiveInstances
from mesh.discovery.merging import DialectMerger
from mesh.discovery.refusals import (
    BAD_CARD_LOG_INTERVAL_S,
    MAX_HELD_BYTES,
    MAX_HELD_CARDS,
    RefusalListener,
    Refusals,
)
from mesh.discovery.rollcall import ROLLCALL_WINDOW_S
from mesh.discovery.settling import SETTLE_QUIET_S, RollCaller
from mesh.errors import AgentNotFoundError, SubscribeError
from mesh.profile.emqx import DialectClaim, dialect_claim
from mesh.transport import InboundMessage, Subscription, Transport
from topics import (
    get_discovery_subscription_topic,
    parse_discovery_topic,
    parse_instance_card_topic,
    parse_profile_discovery_topic,
    profile_discovery_filter,
    validate_identifier,
)

if TYPE_CHECKING:
    from mesh.trust import CardVerifier

__all__ = [
    "BAD_CARD_LOG_INTERVAL_S",
    "GATEWAY_ROLE_EXTENSION",
    "MAX_HELD_BYTES",
    "MAX_HELD_CARDS",
    "SETTLE_QUIET_S",
    "DiscoveryRegistry",
    "Entry",
    "EventType",
    "InstanceListener",
    "Kind",
    "Listener",
    "RefusalListener",
    "RegistryEvent",
    "is_gateway_card",
    "name_allowed",
]

log = logging.getLogger(__name__)


Listener = Callable[[RegistryEvent], None]
#: ``listener(agent, instance, present)``: a replica's card came (True) or went (False).
InstanceListener = Callable[[str, str, bool], None]


class DiscoveryRegistry:
    """Agent and gateway cards of one namespace, kept fresh from the broker."""

    def __init__(
        self,
        transport: Transport,
        namespace: str,
        *,
        ttl_s: float = 60.0,
        allow: Iterable[str] = ("*",),
        deny: Iterable[str] = (),
        raw_listener: Callable[[InboundMessage], None] | None = None,
        verifier: CardVerifier | None = None,
        rollcall: bool = True,
        rollcall_window_s: float = ROLLCALL_WINDOW_S,
        one_node: bool = False,
    ) -> None:
        """``verifier``: accept only cards signed by a trusted key (see the module docstring); with
        keys from a file, the registry follows the file until :meth:`stop`.

        ``rollcall``: ask who is there at start and after every reconnect (long-lived registries);
        without it a roll call is held only when :meth:`wait_for` misses a name (the CLI).
        ``one_node``: the broker is known to be a single node (the Mosquitto ``mesh up`` started),
        whose retained cards reach every subscriber: no roll call at all, so the cards are in as
        soon as the retained ones have arrived."""
        self.transport = transport
        self.namespace = namespace
        self.ttl_s = ttl_s
        self.allow = tuple(allow)
        self.deny = tuple(deny)
        self._raw_listener = raw_listener
        self.verifier = verifier
        self._refusals = Refusals(log)
        self._trust = CardTrust(verifier)
        self._held = self._trust.held
        self._trust_watch: asyncio.Task[None] | None = None
        self._entries: dict[tuple[Kind, str], Entry] = {}
        self._listeners: Fanout[[RegistryEvent]] = Fanout("registry listener", log)
        self._instances = LiveInstances(log)
        self._merger = DialectMerger(namespace, self._entries, self.instances, self._emit)
        self._changed = asyncio.Event()
        self._subscription: Subscription | None = None
        self._profile_subscription: Subscription | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self.rollcall = rollcall and not one_node
        self.one_node = one_node
        self._rollcaller = RollCaller(transport, namespace, rollcall_window_s)
        self._stopped = False

    @property
    def rejected(self) -> int:
        """Cards refused (wrong topic, bad name, bad or missing signature), counted."""
        return self._refusals.count

    @property
    def rollcalls_held(self) -> int:
        """Roll calls this registry held."""
        return self._rollcaller.held

    @property
    def refused(self) -> dict[str, tuple[Kind, str]]:
        """The cards refused, by name: (kind, why), the latest; bounded (a flood of made-up names)."""
        return self._refusals.by_name

    async def start(self) -> None:
        """Subscribe to the discovery topics; retained cards arrive right after."""
        self._subscription = await self.transport.subscribe(
            get_discovery_subscription_topic(self.namespace), self._on_message
        )
        try:  # a '#' never matches '$' topics: the profile's cards are a subscription of their own
            self._profile_subscription = await self.transport.subscribe(
                profile_discovery_filter(), self._on_profile_card
            )
        except SubscribeError as exc:
            log.warning("not watching EMQX profile agents: the broker refused %s (%s)", profile_discovery_filter(), exc)
        self._rollcaller.arrived()
        if self.rollcall:
            await self.hold_rollcall()
            self.transport.add_connect_listener(self._on_reconnect)
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        if self.verifier is not None and self.verifier.live:
            watch = self._trust.watch(self._follow_trust, log, self.namespace)
            self._trust_watch = asyncio.get_running_loop().create_task(watch)

    async def stop(self) -> None:
        self._stopped = True
        for task in (self._sweeper, self._trust_watch):
            if task is not None:
                await cancel_and_wait(task)
        if self._subscription is not None and self.transport.is_connected:
            await self.transport.unsubscribe(self._subscription)
        if self._profile_subscription is not None and self.transport.is_connected:
            await self.transport.unsubscribe(self._profile_subscription)

    def agents(self) -> list[Entry]:
        """Every agent once: a mesh agent serving the profile too is one entry (its ``profile`` set)."""
        return sorted(
            (e for (kind, _), e in self._entries.items() if kind == "agent" and e.merged_into is None),
            key=lambda e: e.name,
        )

    def gateways(self) -> list[Entry]:
        return sorted((e for (kind, _), e in self._entries.items() if kind == "gateway"), key=lambda e: e.name)

    def get(self, name: str, kind: Kind = "agent") -> Entry | None:
        return self._entries.get((kind, name))

    def instances(self, name: str) -> list[str]:
        """The live replicas (instance ids) of agent ``name``; empty for an agent without replicas."""
        return self._instances.of(name)

    def add_instance_listener(self, listener: InstanceListener) -> None:
        """Call ``listener(agent, instance, present)`` when a replica's card comes or goes."""
        self._instances.listeners.add(listener)

    def remove_instance_listener(self, listener: InstanceListener) -> None:
        self._instances.listeners.remove(listener)

    def agent_names(self) -> list[str]:
        return [e.name for e in self.agents()]

    async def hold_rollcall(self, window_s: float | None = None) -> None:
        """Ask every live agent and gateway to publish its card again (:class:`RollCaller`)."""
        await self._rollcaller.hold(window_s)

    async def _on_reconnect(self, _session_present: bool) -> None:
        if not self._stopped:
            await self.hold_rollcall()

    async def settled(self, timeout: float) -> None:
        """Return once the cards are in (:class:`RollCaller`), or after ``timeout``."""
        await self._rollcaller.settled(timeout)

    async def wait_for(self, name: str, timeout: float, kind: Kind = "agent") -> Entry:
        """The entry once ``name`` is on the mesh; :class:`AgentNotFoundError` after ``timeout``, or as
        soon as the retained cards are in without it (an empty mesh is waited on: it may be starting)."""
        if "/" in name:  # an EMQX profile agent: org/unit/agent
            from mesh.profile.requester import profile_target

            profile_target(name)
        else:
            validate_identifier(name, f"{kind} name")
        started = time.monotonic()
        settle = asyncio.ensure_future(self.settled(timeout))
        try:
            async with asyncio.timeout(timeout):
                while (entry := self.get(name, kind)) is None:
                    if settle.done() and not self.rollcalls_held and not self.one_node:  # not retained: ask
                        await self.hold_rollcall()
                        settle = asyncio.ensure_future(self.settled(timeout))
                        continue
                    if settle.done() and self._entries:
                        break
                    self._changed.clear()
                    if (entry := self.get(name, kind)) is not None:
                        break
                    changed = asyncio.ensure_future(self._changed.wait())
                    await asyncio.wait({changed} if settle.done() else {changed, settle}, return_when="FIRST_COMPLETED")
                    changed.cancel()
        except TimeoutError:
            entry = None
        finally:
            settle.cancel()
        if entry is None:
            waited = round(time.monotonic() - started, 1)
            raise AgentNotFoundError(name, self.agent_names(), waited_s=waited, namespace=self.namespace)
        return entry

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(event)`` on every change (on the event loop; keep it short)."""
        self._listeners.add(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._listeners.remove(listener)

    def add_refusal_listener(self, listener: RefusalListener) -> None:
        """Call ``listener(name, kind, why)`` when a name's refusal is new or changes, and with
        ``why`` None when a good card of the name clears it (what a watcher shows as refused)."""
        self._refusals.add_listener(listener)

    def remove_refusal_listener(self, listener: RefusalListener) -> None:
        self._refusals.remove_listener(listener)

    async def events(self) -> AsyncIterator[RegistryEvent]:
        """Every change from now on, in order, until the iterator is closed."""
        queue: asyncio.Queue[RegistryEvent] = asyncio.Queue()
        self.add_listener(queue.put_nowait)
        try:
            while True:
                yield await queue.get()
        finally:
            self.remove_listener(queue.put_nowait)

    def _emit(self, event: RegistryEvent) -> None:
        self._changed.set()
        self._listeners(event)

    def allows(self, name: str) -> bool:
        return name_allowed(name, self.allow, self.deny)

    def _on_message(self, message: InboundMessage) -> None:
        self._rollcaller.arrived()
        if self._raw_listener is not None:
            self._raw_listener(message)
        parsed = parse_discovery_topic(self.namespace, message.topic)
        if parsed is None:
            self._on_instance_card(message)
            return
        self._follow_trust()  # keys another look found changed: what this card is checked against
        self._on_card(parsed.kind, parsed.name, message.topic, message.payload)
        self._follow_trust()  # this card's unknown kid may have read new keys that admit held cards

    def _on_card(self, kind: Kind, topic_name: str | None, topic: str, payload: bytes) -> None:
        """A card (or its clearing) on ``topic``, whose name is ``topic_name`` (None: a heartbeat)."""
        if topic_name is not None:
            self._held.release(topic_name)  # a name's latest card is the only one that may be admitted later
        if not payload:
            if topic_name is not None:
                self._remove(kind, topic_name, "gone")
            return
        read = read_card(payload, keep_data=self.verifier is not None)
        if isinstance(read, str):
            self._refuse(topic_name, kind, topic, read)
            return
        card, data = read
        name = topic_name or card.name
        held_as: Kind = "gateway" if kind == "agent" and is_gateway_card(card) else kind
        if (problem := card_problem(topic_name, card, trusted_only=self.verifier is not None)) is not None:
            self._refuse(name, kind, topic, problem)
            return
        if (problem := self._trust.check(kind, held_as, name, topic, payload, data)) is not None:
            self._refuse(name, kind, topic, problem)
            if isinstance(data, dict) and data.get("signatures"):  # signed: its key may yet come
                self._held.hold(name, topic, payload)
            return
        self._refusals.clear(name)
        if self.allows(name):
            self._upsert(held_as, name, card, on_own_topic=topic_name is not None)

    def _on_profile_card(self, message: InboundMessage) -> None:
        self._rollcaller.arrived()  # (the raw listener is the namespace's: the profile's are global)
        found = parse_profile_discovery_topic(message.topic)
        if found is None:
            return
        name = "/".join(found)
        status = message.properties.get_extra("a2a-status")
        if not message.payload or status == "offline":
            self._remove("agent", name, "offline" if message.payload else "gone")
            return
        if self.verifier is not None:
            self._refuse(
                name, "agent", message.topic, "with a trust store, unsigned EMQX profile cards are not accepted"
            )
            return
        read = read_profile_card(name, message.payload)
        if isinstance(read, str):
            self._refuse(name, "agent", message.topic, read)
        elif self.allows(name):
            self._upsert("agent", name, read[0], on_own_topic=True, dialect="emqx", claim=read[1])

    def _on_instance_card(self, message: InboundMessage) -> None:
        found = parse_instance_card_topic(self.namespace, message.topic)
        if found is None or not self.allows(found[0]):
            return
        agent, instance = found
        present = bool(message.payload)
        if not self._instances.update(agent, instance, present):
            return
        if self._merger.claimed(agent):
            self._merger.merge(agent)  # a pool member's profile entry is merged while its instance is live
        if not present and agent not in self._instances:
            self._remove("agent", agent, "gone")  # its last replica went: nobody serves the name

    def _follow_trust(self) -> None:
        """When the trusted keys changed: drop the cards they no longer vouch for, admit the held
        cards they now do (:meth:`CardTrust.changes`; one int compare when nothing changed)."""
        for change in self._trust.changes():
            if isinstance(change, Admit):
                parsed = parse_discovery_topic(self.namespace, change.topic)
                if parsed is not None:  # admitted as if it had just come
                    self._on_card(parsed.kind, parsed.name, change.topic, change.payload)
            elif isinstance(change, StillRefused):
                self._refusals.still_refused(change.name, change.why)
            else:
                self._remove(change.held_as, change.name, "untrusted")
                self._refuse(change.name, change.kind, change.topic, change.why)

    def _refuse(self, name: str | None, kind: Kind, topic: str, problem: str) -> None:
        self._refusals.refuse(name, kind, topic, problem)

    def _upsert(
        self,
        kind: Kind,
        name: str,
        card: AgentCard,
        *,
        on_own_topic: bool,
        dialect: Literal["sam", "emqx"] = "sam",
        claim: DialectClaim | None = None,
    ) -> None:
        now, monotonic = time.time(), time.monotonic()
        if dialect == "sam" and kind == "agent" and on_own_topic:
            claim = dialect_claim(card.capabilities.extensions)
        entry = self._entries.get((kind, name))
        if entry is None:
            entry = Entry(kind, name, card, now, now, monotonic, on_own_topic, dialect, claim)
            self._entries[(kind, name)] = entry
            self._merger.link(entry, None)
            self._emit(RegistryEvent("added", kind, name, card, now))
            return
        if entry.on_own_topic and not on_own_topic:
            # Anyone may send a heartbeat under any name; the card on the owner's topic wins.
            log.debug("ignored a heartbeat for %s: its card came on its own topic", name)
            return
        entry.on_own_topic = on_own_topic
        entry.last_seen, entry.seen_monotonic = now, monotonic
        before, entry.claim = entry.claim, claim
        if entry.card != card:
            entry.card = card
            self._emit(RegistryEvent("updated", kind, name, card, now))
        if claim != before:
            self._merger.link(entry, before)

    def _remove(self, kind: Kind, name: str, reason: str) -> None:
        entry = self._entries.pop((kind, name), None)
        self._trust.forget(kind, name)
        if entry is not None:
            merged = entry.merged_into is not None
            self._merger.link(entry, entry.claim)
            if not merged:  # a merged profile entry was never listed: its mesh entry says it left
                self._emit(RegistryEvent("removed", kind, name, entry.card, time.time(), reason))

    async def _sweep(self) -> None:
        # Often enough that an entry leaves within a quarter TTL of expiring (at least every 1 s).
        period = min(1.0, self.ttl_s / 4)
        while True:
            await asyncio.sleep(period)
            horizon = time.monotonic() - self.ttl_s
            for (kind, name), entry in list(self._entries.items()):
                # Only heartbeat-fed entries expire: a retained card leaves by its owner's will.
                if not entry.on_own_topic and entry.seen_monotonic < horizon:
                    self._remove(kind, name, "expired")
