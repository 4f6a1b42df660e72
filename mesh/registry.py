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

Replicas of an agent also publish ``.../agentcards/{agent}/{instance}`` (retained, cleared by
each replica's will): the registry keeps the live instances per agent, tells instance
listeners when one comes or goes, and removes an agent whose last instance card went away.

Changes are reported as :class:`RegistryEvent`\\ s (added / updated / removed) to listeners
and to :meth:`DiscoveryRegistry.events` iterators.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import ValidationError

from mesh.a2a import AgentCard
from mesh.errors import AgentNotFoundError
from mesh.timestamps import utc_iso
from mesh.transport import InboundMessage, Subscription, Transport
from topics import (
    get_discovery_subscription_topic,
    parse_discovery_topic,
    parse_instance_card_topic,
    validate_identifier,
)

log = logging.getLogger(__name__)

Kind = Literal["agent", "gateway"]
EventType = Literal["added", "updated", "removed"]
# SAM marks gateway cards with this extension (also when they come on the agent topics).
GATEWAY_ROLE_EXTENSION = "https://solace.com/a2a/extensions/sam/gateway-role"


@dataclass(slots=True)
class Entry:
    """A component on the mesh, as its card describes it."""

    kind: Kind
    name: str
    card: AgentCard
    first_seen: float  # wall-clock seconds
    last_seen: float  # wall-clock seconds
    _seen_monotonic: float = field(default=0.0, repr=False)
    # Known only from SAM heartbeats (no retained card): the only entries the TTL applies to.
    _heartbeat: bool = field(default=False, repr=False)


@dataclass(frozen=True, slots=True)
class RegistryEvent:
    """A change: ``reason`` says why an entry was removed (``gone``, ``expired``)."""

    type: EventType
    kind: Kind
    name: str
    card: AgentCard | None
    at: float
    reason: str | None = None

    def to_json_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "time": utc_iso(self.at, timespec="milliseconds"),
            "event": self.type,
            "kind": self.kind,
            "name": self.name,
        }
        if self.reason:
            data["reason"] = self.reason
        if self.card is not None:
            data["card"] = self.card.to_wire_dict()
        return data


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
    ) -> None:
        self.transport = transport
        self.namespace = namespace
        self.ttl_s = ttl_s
        self.allow = tuple(allow)
        self.deny = tuple(deny)
        self._raw_listener = raw_listener
        self._entries: dict[tuple[Kind, str], Entry] = {}
        self._listeners: list[Listener] = []
        self._instances: dict[str, set[str]] = {}
        self._instance_listeners: list[InstanceListener] = []
        self._changed = asyncio.Event()
        self._subscription: Subscription | None = None
        self._sweeper: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Subscribe to the discovery topics; retained cards arrive right after."""
        self._subscription = await self.transport.subscribe(
            get_discovery_subscription_topic(self.namespace), self._on_message
        )
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        if self._subscription is not None and self.transport.is_connected:
            await self.transport.unsubscribe(self._subscription)

    # ------------------------------------------------------------------ queries

    def agents(self) -> list[Entry]:
        return sorted((e for (kind, _), e in self._entries.items() if kind == "agent"), key=lambda e: e.name)

    def gateways(self) -> list[Entry]:
        return sorted((e for (kind, _), e in self._entries.items() if kind == "gateway"), key=lambda e: e.name)

    def get(self, name: str, kind: Kind = "agent") -> Entry | None:
        return self._entries.get((kind, name))

    def instances(self, name: str) -> list[str]:
        """The live replicas (instance ids) of agent ``name``; empty for an agent without replicas."""
        return sorted(self._instances.get(name, ()))

    def add_instance_listener(self, listener: InstanceListener) -> None:
        """Call ``listener(agent, instance, present)`` when a replica's card comes or goes."""
        self._instance_listeners.append(listener)

    def remove_instance_listener(self, listener: InstanceListener) -> None:
        with contextlib.suppress(ValueError):
            self._instance_listeners.remove(listener)

    def agent_names(self) -> list[str]:
        return [e.name for e in self.agents()]

    async def wait_for(self, name: str, timeout: float, kind: Kind = "agent") -> Entry:
        """The entry once ``name`` is on the mesh; :class:`AgentNotFoundError` after ``timeout``."""
        validate_identifier(name, f"{kind} name")
        try:
            async with asyncio.timeout(timeout):
                while (entry := self.get(name, kind)) is None:
                    self._changed.clear()
                    if (entry := self.get(name, kind)) is not None:
                        break
                    await self._changed.wait()
        except TimeoutError:
            raise AgentNotFoundError(name, self.agent_names(), waited_s=timeout, namespace=self.namespace) from None
        return entry

    # ------------------------------------------------------------------ events

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(event)`` on every change (on the event loop; keep it short)."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

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
        for listener in tuple(self._listeners):
            try:
                listener(event)
            except Exception:
                log.exception("registry listener %r failed", listener)

    # ------------------------------------------------------------------ messages

    def allows(self, name: str) -> bool:
        return name_allowed(name, self.allow, self.deny)

    def _on_message(self, message: InboundMessage) -> None:
        if self._raw_listener is not None:
            self._raw_listener(message)
        parsed = parse_discovery_topic(self.namespace, message.topic)
        if parsed is None:
            self._on_instance_card(message)
            return
        kind: Kind = parsed.kind
        if not message.payload:
            if parsed.name is not None:
                self._remove(kind, parsed.name, "gone")
            return
        try:
            card = AgentCard.model_validate_json(message.payload)
        except ValidationError as exc:
            log.warning("ignoring a malformed card on %s: %s", message.topic, exc.errors()[0]["msg"])
            return
        name = parsed.name or card.name
        if parsed.name is not None and card.name != parsed.name:
            log.debug("card on %s names itself %r; the topic's name wins", message.topic, card.name)
        if kind == "agent" and is_gateway_card(card):
            kind = "gateway"
        if self.allows(name):
            self._upsert(kind, name, card, heartbeat=parsed.name is None)

    def _on_instance_card(self, message: InboundMessage) -> None:
        found = parse_instance_card_topic(self.namespace, message.topic)
        if found is None or not self.allows(found[0]):
            return
        agent, instance = found
        live = self._instances.setdefault(agent, set())
        present = bool(message.payload)
        if present == (instance in live):
            return
        if present:
            live.add(instance)
        else:
            live.discard(instance)
            if not live:
                del self._instances[agent]
        for listener in tuple(self._instance_listeners):
            try:
                listener(agent, instance, present)
            except Exception:
                log.exception("registry instance listener %r failed", listener)
        if not present and agent not in self._instances:
            self._remove("agent", agent, "gone")  # its last replica went: nobody serves the name

    def _upsert(self, kind: Kind, name: str, card: AgentCard, *, heartbeat: bool = False) -> None:
        now, monotonic = time.time(), time.monotonic()
        entry = self._entries.get((kind, name))
        if entry is None:
            self._entries[(kind, name)] = Entry(kind, name, card, now, now, monotonic, heartbeat)
            self._emit(RegistryEvent("added", kind, name, card, now))
            return
        entry.last_seen, entry._seen_monotonic = now, monotonic
        entry._heartbeat = entry._heartbeat and heartbeat
        if entry.card != card:
            entry.card = card
            self._emit(RegistryEvent("updated", kind, name, card, now))

    def _remove(self, kind: Kind, name: str, reason: str) -> None:
        entry = self._entries.pop((kind, name), None)
        if entry is not None:
            self._emit(RegistryEvent("removed", kind, name, entry.card, time.time(), reason))

    async def _sweep(self) -> None:
        # Often enough that an entry leaves within a quarter TTL of expiring (at least every 1 s).
        period = min(1.0, self.ttl_s / 4)
        while True:
            await asyncio.sleep(period)
            horizon = time.monotonic() - self.ttl_s
            for (kind, name), entry in list(self._entries.items()):
                if entry._heartbeat and entry._seen_monotonic < horizon:
                    self._remove(kind, name, "expired")


def name_allowed(name: str, allow: Iterable[str], deny: Iterable[str]) -> bool:
    """True when ``name`` matches an ``allow`` pattern and no ``deny`` pattern (fnmatch, case-sensitive)."""
    return any(fnmatch.fnmatchcase(name, p) for p in allow) and not any(fnmatch.fnmatchcase(name, p) for p in deny)


def is_gateway_card(card: AgentCard) -> bool:
    """A card on the agent-card topics that announces a gateway (SAM publishes both there)."""
    extensions = card.capabilities.extensions or []
    return any(ext.uri == GATEWAY_ROLE_EXTENSION for ext in extensions)
