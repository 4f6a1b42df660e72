"""Discovery and requests with many agents on one Mosquitto (issue 11's figures).

For each N (default 100 and 1,000): N echo agents spread over child processes (``--per-process``
agents each, as ``mesh run`` would serve them: one asyncio loop, one MQTT connection and one
card per agent), on one Mosquitto started from the repository's mosquitto.conf. The agents keep
their tasks as ``mesh run`` does by default, in a SQLite file per agent (in a temporary state
directory; one writer thread per process, files closed when idle), or with ``--memory`` in
memory (``task_store: ":memory:"``). Then, from this process:

- ``all_cards_s``: a new watcher (a :class:`~mesh.registry.DiscoveryRegistry`) subscribes and
  waits until it knows all N cards (the retained ones);
- ``new_agent_spread_ms``: 100 watchers (a connection and a registry each) are running; one
  more agent starts; the time between the first and the last watcher seeing it;
- ``random_rtt_ratio``: median ``message/send`` round trip to a random agent versus to one
  agent, in the same run (``rtt_us``, ``random_rtt_us``);
- ``rss_per_agent_kb``: the children's RSS beyond an agent-less child's, per agent, read after
  the idle window (``--idle-s``, longer than the journals' idle close: the agents at rest);
- ``broker_rss_mb``: Mosquitto's RSS;
- ``idle_discovery_msgs_per_s``: messages on ``{ns}/a2a/v1/discovery/#`` over ``--idle-s``
  seconds once every card is in (steady state);
- ``answered``: agents that answered one request each (all N);
- with ``--rollcall``: ``rollcall_all_cards_s``, the time from a roll call until a watcher has
  every agent's card again as a live (not retained) message, as a watcher on another node of a
  cluster that keeps retained messages per node would; ``rollcall_peak_msgs_per_s``, the highest
  rate of those messages over 100 ms buckets (the broker's load during it);
- with ``--startup``: ``startup_first_card_s`` and ``startup_last_card_s``, from starting one
  process serving all N agents (as one ``mesh run``) to a watcher seeing its first and last card.

Last line on stdout: ``{"runs": [{per N}, ...]}``.
Run: ``python bench/scale.py [--agents 100 1000 5000] [--per-process 250] [--memory] [--rollcall] [--startup]``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import AgentSettings
from agents.builtin.echo import EchoAgent
from agents.service import AgentService
from bench.harness import base_arguments, child, emit, progress, ratio
from mesh.broker import BrokerSettings
from mesh.brokertools.localbroker import LocalBroker, default_config_path
from mesh.client import MeshClient
from mesh.registry import DiscoveryRegistry, RegistryEvent
from mesh.rollcall import ROLLCALL_WINDOW_S, rollcall_payload
from mesh.transport import InboundMessage, MqttTransport
from topics import get_discovery_rollcall_topic

SETTINGS = AgentSettings(task_store=":memory:", name_check_timeout_s=None)
SQLITE_SETTINGS = AgentSettings(name_check_timeout_s=None)


def rss_kb(pid: int | str = "self") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


# ---------------------------------------------------------------- the child: agents


async def serve(url: str, namespace: str, first: int, count: int, sqlite: bool) -> None:
    broker = BrokerSettings.from_url(url)
    settings = SQLITE_SETTINGS if sqlite else SETTINGS
    services = [
        AgentService(EchoAgent(name=f"a{i}"), broker=broker, namespace=namespace, settings=settings)
        for i in range(first, first + count)
    ]
    for start in range(0, len(services), 50):  # a few at a time: the broker accepts them in turn
        await asyncio.gather(*(s.start() for s in services[start : start + 50]))
    print("ready", flush=True)
    await asyncio.Event().wait()  # until the parent terminates it (the wills clear the cards)


# ---------------------------------------------------------------- the parent: measurements


async def watchers_see_all(broker: BrokerSettings, namespace: str, n: int) -> float:
    started = time.perf_counter()
    transport = MqttTransport(broker)
    await transport.connect()
    registry = DiscoveryRegistry(transport, namespace)
    changed = asyncio.Event()
    registry.add_listener(lambda _e: changed.set())
    await registry.start()
    while len(registry.agents()) < n:
        changed.clear()
        await asyncio.wait_for(changed.wait(), 120)
    elapsed = time.perf_counter() - started
    await registry.stop()
    await transport.close()
    return elapsed


async def new_agent_spread(broker: BrokerSettings, namespace: str, watchers: int, n: int) -> float:
    transports = [MqttTransport(broker) for _ in range(watchers)]
    await asyncio.gather(*(t.connect() for t in transports))
    registries = [DiscoveryRegistry(t, namespace) for t in transports]
    loaded = asyncio.Event()
    for registry in registries:
        registry.add_listener(lambda _e: loaded.set())
    await asyncio.gather(*(r.start() for r in registries))
    # Every watcher has its N retained cards first: the spread is the newcomer's, not a backlog.
    while not all(len(r.agents()) >= n for r in registries):
        loaded.clear()
        await asyncio.wait_for(loaded.wait(), 120)
    seen: list[float] = []
    done = asyncio.Event()

    def on_event(event: RegistryEvent) -> None:
        if event.type == "added" and event.name == "newcomer":
            seen.append(time.perf_counter())
            if len(seen) == watchers:
                done.set()

    for registry in registries:
        registry.add_listener(on_event)
    newcomer = AgentService(EchoAgent(name="newcomer"), broker=broker, namespace=namespace, settings=SETTINGS)
    await newcomer.start()
    await asyncio.wait_for(done.wait(), 60)
    await newcomer.stop()
    for registry, transport in zip(registries, transports, strict=True):
        await registry.stop()
        await transport.close()
    return (max(seen) - min(seen)) * 1000


async def round_trips(client: MeshClient, n: int, requests: int) -> tuple[float, float, int]:
    # Every agent answers (the goal at 5,000): one request each, 100 in flight. This also sets up
    # the client's watch on each agent's card, a one-time SUBACK per agent the timings leave out.
    answered = 0
    semaphore = asyncio.Semaphore(100)

    async def ask(i: int) -> None:
        nonlocal answered
        async with semaphore:
            await client.send(f"a{i}", "hi", timeout=60)
            answered += 1

    await asyncio.gather(*(ask(i) for i in range(n)))
    single = []
    for _ in range(requests):
        t0 = time.perf_counter()
        await client.send("a0", "hi", timeout=60)
        single.append(time.perf_counter() - t0)
    spread = []
    for _ in range(requests):
        agent = f"a{random.randrange(n)}"
        t0 = time.perf_counter()
        await client.send(agent, "hi", timeout=60)
        spread.append(time.perf_counter() - t0)
    return statistics.median(single), statistics.median(spread), answered


async def idle_traffic(broker: BrokerSettings, namespace: str, n: int, window_s: float) -> float:
    transport = MqttTransport(broker)
    await transport.connect()
    received: list[InboundMessage] = []
    retained = asyncio.Event()

    def on_message(message: InboundMessage) -> None:
        received.append(message)
        if len(received) >= n:
            retained.set()

    await transport.subscribe(f"{namespace}/a2a/v1/discovery/#", on_message)
    await asyncio.wait_for(retained.wait(), 120)
    before = len(received)
    await asyncio.sleep(window_s)  # measuring a quiet window
    await transport.close()
    return (len(received) - before) / window_s


async def rollcall_cost(broker: BrokerSettings, namespace: str, n: int) -> tuple[float, float]:
    transport = MqttTransport(broker)
    await transport.connect()
    answers: dict[str, float] = {}
    retained = asyncio.Event()
    everyone = asyncio.Event()
    seen_retained = 0

    def on_message(message: InboundMessage) -> None:
        nonlocal seen_retained
        if message.retain:
            seen_retained += 1
            if seen_retained >= n:
                retained.set()
        elif "/agentcards/" in message.topic and message.payload:
            answers.setdefault(message.topic, time.perf_counter())
            if len(answers) >= n:
                everyone.set()

    await transport.subscribe(f"{namespace}/a2a/v1/discovery/#", on_message)
    await asyncio.wait_for(retained.wait(), 120)
    await asyncio.sleep(ROLLCALL_WINDOW_S + 0.5)  # the answers to earlier watchers' roll calls are over
    answers.clear()
    started = time.perf_counter()
    await transport.publish(get_discovery_rollcall_topic(namespace), rollcall_payload(ROLLCALL_WINDOW_S))
    await asyncio.wait_for(everyone.wait(), 60)
    elapsed = time.perf_counter() - started
    buckets: dict[int, int] = {}
    for at in answers.values():
        bucket = int((at - started) * 10)
        buckets[bucket] = buckets.get(bucket, 0) + 1
    await transport.close()
    return elapsed, max(buckets.values()) * 10.0


async def startup(url: str, namespace: str, n: int, store: str) -> tuple[float, float]:
    """One process serving ``n`` agents: seconds from its start to the first and the last card."""
    broker = BrokerSettings.from_url(url)
    transport = MqttTransport(broker)
    await transport.connect()
    cards: list[float] = []
    everyone = asyncio.Event()

    def on_card(message: InboundMessage) -> None:
        if message.payload and "/agentcards/" in message.topic:
            cards.append(time.perf_counter())
            if len(cards) >= n:
                everyone.set()

    await transport.subscribe(f"{namespace}/a2a/v1/discovery/agentcards/+", on_card)
    started = time.perf_counter()
    with child(["bench/scale.py", "--child", url, namespace, "0", str(n), store], timeout=600):
        await asyncio.wait_for(everyone.wait(), 300)
    await transport.close()
    return cards[0] - started, cards[-1] - started


async def measure(url: str, broker_pid: int, n: int, per_process: int, args: argparse.Namespace) -> dict[str, object]:
    namespace = f"bench/{uuid.uuid4().hex[:8]}"
    broker = BrokerSettings.from_url(url)
    progress(f"N={n}: starting {n} agents in {(n + per_process - 1) // per_process} process(es)")
    children = []
    started = time.perf_counter()
    store = "memory" if args.memory else "sqlite"
    with child(["bench/scale.py", "--child", url, namespace, "0", "0", store], timeout=60) as empty:
        baseline_kb = rss_kb(empty.pid)
    try:
        for first in range(0, n, per_process):
            count = min(per_process, n - first)
            ctx = child(["bench/scale.py", "--child", url, namespace, str(first), str(count), store], timeout=600)
            children.append(ctx)
        procs = [c.__enter__() for c in children]
        progress(f"N={n}: agents up in {time.perf_counter() - started:.1f} s")
        all_cards_s = await watchers_see_all(broker, namespace, n)
        progress(f"N={n}: one watcher has all cards in {all_cards_s:.2f} s")
        spread_ms = await new_agent_spread(broker, namespace, args.watchers, n)
        progress(f"N={n}: new agent seen by {args.watchers} watchers, first to last {spread_ms:.1f} ms")
        async with MeshClient.connect(broker, namespace) as client:
            single_s, random_s, answered = await round_trips(client, n, args.requests)
        progress(f"N={n}: rtt {single_s * 1e6:.0f} us, random {random_s * 1e6:.0f} us, {answered}/{n} answered")
        idle = await idle_traffic(broker, namespace, n, args.idle_s)
        agents_kb = sum(rss_kb(p.pid) for p in procs) - baseline_kb * len(procs)
        extra: dict[str, object] = {}
        if args.rollcall:
            rollcall_s, peak = await rollcall_cost(broker, namespace, n)
            progress(f"N={n}: roll call answered by all in {rollcall_s:.2f} s, peak {peak:.0f} msgs/s")
            extra |= {"rollcall_all_cards_s": round(rollcall_s, 3), "rollcall_peak_msgs_per_s": round(peak)}
        if args.startup:
            first_s, last_s = await startup(url, f"bench/{uuid.uuid4().hex[:8]}", n, store)
            progress(f"N={n}: one process of {n} agents: first card {first_s:.2f} s, last {last_s:.2f} s")
            extra |= {"startup_first_card_s": round(first_s, 3), "startup_last_card_s": round(last_s, 3)}
        return {
            "agents": n,
            "processes": len(procs),
            "task_store": store,
            "all_cards_s": round(all_cards_s, 3),
            "new_agent_spread_ms": round(spread_ms, 1),
            "rtt_us": round(single_s * 1e6, 1),
            "random_rtt_us": round(random_s * 1e6, 1),
            "random_rtt_ratio": ratio(random_s, single_s),
            "answered": answered,
            "rss_per_agent_kb": round(agents_kb / n, 1),
            "broker_rss_mb": round(rss_kb(broker_pid) / 1024, 1),
            "idle_discovery_msgs_per_s": round(idle, 3),
            **extra,
        }
    finally:
        for ctx in reversed(children):
            ctx.__exit__(None, None, None)


async def main(args: argparse.Namespace) -> None:
    runs = []
    for n in args.agents:
        broker = LocalBroker(default_config_path())  # a fresh broker per N: its RSS is this N's
        broker.start()
        try:
            pid = broker._process.pid if broker._process is not None else 0
            runs.append(await measure(broker.url, pid, n, args.per_process, args))
        finally:
            broker.stop()
            broker.remove()
    emit({"runs": runs})


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        _, _, url, ns, first, count, store = sys.argv
        asyncio.run(serve(url, ns, int(first), int(count), store == "sqlite"))
        sys.exit(0)
    parser = base_arguments(__doc__ or "")
    parser.add_argument("--agents", type=int, nargs="+", default=[100, 1000])
    parser.add_argument("--per-process", type=int, default=250)
    parser.add_argument("--watchers", type=int, default=100)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--idle-s", type=float, default=8.0)
    parser.add_argument("--memory", action="store_true", help="agents keep tasks in memory (default: SQLite files)")
    parser.add_argument("--rollcall", action="store_true", help="measure a roll call: time to every card, peak rate")
    parser.add_argument("--startup", action="store_true", help="measure one process serving all N: first, last card")
    asyncio.run(main(parser.parse_args()))
