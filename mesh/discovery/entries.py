"""What the registry holds: one :class:`Entry` per component, and the :class:`RegistryEvent`\\ s of its changes."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from mesh.a2a import AgentCard
from mesh.profile.emqx import DialectClaim
from mesh.timestamps import utc_iso

__all__ = [
    "GATEWAY_ROLE_EXTENSION",
    "Entry",
    "EventType",
    "Kind",
    "RegistryEvent",
    "is_gateway_card",
    "name_allowed",
]

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
    #: Monotonic time of the latest card: a heartbeat-fed entry expires by it.
    seen_monotonic: float = field(default=0.0, repr=False)
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


def name_allowed(name: str, allow: Iterable[str], deny: Iterable[str]) -> bool:
    """True when ``name`` matches an ``allow`` pattern and no ``deny`` pattern (fnmatch, case-sensitive)."""
    return any(fnmatch.fnmatchcase(name, p) for p in allow) and not any(fnmatch.fnmatchcase(name, p) for p in deny)


def is_gateway_card(card: AgentCard) -> bool:
    """A card on the agent-card topics that announces a gateway (SAM publishes both there)."""
    extensions = card.capabilities.extensions or []
    return any(ext.uri == GATEWAY_ROLE_EXTENSION for ext in extensions)
