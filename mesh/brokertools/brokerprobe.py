"""How fast a broker relays a request and its answer: the check ``mesh up`` makes before using one.

A Mosquitto without ``set_tcp_nodelay true`` (Debian's stock service, for one) holds every
second small packet on a connection until the peer acknowledges the first, and Linux delays
that acknowledgement by ~40 ms: each request/answer round trip between two clients then costs
~44 ms instead of well under 1 ms. A publish to one's own subscription does not show it; two
connections answering each other, as a caller and an agent do, do.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid

from mesh.broker import BrokerSettings
from mesh.transport import InboundMessage, MqttTransport

__all__ = ["SLOW_ROUND_TRIP_MS", "round_trip_ms"]

#: Above this, the best of a few round trips says the broker delays small packets (Nagle's
#: algorithm): a healthy local broker answers in ~0.3-2 ms, a delaying one never under the
#: ~40 ms of a delayed acknowledgement; the margin keeps a busy machine from passing for slow.
SLOW_ROUND_TRIP_MS = 20.0


async def round_trip_ms(settings: BrokerSettings, *, samples: int = 7, timeout_s: float = 2.0) -> float:
    """The best of ``samples`` QoS 1 request/answer round trips between two connections, in ms.

    Raises :class:`~mesh.errors.MeshError` subclasses when the broker refuses the probe
    (connection, rights) and :class:`TimeoutError` when an answer does not come.
    """
    probe = dataclasses.replace(settings, session_expiry_s=0)  # nothing of the probe outlives it
    root = f"mesh-up-probe/{uuid.uuid4().hex}"
    answers: asyncio.Queue[float] = asyncio.Queue()
    async with MqttTransport(probe) as caller, MqttTransport(probe) as answerer:

        async def answer(message: InboundMessage) -> None:
            await answerer.publish(f"{root}/answer", message.payload)

        await answerer.subscribe(f"{root}/request", answer)
        await caller.subscribe(f"{root}/answer", lambda _: answers.put_nowait(time.perf_counter()))
        best = float("inf")
        for _ in range(samples):
            sent = time.perf_counter()
            await caller.publish(f"{root}/request", b"ping", timeout=timeout_s)
            async with asyncio.timeout(timeout_s):
                best = min(best, (await answers.get() - sent) * 1000)
        return best
