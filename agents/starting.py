"""Agents that start together connect a hundred or so at a time.

A ``mesh run`` of 1,000 agents used to move them through each step in lockstep: 1,000
connects, then 1,000 CONNACKs, 1,000 subscriptions, and only then 1,000 cards, all in the last
instant, so a watcher saw the first card when the last agent was nearly ready and the broker's
fan-out of every card to every watcher came after all of it. With at most
:data:`STARTING_AT_ONCE` agents between their connect and their card, the first cards go out
while the others connect, the broker's work overlaps ours, and it never sees 1,000 CONNECTs
at once. The steps before (name check, tasks loaded) stay batched across all of them
(:mod:`mesh.discovery.ownership`, :func:`agents.journal.load_together`).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator

__all__ = ["STARTING_AT_ONCE", "starting_slot"]

STARTING_AT_ONCE = 128

_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = weakref.WeakKeyDictionary()


@contextlib.asynccontextmanager
async def starting_slot() -> AsyncIterator[None]:
    """Hold one of this loop's :data:`STARTING_AT_ONCE` places for an agent that connects and announces itself."""
    loop = asyncio.get_running_loop()
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = asyncio.Semaphore(STARTING_AT_ONCE)
    async with slots:
        yield
