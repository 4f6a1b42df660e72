"""What every component on the mesh has: one base for agents and gateways (DESIGN, "Components").

An agent, the HTTP gateway, ``mesh acp`` and ``mesh mcp`` each hold the same parts, built here
once, in the order their dependencies need:

- the connection (a :class:`~mesh.transport.Transport` whose will clears the card; its bound
  client id comes from :func:`member_transport` or, for agents and their replicas, from
  :mod:`agents.service`),
- the card, signed with the component's key and re-signed only when it changes (:class:`CardSigner`,
  the one home of card signing),
- presence: the card retained on its discovery topic, healed when something else replaces it,
- the process's shared registry, leased on first need (an empty one until then),
- the one :class:`~mesh.calls.CallPath` of the component's own requests (started on first use),
  and the requester of EMQX profile agents,
- its metrics and its set of background tasks.

The subclass decides when each part starts: a gateway all at once (:meth:`MeshMember.start`), an
agent around its request subscription and its task store.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Literal

from mesh.a2a import AgentCard
from mesh.background import BackgroundTasks
from mesh.broker import BrokerSettings
from mesh.calls import CallPath, follow_registry
from mesh.clientids import connection_for
from mesh.discovery import LazyRegistry
from mesh.discovery.presence import CardPresence, presence_will
from mesh.discovery.registry import DiscoveryRegistry
from mesh.profile.requester import ProfileRequester
from mesh.telemetry import METRICS
from mesh.transport import Transport
from mesh.trust import Trust

__all__ = ["CardSigner", "Kind", "MeshMember", "member_transport", "warn_if_unsigned"]

log = logging.getLogger(__name__)

Kind = Literal["agent", "gateway"]

_UNSIGNED_COSTS: dict[Kind, str] = {
    "agent": "registries with a trust store will refuse it",
    "gateway": "its card is unsigned and it mints no user tokens",
}


def warn_if_unsigned(kind: Kind, name: str, trust: Trust | None) -> None:
    """Say once, at build time, that a component with trust settings has no key to sign with."""
    if trust is None or trust.signing_key is not None:
        return
    if kind == "agent" and trust.public_keys is None:
        return  # it trusts no keys either: an open mesh, nothing to refuse it for
    log.warning(
        "%s %s has trust settings but no key to sign its card: %s; make one with `mesh keys %s` "
        "(trust.keys or trust.signing_key)",
        kind,
        name,
        _UNSIGNED_COSTS[kind],
        name,
    )


class CardSigner:
    """A component's card as the bytes it publishes: signed when it has a key, each change signed once.

    ``card`` is called at every publication (it may change: a URL, a replica's dialects); the
    signature, which costs a JOSE operation, is made again only when the unsigned card differs.
    """

    def __init__(self, card: Callable[[], AgentCard | bytes], trust: Trust | None) -> None:
        self._card = card
        self._trust = trust if trust is not None and trust.signing_key is not None else None
        self._last: tuple[bytes, bytes] | None = None  # (unsigned, published)

    def __call__(self) -> bytes:
        card = self._card()
        unsigned = card if isinstance(card, bytes) else card.to_json_bytes()
        if self._trust is None:
            return unsigned
        if self._last is None or self._last[0] != unsigned:
            model = card if isinstance(card, AgentCard) else AgentCard.model_validate_json(card)
            self._last = (unsigned, self._trust.sign(model).to_json_bytes())
        return self._last[1]


def member_transport(broker: BrokerSettings, kind: Kind, namespace: str, name: str, card_topic: str) -> Transport:
    """The connection of a component that is one instance of its name: its own user's bound client
    id, or a slot of the CLI user it runs as (:mod:`mesh.clientids`); its will clears its card."""
    claimed = connection_for(broker, kind, namespace, name, f"{name}-{uuid.uuid4().hex[:8]}")
    return claimed.transport(will=presence_will(card_topic))


class MeshMember:
    """The parts every component on the mesh has (see the module's docstring)."""

    kind: Kind

    def __init__(
        self,
        name: str,
        namespace: str,
        *,
        kind: Kind,
        transport: Transport,
        card_topic: str,
        card: Callable[[], AgentCard | bytes],
        trust: Trust | None,
        registry_owner: str,
        registry_broker: BrokerSettings | None = None,
        discovery_ttl_s: float = 60.0,
        heartbeat_topic: str | None = None,
        heartbeat_interval_s: float = 10.0,
        extra_card_topics: tuple[str, ...] = (),
    ) -> None:
        """``registry_broker``: where the process's shared registry may open a connection of its
        own; ``None`` runs the registry on ``transport`` (a user bound to one client id cannot
        open a second connection)."""
        self.kind = kind
        self.member_name = name
        self.namespace = namespace
        self.transport = transport
        self.trust = trust
        warn_if_unsigned(kind, name, trust)
        self.metrics = METRICS.component(namespace, name)
        self.background = BackgroundTasks(log, name)
        verifier = trust.card_verifier() if trust is not None else None
        self.discovery = LazyRegistry(
            namespace,
            owner=registry_owner,
            broker=registry_broker,
            transport=transport,
            ttl_s=discovery_ttl_s,
            verifier=verifier,
        )
        # Before discovery starts: nobody known (with the trust it will check cards with).
        self._no_registry = DiscoveryRegistry(transport, namespace, verifier=verifier)
        signer = trust.caller_minter(kind, namespace) if trust is not None else None
        self.calls = CallPath(transport, namespace, name, role=kind, signer=signer)
        #: Calls to EMQX profile agents (``org/unit/agent``), under the profile's requester rules.
        self.profile_requester = ProfileRequester(transport, name)
        follow_registry(self.calls, self.discovery)  # a card removed fails the calls waiting on its agent
        self.card = CardSigner(card, trust)
        self.presence = CardPresence(
            transport,
            card_topic,
            self.card,
            heartbeat_topic=heartbeat_topic,
            heartbeat_interval_s=heartbeat_interval_s,
            extra_topics=extra_card_topics,
            on_heal=self.metrics.card_healed,
        )

    async def announce(self, present: bool) -> None:
        """Put the card back on the mesh, or take it off while the component cannot serve
        (a remote agent that stopped answering: callers fail fast, as with any gone agent)."""
        await (self.presence.restore() if present else self.presence.withdraw())

    @property
    def registry(self) -> DiscoveryRegistry:
        """The registry of the agents on the mesh (an empty one until discovery started)."""
        return self.discovery.current or self._no_registry

    async def start(self) -> None:
        """Connect, lease the registry, listen for answers and announce the card."""
        self.metrics.watch_transport(self.transport)
        await self.transport.connect()
        await self.discovery.get()
        await self.calls.start()
        await self.presence.start()
        self.metrics.watch(in_flight=lambda: self.calls.open_calls, discovery_size=lambda: len(self.registry.agents()))

    async def stop(self) -> None:
        """Clear the card, give the registry back, wait for the answers in flight, disconnect."""
        await self.presence.stop()
        await self.discovery.close()
        await self.calls.flush()
        await self.background.cancel_all()
        await self.transport.close()
        self.metrics.unwatch()
