"""One agent serving both dialects is one registry entry.

Its mesh entry gets ``profile`` set to its profile address, while its profile entry (still found
by :meth:`~mesh.discovery.registry.DiscoveryRegistry.get`) is not listed (``merged_into``). Both
cards must claim it (:class:`~mesh.profile.emqx.DialectClaim`), each on a topic only the agent's
own broker users may publish (:meth:`DialectMerger.merge`); a claim on one side alone is another
user's word and merges nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from mesh.discovery.entries import Entry, Kind, RegistryEvent
from mesh.profile.emqx import DialectClaim

__all__ = ["DialectMerger"]


class DialectMerger:
    """Links the profile entries of ``entries`` to the mesh entries whose agent they are."""

    def __init__(
        self,
        namespace: str,
        entries: dict[tuple[Kind, str], Entry],
        instances: Callable[[str], list[str]],
        emit: Callable[[RegistryEvent], None],
    ) -> None:
        self.namespace = namespace
        self._entries = entries  # the registry's own dict, read only here
        self._instances = instances
        self._emit = emit
        self._claimants: dict[str, set[str]] = {}  # mesh name -> profile entries whose card claims it

    def claimed(self, name: str) -> bool:
        """Whether a profile card claims to be mesh agent ``name``."""
        return name in self._claimants

    def link(self, entry: Entry, before: DialectClaim | None) -> None:
        """After ``entry`` came, changed its claim (from ``before``) or went: merge again the mesh
        agents concerned with their profile entries."""
        if entry.kind != "agent":
            return
        if entry.dialect == "sam":
            self.merge(entry.name)
            return
        present = self._entries.get(("agent", entry.name)) is entry
        if before is not None and before.namespace == self.namespace:
            self._claimants.get(before.name, set()).discard(entry.name)
            self.merge(before.name)
        claim = entry.claim
        if present and claim is not None and claim.namespace == self.namespace:
            self._claimants.setdefault(claim.name, set()).add(entry.name)
            self.merge(claim.name)
        elif not present:
            entry.merged_into = None

    def merge(self, name: str) -> None:
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
            same = (
                claim is not None and entry.claim == claim and _at_address(profile_name, claim, self._instances(name))
            )
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


def _at_address(profile_name: str, claim: DialectClaim, instances: Iterable[str]) -> bool:
    """Whether the profile entry ``profile_name`` is at the claimed address: the address itself,
    or for a pool a member ``org/unit/{instance}`` whose instance is live."""
    if not claim.pool:
        return profile_name == claim.address
    org, unit, _, _ = claim.address.split("/")
    prefix = f"{org}/{unit}/"
    return profile_name.startswith(prefix) and profile_name[len(prefix) :] in set(instances)
