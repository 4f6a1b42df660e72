"""The registry's side of live trust: which cards the trusted keys vouch for, and what changes
when the keys do (see :mod:`mesh.discovery.registry`, "Trust is live").

:meth:`CardTrust.check` verifies a card once per distinct bytes; :meth:`CardTrust.changes`
says, after the keys changed, which held cards are now admitted, which stay refused for another
reason and which verified cards are revoked. Only names whose key changed are checked again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mesh.discovery.entries import Kind
from mesh.discovery.refusals import HeldCards
from mesh.errors import TrustError
from mesh.trust.files import POLL_INTERVAL_S

if TYPE_CHECKING:
    from mesh.trust import CardVerifier

__all__ = ["Admit", "CardTrust", "Revoke", "StillRefused"]


@dataclass(frozen=True, slots=True)
class Admit:
    """A held card the new keys verify: admit it as if it had just come."""

    name: str
    topic: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class StillRefused:
    """A held card the new keys refuse for another reason than before."""

    name: str
    why: str


@dataclass(frozen=True, slots=True)
class Revoke:
    """A card held as ``held_as`` (it came on a ``kind`` topic) the new keys no longer vouch for."""

    kind: Kind
    held_as: Kind
    name: str
    topic: str
    why: str


class CardTrust:
    """Cards verified and held under ``verifier``'s keys (no verifier: every card is trusted)."""

    def __init__(self, verifier: CardVerifier | None) -> None:
        self.verifier = verifier
        #: Signed cards refused for trust, admitted when their key comes.
        self.held = HeldCards()
        # Per (topic kind, name): the kind it is held as, its topic and the card bytes last verified.
        self._verified: dict[tuple[Kind, str], tuple[Kind, str, bytes]] = {}
        self._generation = verifier.generation if verifier is not None else 0
        self._prints = dict(verifier.keys.thumbprints()) if verifier is not None else {}

    def check(self, kind: Kind, held_as: Kind, name: str, topic: str, payload: bytes, data: Any) -> str | None:
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

    async def watch(self, follow: Callable[[], None], log: logging.Logger, namespace: str) -> None:
        """Reread the trust file every POLL_INTERVAL_S and call ``follow`` (which takes
        :meth:`changes`) until canceled; started only with a file-backed verifier."""
        verifier = self.verifier
        if verifier is None:
            return
        while True:
            await asyncio.sleep(POLL_INTERVAL_S)
            try:
                await asyncio.to_thread(verifier.refresh)  # reading and parsing the file stay off the loop
                follow()
            except Exception:  # a watch that died would leave the registry on stale keys for good
                log.exception("following the trusted keys of namespace %r failed", namespace)

    def forget(self, kind: Kind, name: str) -> None:
        """The card of ``name`` on a ``kind`` topic went."""
        self._verified.pop((kind, name), None)

    def changes(self) -> Iterator[Admit | StillRefused | Revoke]:
        """When the trusted keys changed since the last look: what to admit, show or drop, in
        order (held cards first: a name's held card is newer than its verified one, and
        replaces it). Act on each before taking the next: the verified cards are read after."""
        verifier = self.verifier
        if verifier is None or verifier.generation == self._generation:
            return
        self._generation = verifier.generation
        prints, before = dict(verifier.keys.thumbprints()), self._prints
        self._prints = prints
        touched = {kid for kid in prints.keys() | before.keys() if prints.get(kid) != before.get(kid)}
        for name in [name for name in self.held.names() if name in touched]:
            topic, payload = self.held.get(name)
            try:
                verifier.verify(json.loads(payload), name)
            except TrustError as exc:
                yield StillRefused(name, str(exc))
                continue
            yield Admit(name, topic, payload)
        for key, (held_as, topic, payload) in list(self._verified.items()):
            if key[1] not in touched or key not in self._verified:
                continue
            try:
                verifier.verify(json.loads(payload), key[1])
            except TrustError as exc:
                self._verified.pop(key, None)  # (a gateway's card on both topics: gone with the first)
                yield Revoke(key[0], held_as, key[1], topic, str(exc))
                if key[1] not in self.held:  # its key may come back (a newer card held wins)
                    self.held.hold(key[1], topic, payload)
