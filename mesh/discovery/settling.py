"""When a registry's cards are in: the roll call it holds, and the quiet after the last card.

A roll call asks every live agent and gateway to publish its card again, spread over a window:
what makes a registry on another node of a cluster, where retained cards may not reach, see
everyone. The cards are taken to be in once the answers had their window and no discovery
message came for :data:`SETTLE_QUIET_S` (retained cards come right after the SUBACK).
"""

from __future__ import annotations

import asyncio
import logging
import time

from mesh.discovery.rollcall import rollcall_payload
from mesh.errors import NotAuthorizedError, TransportError
from mesh.transport import Transport
from topics import get_discovery_rollcall_topic, get_rollcall_topic

__all__ = ["SETTLE_QUIET_S", "RollCaller"]

log = logging.getLogger("mesh.discovery.registry")

#: Silence on the discovery tree after which the retained cards are taken to be all in.
SETTLE_QUIET_S = 0.3


class RollCaller:
    """Holds a namespace's roll calls and knows when their answers and the retained cards are in."""

    def __init__(self, transport: Transport, namespace: str, window_s: float) -> None:
        self.transport = transport
        self.namespace = namespace
        self.window_s = window_s
        #: Roll calls held.
        self.held = 0
        self._until = 0.0  # answers to the last roll call may come until then
        self._last_arrival = 0.0  # monotonic time of the subscription, then of the latest discovery message

    def arrived(self) -> None:
        """A discovery message came (or the subscription was just made)."""
        self._last_arrival = time.monotonic()

    async def hold(self, window_s: float | None = None) -> None:
        """Ask everyone to publish its card again, spread over ``window_s`` (default: ``window_s``)."""
        window_s = self.window_s if window_s is None else window_s
        self._until = time.monotonic() + window_s
        self.held += 1
        payload = rollcall_payload(window_s)
        try:
            try:
                await self.transport.publish(get_rollcall_topic(self.namespace), payload, timeout=5)
            except NotAuthorizedError:  # rules of the previous release: its topic (mesh.discovery.rollcall)
                await self.transport.publish(get_discovery_rollcall_topic(self.namespace), payload, timeout=5)
        except TransportError as exc:
            log.warning("roll call on namespace %r failed: %s; only retained cards are seen", self.namespace, exc)

    async def settled(self, timeout: float) -> None:
        """Return once the cards are in (see the module doc), or after ``timeout``."""
        deadline = time.monotonic() + timeout
        while (now := time.monotonic()) < deadline:
            wait = max(SETTLE_QUIET_S - (now - self._last_arrival), self._until - now)
            if wait <= 0:
                return
            await asyncio.sleep(min(wait, deadline - now))  # the quiet window's clock
