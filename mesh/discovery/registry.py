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

Trust is live when the verifier's keys come from a file (DESIGN, "Trust": a component enrolled
later is trusted by every running registry within seconds, with no restart). The registry looks
at the file every :data:`~mesh.trust.files.POLL_INTERVAL_S` (off the event loop), and a card
whose kid is unknown looks at once (rate-limited), so no card costs a ``stat`` otherwise. When
the keys change, only the names whose key changed are checked again:

- a held card that no longer verifies (its key removed or replaced) is removed, reason
  ``untrusted``, and counts as refused;
- a signed card refused for trust (its key unknown, or not the one that signed it) is kept, the
  latest per name, at most :data:`MAX_HELD_CARDS` of them and :data:`MAX_HELD_BYTES` in all (the
  oldest dropped); once it verifies it is admitted as if it had just come (its refusal cleared,
  "added"). A card of the name that comes later, or its clearing, replaces it.

Replicas of an agent also publish ``.../agentcards/{agent}/{instance}`` (retained, cleared by
each replica's will): the registry keeps the live instances per agent, tells instance
listeners when one comes or goes, and removes an agent whose last instance card went away.

Changes are reported as :class:`RegistryEvent`\\ s (added / updated / removed) to listeners
and to :meth:`DiscoveryRegistry.events` iterators.

The other dialect: the registry also watches the EMQX profile's cards
(``$a2a/v1/discovery/+/+/+``, A2A 1.0 cards with ``a2a-status``). Each is an entry named
``{org}/{unit}/{agent}`` with ``dialect="emqx"`` (its card read as 0.3 by
:func:`mesh.profile.v1_results.card_from_v1`); a card marked ``a2a-status=offline`` (its will, or
a clean stop) or cleared removes it. With a trust store, unsigned profile cards are refused.
A broker that refuses the subscription (rules made without the profile) leaves the registry
SAM-only, with a warning.

One agent serving both dialects is one entry: its mesh entry, with ``profile`` set to its
profile address, while its profile entry (still found by :meth:`DiscoveryRegistry.get`) is not
listed (``merged_into``). Both cards must claim it (:class:`~mesh.profile.emqx.DialectClaim`), each on a
topic only the agent's own broker users may publish (``_merge``); a claim on one side alone is
another user's word and merges nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from mesh.a2a import AgentCard
from mesh.discovery.rollcall import ROLLCALL_WINDOW_S, rollcall_payload
from mesh.errors import AgentNotFoundError, NotAuthorizedError, SubscribeError, TransportError, TrustError, short_repr
from mesh.profile.emqx import DialectClaim, dialect_claim
from mesh.timestamps import utc_iso
from mesh.transport import InboundMessage, Subscription, Transport
from mesh.trust.files import POLL_INTERVAL_S
from topics import (
    get_discovery_rollcall_topic,
    get_discovery_subscription_topic,
    get_rollcall_topic,
    parse_discovery_topic,
    parse_instance_card_topic,
    parse_profile_discovery_topic,
    profile_discovery_filter,
    validate_identifier,
)

if TYPE_CHECKING:
    from mesh.trust import CardVerifier

log = logging.getLogger(__name__)

Kind = Literal["agent", "gateway"]
EventType = Literal["added", "updated", "removed"]
# SAM marks gateway cards with this extension (also when they come on the agent topics).
GATEWAY_ROLE_EXTENSION = "https://solace.com/a2a/extensions/sam/gateway-role"


#: A refused card is logged once per name and reason per this many seconds.
BAD_CARD_LOG_INTERVAL_S = 60.0
_MAX_REMEMBERED = 10_000
#: Cards refused for trust, kept to be admitted when their key comes: at most this many names
#: and this many bytes in all (a flood of made-up names costs a bounded amount of memory).
MAX_HELD_CARDS = 1_000
MAX_HELD_BYTES = 8 << 20


@dataclass(slots=True)
class Entry:
    """A component on the mesh, as its card describes it."""

    kind: Kind
    name: str
    card: AgentCard
    first_seen: float  # wall-clock seconds
    last_seen: float  # wall-clock seconds
    _seen_monotonic: float = field(default=0.0, repr=False)
    #: Whether the card came on the component's own card topic (not as a bare heartbeat).
    on_own_topic: bool = True
    #: ``sam``: the mesh's own topics; ``emqx``: the EMQX "A2A over MQTT" profile (name ``org/unit/agent``).
    dialect: Literal["sam", "emqx"] = "sam"
    #: What the card says of the agent's other dialect (:class:`~mesh.profile.emqx.DialectClaim`), if anything.
    claim: DialectClaim | None = field(default=None, repr=False)
    #: A mesh agent that serves the profile too: its profile address (``org/unit/agent``, a pool's
    #: ``org/unit/pool/{pool}``), set when both its cards vouch for each other (see the module doc).
    profile: str | None = None
    #: A profile entry that is that same agent: the mesh name it is listed under (not listed itself).
    merged_into: str | None = None


@dataclass(frozen=True, slots=True)
class RegistryEvent:
    """A change: ``reason`` says why an entry was removed (``gone``, ``expired``, ``offline``,
    ``untrusted``: its key left the trust file)."""

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


#: Silence on the discovery tree after which the retained cards are taken to be all in.
SETTLE_QUIET_S = 0.3

Listener = Callable[[RegistryEvent], None]
#: ``listener(agent, instance, present)``: a replica's card came (True) or went (False).
InstanceListener = Callable[[str, str, bool], None]
#: ``(name, kind, why)``: a card of ``name`` was refused (``why``), or ``why`` None: it is no longer.
RefusalListener = Callable[[str, Kind, str | None], None]


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
        #: Cards refused (wrong topic, bad name, bad or missing signature), counted.
        self.rejected = 0
        #: The cards refused, by name: (kind, why), the latest; bounded (a flood of made-up names).
        self.refused: dict[str, tuple[Kind, str]] = {}
        self._logged: dict[tuple[str, str], float] = {}  # (name or topic, why) -> when last logged
        # Per (topic kind, name): the kind it is held as, its topic and the card bytes last verified.
        self._verified: dict[tuple[Kind, str], tuple[Kind, str, bytes]] = {}
        self._held: OrderedDict[str, tuple[str, bytes]] = OrderedDict()  # name -> refused signed card
        self._held_bytes = 0
        self._trust_generation = verifier.generation if verifier is not None else 0
        self._trust_prints = dict(verifier.keys.thumbprints()) if verifier is not None else {}
        self._trust_watch: asyncio.Task[None] | None = None
        self._entries: dict[tuple[Kind, str], Entry] = {}
        self._listeners: list[Listener] = []
        self._instances: dict[str, set[str]] = {}
        self._claimants: dict[str, set[str]] = {}  # mesh name -> profile entries whose card claims it
        self._instance_listeners: list[InstanceListener] = []
        self._refusal_listeners: list[RefusalListener] = []
        self._changed = asyncio.Event()
        self._subscription: Subscription | None = None
        self._profile_subscription: Subscription | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._last_arrival = 0.0  # monotonic time of the subscription, then of the latest discovery message
        self.rollcall = rollcall and not one_node
        self.one_node = one_node
        self.rollcall_window_s = rollcall_window_s
        self._rollcall_until = 0.0  # answers to our last roll call may come until then
        #: Roll calls this registry held.
        self.rollcalls_held = 0
        self._stopped = False

    # ------------------------------------------------------------------ lifecycle

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
        self._last_arrival = time.monotonic()
        if self.rollcall:
            await self.hold_rollcall()
            self.transport.add_connect_listener(self._on_reconnect)
        self._sweeper = asyncio.get_running_loop().create_task(self._sweep())
        if self.verifier is not None and self.verifier.live:
            self._trust_watch = asyncio.get_running_loop().create_task(self._watch_trust())

    async def stop(self) -> None:
        self._stopped = True
        for task in (self._sweeper, self._trust_watch):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._subscription is not None and self.transport.is_connected:
            await self.transport.unsubscribe(self._subscription)
        if self._profile_subscription is not None and self.transport.is_connected:
            await self.transport.unsubscribe(self._profile_subscription)

    # ------------------------------------------------------------------ queries

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
        return sorted(self._instances.get(name, ()))

    def add_instance_listener(self, listener: InstanceListener) -> None:
        """Call ``listener(agent, instance, present)`` when a replica's card comes or goes."""
        self._instance_listeners.append(listener)

    def remove_instance_listener(self, listener: InstanceListener) -> None:
        with contextlib.suppress(ValueError):
            self._instance_listeners.remove(listener)

    def agent_names(self) -> list[str]:
        return [e.name for e in self.agents()]

    async def hold_rollcall(self, window_s: float | None = None) -> None:
        """Ask every live agent and gateway to publish its card again, spread over ``window_s``
        (default: the registry's ``rollcall_window_s``): what makes a registry on another node of
        a cluster, where retained cards may not reach, see everyone."""
        window_s = self.rollcall_window_s if window_s is None else window_s
        self._rollcall_until = time.monotonic() + window_s
        self.rollcalls_held += 1
        payload = rollcall_payload(window_s)
        try:
            try:
                await self.transport.publish(get_rollcall_topic(self.namespace), payload, timeout=5)
            except NotAuthorizedError:  # rules of the previous release: its topic (mesh.discovery.rollcall)
                await self.transport.publish(get_discovery_rollcall_topic(self.namespace), payload, timeout=5)
        except TransportError as exc:
            log.warning("roll call on namespace %r failed: %s; only retained cards are seen", self.namespace, exc)

    async def _on_reconnect(self, _session_present: bool) -> None:
        if not self._stopped:
            await self.hold_rollcall()

    async def settled(self, timeout: float) -> None:
        """Return once the cards are in: the answers to a roll call had their window, and no
        discovery message came for :data:`SETTLE_QUIET_S` (retained cards come right after the
        SUBACK); or after ``timeout``."""
        deadline = time.monotonic() + timeout
        while (now := time.monotonic()) < deadline:
            wait = max(SETTLE_QUIET_S - (now - self._last_arrival), self._rollcall_until - now)
            if wait <= 0:
                return
            await asyncio.sleep(min(wait, deadline - now))  # the quiet window's clock

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

    # ------------------------------------------------------------------ events

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener(event)`` on every change (on the event loop; keep it short)."""
        self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    def add_refusal_listener(self, listener: RefusalListener) -> None:
        """Call ``listener(name, kind, why)`` when a name's refusal is new or changes, and with
        ``why`` None when a good card of the name clears it (what a watcher shows as refused)."""
        self._refusal_listeners.append(listener)

    def remove_refusal_listener(self, listener: RefusalListener) -> None:
        with contextlib.suppress(ValueError):
            self._refusal_listeners.remove(listener)

    def _tell_refusal(self, name: str, kind: Kind, why: str | None) -> None:
        for listener in tuple(self._refusal_listeners):
            try:
                listener(name, kind, why)
            except Exception:
                log.exception("a refused-card listener failed")

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
        self._last_arrival = time.monotonic()
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
            self._release(topic_name)  # a name's latest card is the only one that may be admitted later
        if not payload:
            if topic_name is not None:
                self._remove(kind, topic_name, "gone")
            return
        data: Any = None
        try:
            if self.verifier is not None:
                data = json.loads(payload)
                card = AgentCard.model_validate(data)
            else:
                card = AgentCard.model_validate_json(payload)
        except ValidationError as exc:
            self._refuse(topic_name, kind, topic, f"malformed card: {exc.errors()[0]['msg']}")
            return
        except (ValueError, RecursionError):
            self._refuse(topic_name, kind, topic, "malformed card: not a JSON object")
            return
        name = topic_name or card.name
        held_as: Kind = "gateway" if kind == "agent" and is_gateway_card(card) else kind
        if (problem := self._problem(topic_name, card)) is not None:
            self._refuse(name, kind, topic, problem)
            return
        if (problem := self._untrusted(kind, held_as, name, topic, payload, data)) is not None:
            self._refuse(name, kind, topic, problem)
            if isinstance(data, dict) and data.get("signatures"):  # signed: its key may yet come
                self._hold(name, topic, payload)
            return
        cleared = self.refused.pop(name, None)
        if cleared is not None:
            self._tell_refusal(name, cleared[0], None)
        if self.allows(name):
            self._upsert(held_as, name, card, on_own_topic=topic_name is not None)

    def _on_profile_card(self, message: InboundMessage) -> None:
        self._last_arrival = time.monotonic()  # (the raw listener is the namespace's: the profile's are global)
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
        from mesh.profile.v1_results import card_from_v1

        try:
            data = json.loads(message.payload)
            interfaces = data.get("supportedInterfaces") or [{}]
            url = interfaces[0].get("url") if isinstance(interfaces[0], dict) else None
            # Named as the registry names it: delegation and the orchestrator call it by that name.
            card = card_from_v1(data, url=url if isinstance(url, str) else "mqtt://").model_copy(update={"name": name})
        except (ValueError, TypeError, AttributeError, IndexError, RecursionError, ValidationError) as exc:
            self._refuse(name, "agent", message.topic, f"not an A2A 1.0 card ({short_repr(str(exc), 80)})")
            return
        if self.allows(name):
            capabilities = data.get("capabilities")
            claim = dialect_claim(capabilities.get("extensions")) if isinstance(capabilities, dict) else None
            self._upsert("agent", name, card, on_own_topic=True, dialect="emqx", claim=claim)

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
        if agent in self._claimants:
            self._merge(agent)  # a pool member's profile entry is merged while its instance is live
        if not present and agent not in self._instances:
            self._remove("agent", agent, "gone")  # its last replica went: nobody serves the name

    def _problem(self, topic_name: str | None, card: AgentCard) -> str | None:
        """Why a card must be refused whatever the keys, or None."""
        if topic_name is not None and card.name != topic_name:
            return f"the card names itself {short_repr(card.name)}; a card is accepted only on its own name's topic"
        try:
            validate_identifier(card.name, "agent name")
        except ValueError as exc:
            return str(exc)
        if self.verifier is not None and topic_name is None:
            return "with a trust store, cards are accepted only on their own card topic, not as bare heartbeats"
        return None

    def _untrusted(self, kind: Kind, held_as: Kind, name: str, topic: str, payload: bytes, data: Any) -> str | None:
        """Why the trusted keys refuse the card ``data`` of ``name`` (on its own topic), or None."""
        if self.verifier is None:
            return None
        verified = self._verified.get((kind, name))
        if verified is not None and verified[2] == payload:
            return None  # the same bytes verified under the same keys: a refresh (no signature check)
        try:
            self.verifier.verify(data, name)
        except TrustError as exc:
            return str(exc)
        self._verified[(kind, name)] = (held_as, topic, payload)
        return None

    # ------------------------------------------------------------------ live trust

    async def _watch_trust(self) -> None:
        """Look at the trust file every POLL_INTERVAL_S and follow its changes until stopped."""
        verifier = self.verifier
        if verifier is None:  # started only with a file-backed verifier
            return
        while True:
            await asyncio.sleep(POLL_INTERVAL_S)
            try:
                await asyncio.to_thread(verifier.refresh)  # reading and parsing the file stay off the loop
                self._follow_trust()
            except Exception:  # a watch that died would leave the registry on stale keys for good
                log.exception("following the trusted keys of namespace %r failed", self.namespace)

    def _follow_trust(self) -> None:
        """When the trusted keys changed: drop the cards they no longer vouch for, admit the held
        cards they now do. Only names whose key changed are checked (one int compare otherwise)."""
        verifier = self.verifier
        if verifier is None or verifier.generation == self._trust_generation:
            return
        self._trust_generation = verifier.generation
        prints, before = dict(verifier.keys.thumbprints()), self._trust_prints
        self._trust_prints = prints
        touched = {kid for kid in prints.keys() | before.keys() if prints.get(kid) != before.get(kid)}
        # Held cards first: a name's held card is newer than its verified one, and replaces it.
        for name in [name for name in self._held if name in touched]:
            topic, payload = self._held[name]
            try:
                verifier.verify(json.loads(payload), name)
            except TrustError as exc:
                self._still_refused(name, str(exc))
                continue
            parsed = parse_discovery_topic(self.namespace, topic)
            if parsed is not None:
                self._on_card(parsed.kind, parsed.name, topic, payload)  # admitted as if it had just come
        for key, (held_as, topic, payload) in list(self._verified.items()):
            if key[1] not in touched or key not in self._verified:
                continue
            try:
                verifier.verify(json.loads(payload), key[1])
            except TrustError as exc:
                self._verified.pop(key, None)  # (a gateway's card on both topics: gone with the first)
                self._remove(held_as, key[1], "untrusted")
                self._refuse(key[1], key[0], topic, str(exc))
                if key[1] not in self._held:  # its key may come back (a newer card held wins)
                    self._hold(key[1], topic, payload)

    def _still_refused(self, name: str, why: str) -> None:
        """A held card checked again under new keys fails for another reason: show that one."""
        refused = self.refused.get(name)
        if refused is not None and refused[1] != why:
            self.refused[name] = (refused[0], why)
            self._tell_refusal(name, refused[0], why)

    def _hold(self, name: str, topic: str, payload: bytes) -> None:
        """Keep a signed card refused for trust, to admit it when its key comes (bounded, oldest out)."""
        self._release(name)
        if len(payload) > MAX_HELD_BYTES:
            return
        self._held[name] = (topic, payload)
        self._held_bytes += len(payload)
        while len(self._held) > MAX_HELD_CARDS or self._held_bytes > MAX_HELD_BYTES:
            _, (_, dropped) = self._held.popitem(last=False)
            self._held_bytes -= len(dropped)

    def _release(self, name: str) -> None:
        held = self._held.pop(name, None)
        if held is not None:
            self._held_bytes -= len(held[1])

    def _refuse(self, name: str | None, kind: Kind, topic: str, problem: str) -> None:
        """Count a refused card, remember why (what ``mesh agents`` shows), and log it once a
        minute per name and reason, not per arrival (a fuzzer sends thousands)."""
        self.rejected += 1
        remembered = name is not None and (name in self.refused or len(self.refused) < _MAX_REMEMBERED)
        if name is not None and remembered and self.refused.get(name) != (kind, problem):
            self.refused[name] = (kind, problem)
            self._tell_refusal(name, kind, problem)
        key, now = (name or topic, problem), time.monotonic()
        last = self._logged.get(key)
        if last is not None and now - last < BAD_CARD_LOG_INTERVAL_S:
            log.debug("refused a card on %s again: %s", topic, problem)
            return
        if len(self._logged) >= _MAX_REMEMBERED:
            self._logged.clear()
        self._logged[key] = now
        shown = short_repr(name) if name is not None else "a card"
        log.warning("refused the card of %s on %s: %s", shown, topic, problem)

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
            self._link(entry, None)
            self._emit(RegistryEvent("added", kind, name, card, now))
            return
        if entry.on_own_topic and not on_own_topic:
            # Anyone may send a heartbeat under any name; the card on the owner's topic wins.
            log.debug("ignored a heartbeat for %s: its card came on its own topic", name)
            return
        entry.on_own_topic = on_own_topic
        entry.last_seen, entry._seen_monotonic = now, monotonic
        before, entry.claim = entry.claim, claim
        if entry.card != card:
            entry.card = card
            self._emit(RegistryEvent("updated", kind, name, card, now))
        if claim != before:
            self._link(entry, before)

    # ------------------------------------------------------------------ one agent, both dialects

    def _link(self, entry: Entry, before: DialectClaim | None) -> None:
        """After ``entry`` came, changed its claim (from ``before``) or went: merge again the mesh
        agents concerned with their profile entries."""
        if entry.kind != "agent":
            return
        if entry.dialect == "sam":
            self._merge(entry.name)
            return
        present = self._entries.get(("agent", entry.name)) is entry
        if before is not None and before.namespace == self.namespace:
            self._claimants.get(before.name, set()).discard(entry.name)
            self._merge(before.name)
        claim = entry.claim
        if present and claim is not None and claim.namespace == self.namespace:
            self._claimants.setdefault(claim.name, set()).add(entry.name)
            self._merge(claim.name)
        elif not present:
            entry.merged_into = None

    def _merge(self, name: str) -> None:
        """Merge mesh agent ``name`` with the profile entries that are the same agent.

        The names inside the cards prove nothing: anyone can write any. What the broker rules
        verify is who publishes where: the card on ``{ns}/.../agentcards/{name}`` (and its
        replicas' instance cards) only by ``name``'s users, the card on
        ``$a2a/v1/discovery/{org}/{unit}/{agent}`` only by that agent's profile user. So both
        cards must make the same claim: the mesh card that its agent is at the profile address,
        and the profile card that it is that mesh agent (a pool member: one of its live
        instances, by the instance id that is its profile agent id). A card of another user
        claiming the name is left as an entry of its own, and never changes ``name``'s entry."""
        claimants = self._claimants.get(name, set())
        mesh = self._entries.get(("agent", name))
        claim = mesh.claim if mesh is not None and mesh.dialect == "sam" and mesh.on_own_topic else None
        if claim is not None and claim.namespace != self.namespace:
            claim = None
        merged: list[str] = []
        for profile_name in sorted(claimants):
            entry = self._entries.get(("agent", profile_name))
            if entry is None:
                continue
            same = claim is not None and entry.claim == claim and _at_address(profile_name, claim, self.instances(name))
            entry.merged_into = name if same else None
            if same:
                merged.append(profile_name)
        if not claimants:
            self._claimants.pop(name, None)
        if mesh is not None and mesh.dialect == "sam":
            profile = claim.address if claim is not None and merged else None
            if mesh.profile != profile:
                mesh.profile = profile
                self._emit(RegistryEvent("updated", "agent", name, mesh.card, time.time()))

    def _remove(self, kind: Kind, name: str, reason: str) -> None:
        entry = self._entries.pop((kind, name), None)
        self._verified.pop((kind, name), None)
        if entry is not None:
            merged = entry.merged_into is not None
            self._link(entry, entry.claim)
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
                if not entry.on_own_topic and entry._seen_monotonic < horizon:
                    self._remove(kind, name, "expired")


def _at_address(profile_name: str, claim: DialectClaim, instances: Iterable[str]) -> bool:
    """Whether the profile entry ``profile_name`` is at the claimed address: the address itself,
    or for a pool a member ``org/unit/{instance}`` whose instance is live."""
    if not claim.pool:
        return profile_name == claim.address
    org, unit, _, _ = claim.address.split("/")
    prefix = f"{org}/{unit}/"
    return profile_name.startswith(prefix) and profile_name[len(prefix) :] in set(instances)


def name_allowed(name: str, allow: Iterable[str], deny: Iterable[str]) -> bool:
    """True when ``name`` matches an ``allow`` pattern and no ``deny`` pattern (fnmatch, case-sensitive)."""
    return any(fnmatch.fnmatchcase(name, p) for p in allow) and not any(fnmatch.fnmatchcase(name, p) for p in deny)


def is_gateway_card(card: AgentCard) -> bool:
    """A card on the agent-card topics that announces a gateway (SAM publishes both there)."""
    extensions = card.capabilities.extensions or []
    return any(ext.uri == GATEWAY_ROLE_EXTENSION for ext in extensions)
