"""Delegation chains: the message/send round trip through 1 to 4 agents, and the cost per hop.

A chain of length n is n agents: n-1 relays, then an echo. The client sends ``message/send``
to the first agent; each relay hands the text on with ``ctx.delegate`` (``message/send``, as
SAM does; the peer's status events come back to the relay too) and answers with what it got
back; the echo answers the text. So length 1 is client -> echo, the figure of
bench/agent.py, and each further agent adds one delegation: a request, the peer's status
events and its final Task, each a QoS 1 publish through the broker.

Agents: ``echo``, ``relay1`` (-> echo), ``relay2`` (-> relay1), ``relay3`` (-> relay2); a
chain of length n starts at ``relay{n-1}``. Two layouts, each measured in the same run:

- ``process`` (the headline figures): one process per agent, as separate services are
  deployed. Round trips are sequential, so little runs at once: mostly the broker and the
  agent at work, plus the relay above it parsing its status events. Each message wakes
  another process, and on 2 cores that overlap costs a little; this is the conservative case.
- ``shared``: the four agents in one process (one asyncio loop, one MQTT connection each), as
  ``mesh run`` / ``mesh up`` serve the agents of one file. No wake-ups between agents, but
  all their work queues on one loop.

The client (this process) measures sequential round trips, median after a warm-up, per chain
length, taking the lengths in turn (1, 2, 3, 4, 1, 2, ...) so that a change in the machine's
load weighs on all of them alike; ``per_hop_us`` is the least-squares slope of the medians
against the chain length.
Last line on stdout::

    {"rtt_us": {"1": ..., "2": ..., "3": ..., "4": ...}, "per_hop_us": ..., "p99_us": {...}, "shared": {...}, ...}

Run: ``python bench/delegation.py [--broker URL] [--requests N] [--layout process|shared|both]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import Agent, Reply, TaskContext
from bench.harness import base_arguments, broker_url, child, emit, median_us, p99_us, progress
from mesh.a2a import Message, Task, get_text_from_message
from mesh.client import MeshClient

MAX_LENGTH = 4
WARM_UP = 200
TEXT = "Analyze the quarterly sales data and summarise the top three trends."


class Relay(Agent):
    """Delegates the text to ``next_agent`` and answers with that agent's answer."""

    name = "relay"

    def __init__(self, *, next_agent: str, **options: Any) -> None:
        super().__init__(**options)
        self.next_agent = next_agent

    async def handle(self, message: Message, ctx: TaskContext) -> Reply:
        task = await ctx.delegate(self.next_agent, get_text_from_message(message))
        assert task.status.message is not None
        return Reply.from_message(task.status.message)


def head(length: int) -> str:
    """The first agent of a chain of ``length`` agents."""
    return "echo" if length == 1 else f"relay{length - 1}"


def build(name: str) -> Agent:
    from agents.builtin.echo import EchoAgent

    if name == "echo":
        return EchoAgent()
    return Relay(name=name, next_agent=head(int(name.removeprefix("relay"))))


def slope(points: dict[int, float]) -> float:
    """Least-squares slope of y against x."""
    n = len(points)
    mean_x = sum(points) / n
    mean_y = sum(points.values()) / n
    num = sum((x - mean_x) * (y - mean_y) for x, y in points.items())
    den = sum((x - mean_x) ** 2 for x in points)
    return round(num / den, 1)


async def measure(url: str, namespace: str, requests: int) -> dict[str, Any]:
    lengths = range(1, MAX_LENGTH + 1)
    samples: dict[int, list[float]] = {length: [] for length in lengths}
    async with MeshClient.connect(url, namespace) as client:
        for length in lengths:
            await client.wait_for_agent(head(length), timeout=10)

        async def call(length: int) -> float:
            start = time.perf_counter()
            task = await client.send(head(length), TEXT)
            elapsed = time.perf_counter() - start
            assert isinstance(task, Task) and task.status.state.value == "completed", task
            assert task.status.message is not None and get_text_from_message(task.status.message) == TEXT
            return elapsed

        for _ in range(WARM_UP):
            for length in lengths:
                await call(length)
        # Round robin over the lengths, so that a change in the machine's load (other work,
        # CPU frequency) weighs on every length alike instead of bending the slope.
        for done in range(requests):
            for length in lengths:
                samples[length].append(await call(length))
            if (done + 1) % max(1, requests // 4) == 0:
                progress(f"  {done + 1}/{requests} rounds")
    rtt = {length: median_us(samples[length]) for length in lengths}
    progress("  median round trip by chain length: " + ", ".join(f"{k}: {v:.0f} us" for k, v in rtt.items()))
    return {
        "rtt_us": {str(k): v for k, v in rtt.items()},
        "per_hop_us": slope(rtt),
        "p99_us": {str(k): p99_us(v) for k, v in samples.items()},
    }


@contextlib.contextmanager
def agents_running(layout: str, url: str, namespace: str) -> Iterator[None]:
    names = [head(length) for length in range(1, MAX_LENGTH + 1)]
    script = str(Path(__file__).resolve())
    groups = [[name] for name in names] if layout == "process" else [names]
    with contextlib.ExitStack() as stack:
        for group in groups:
            stack.enter_context(child([script, "--serve", *group, "--broker", url, "--namespace", namespace]))
        yield


def main() -> None:
    parser = base_arguments(__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="sequential round trips per chain length")
    parser.add_argument(
        "--layout",
        choices=("process", "shared", "both"),
        default="both",
        help="one process per agent, all agents in one process, or both (default)",
    )
    parser.add_argument("--serve", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--namespace", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.broker, args.namespace))
        return

    layouts = ("process", "shared") if args.layout == "both" else (args.layout,)
    results: dict[str, dict[str, Any]] = {}
    with broker_url(args.broker) as url:
        for layout in layouts:
            namespace = f"bench/{uuid.uuid4().hex[:8]}"
            progress(f"{layout} layout: {args.requests} sequential round trips per chain length 1-{MAX_LENGTH}")
            with agents_running(layout, url, namespace):
                results[layout] = asyncio.run(measure(url, namespace, args.requests))
            progress(f"{layout}: per hop {results[layout]['per_hop_us']} us")
    first, *others = layouts  # the headline figures; the other layout's nested under its name
    emit(
        {
            **results[first],
            "layout": first,
            **{layout: results[layout] for layout in others},
            "requests": args.requests,
            "warm_up": WARM_UP,
        }
    )


async def serve(names: list[str], url: str, namespace: str) -> None:
    from agents.service import AgentService
    from mesh.broker import BrokerSettings

    broker = BrokerSettings.from_url(url)
    services = [AgentService(build(name), broker=broker, namespace=namespace) for name in names]
    for service in services:
        await service.start()
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    main()
