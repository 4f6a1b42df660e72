"""Discovery and requests with many agents on one Mosquitto (issue 11's figures).

For each N (default 100 and 1,000): N echo agents spread over child processes (``--per-process``
agents each, as ``mesh run`` would serve them: one asyncio loop, one MQTT connection and one
card per agent), on one Mosquitto started from the repository's mosquitto.conf. The agents keep
their tasks as ``mesh run`` does by default, in a SQLite file per agent (in a temporary state
directory; one writer process per ``mesh run``, its RSS counted, files closed when idle), or
with ``--memory`` in memory (``task_store: ":memory:"``). Then, from this process:

- ``all_cards_s``: a new watcher (a :class:`~mesh.discovery.registry.DiscoveryRegistry`) subscribes and
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
  ``mesh run`` of a config file of N echo agents (its defaults: name checks, a SQLite journal
  each) to the first card any of ``--watchers`` connections on the card topics sees, and to the
  moment every watcher has every card; ``startup_cpu_s``, the CPU the process used until then
  (steadier than the wall time on a loaded machine). The modules are compiled first, as an
  installed package's are. Each is the median of ``--startup-runs`` start-ups (default 5), with
  every run's last card in ``startup_last_card_runs_s``.

``--only`` skips the steady-state figures (spread, round trips, RSS, idle traffic): with
``--rollcall`` or ``--startup``, it measures those alone (5,000 agents in minutes, not tens).

Last line on stdout: ``{"runs": [{per N}, ...]}``.
Run: ``python bench/scale.py [--agents 100 1000 5000] [--per-process 250] [--memory] [--rollcall] [--startup]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents import AgentSettings
from agents.builtin.echo import EchoAgent
from agents.service import AgentService
from bench.harness import ROOT, base_arguments, child, emit, progress, ratio
from bench.probes import cpu_s, rss_kb, tree_rss_kb, watch_topic
from mesh.broker import BrokerSettings
from mesh.brokertools.localbroker import LocalBroker, default_config_path
from mesh.client import MeshClient
from mesh.discovery.registry import DiscoveryRegistry, RegistryEvent
from mesh.discovery.rollcall import ROLLCALL_MAX_WINDOW_S, ROLLCALL_WINDOW_S, rollcall_payload
from mesh.transport import InboundMessage, MqttTransport
from topics import get_agent_discovery_topic, get_discovery_rollcall_topic

SETTINGS = AgentSettings(task_store=":memory:", name_check_timeout_s=None)
SQLITE_SETTINGS = AgentSettings(name_check_timeout_s=None)


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
    """Seconds from a roll call until this watcher has every agent's card again as a live message,
    and the peak rate of those cards (every one, repeats included) over 100 ms buckets."""
    transport = MqttTransport(broker)
    await transport.connect()
    answers: dict[str, float] = {}
    arrivals: list[float] = []
    retained = asyncio.Event()
    everyone = asyncio.Event()
    seen_retained = 0
    listening = False

    def on_message(message: InboundMessage) -> None:
        nonlocal seen_retained
        if message.retain:
            seen_retained += 1
            if seen_retained >= n:
                retained.set()
        elif listening and "/agentcards/" in message.topic and message.payload:
            now = time.perf_counter()
            arrivals.append(now)
            answers.setdefault(message.topic, now)
            if len(answers) >= n:
                everyone.set()

    await transport.subscribe(f"{namespace}/a2a/v1/discovery/#", on_message)
    await asyncio.wait_for(retained.wait(), 120)
    # The answers to the earlier watchers' roll calls (one each at its start) are over by then.
    await asyncio.sleep(ROLLCALL_MAX_WINDOW_S + 0.5)
    listening = True
    started = time.perf_counter()
    await transport.publish(get_discovery_rollcall_topic(namespace), rollcall_payload(ROLLCALL_WINDOW_S))
    await asyncio.wait_for(everyone.wait(), 60)
    elapsed = time.perf_counter() - started
    await asyncio.sleep(ROLLCALL_WINDOW_S)  # late repeats count for the rate too
    buckets: dict[int, int] = {}
    for at in arrivals:
        bucket = int((at - started) * 10)
        buckets[bucket] = buckets.get(bucket, 0) + 1
    await transport.close()
    return elapsed, max(buckets.values()) * 10.0


def mesh_command() -> list[str]:
    """The ``mesh`` console script of this interpreter's environment, else ``python -m mesh.cli``."""
    script = Path(sys.executable).parent / "mesh"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "mesh.cli"]


async def startup(url: str, namespace: str, n: int, store: str, watchers: int) -> dict[str, object]:
    """One ``mesh run`` of a config file of ``n`` echo agents (its defaults: name checks, a SQLite
    journal per agent unless ``--memory``), with ``watchers`` connections subscribed to the card
    topics: seconds from starting the process to the first card any watcher sees, and to the last
    card of the last watcher (every watcher has every card); the CPU the process used until then."""
    broker = BrokerSettings.from_url(url)
    first: list[float] = []
    complete: list[float] = []
    everyone = asyncio.Event()

    def watcher() -> Callable[[bytes, bool], None]:
        seen: set[bytes] = set()

        def on_card(topic: bytes, has_payload: bool) -> None:
            if not has_payload or topic in seen:
                return
            seen.add(topic)
            if not first:
                first.append(time.perf_counter())
            if len(seen) == n:
                complete.append(time.perf_counter())
                if len(complete) == watchers:
                    everyone.set()

        return on_card

    cards = f"{get_agent_discovery_topic(namespace)}/+"
    sockets = await asyncio.gather(*(watch_topic(broker, cards, watcher()) for _ in range(watchers)))
    with tempfile.TemporaryDirectory(prefix="mesh-bench-startup-") as scratch:
        config = Path(scratch) / "agents.yaml"
        entry = "  - class: agents.builtin.echo:EchoAgent\n    name: a{}\n" + (
            '    task_store: ":memory:"\n' if store == "memory" else ""
        )
        config.write_text(f"namespace: {namespace}\nagents:\n" + "".join(entry.format(i) for i in range(n)))
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        # As an installed mesh starts: its modules compiled already (pip does it at install), not
        # compiled again at every start because this machine sets PYTHONDONTWRITEBYTECODE.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        warm = [sys.executable, "-c", "import mesh.cli.running, agents.builtin.echo, agents.service"]
        await (await asyncio.create_subprocess_exec(*warm, env=env)).wait()
        command = [*mesh_command(), "run", str(config), "--broker", url, "--log-level", "warning"]
        started = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(*command, env=env, stdin=subprocess.DEVNULL)
        try:
            await asyncio.wait_for(everyone.wait(), 300)
            used_s = cpu_s(proc.pid)
        finally:
            proc.terminate()  # its agents clear their cards and disconnect
            try:
                await asyncio.wait_for(proc.wait(), 120)
            except TimeoutError:
                proc.kill()
                await proc.wait()
    for reading, writer in sockets:
        reading.cancel()
        writer.close()
    return {
        "startup_first_card_s": round(first[0] - started, 3),
        "startup_last_card_s": round(max(complete) - started, 3),
        "startup_cpu_s": round(used_s, 2),
        "startup_watchers": watchers,
    }


def startup_medians(runs: list[dict[str, object]]) -> dict[str, object]:
    """The median of each start-up figure over ``runs`` (a 2-core machine's wall times wander
    by ±30% from one start to the next), and every run's last card."""
    medians: dict[str, object] = {}
    for key in ("startup_first_card_s", "startup_last_card_s", "startup_cpu_s"):
        medians[key] = round(statistics.median(float(str(run[key])) for run in runs), 3)
    medians["startup_last_card_runs_s"] = [run["startup_last_card_s"] for run in runs]
    medians["startup_watchers"] = runs[0]["startup_watchers"]
    return medians


async def steady_state(
    broker: BrokerSettings,
    namespace: str,
    n: int,
    procs: list[subprocess.Popen[str]],
    baseline_kb: int,
    broker_pid: int,
    args: argparse.Namespace,
) -> dict[str, object]:
    """The figures of N agents at work and at rest (all but the roll call's and the start's)."""
    spread_ms = await new_agent_spread(broker, namespace, args.watchers, n)
    progress(f"N={n}: new agent seen by {args.watchers} watchers, first to last {spread_ms:.1f} ms")
    async with MeshClient.connect(broker, namespace) as client:
        single_s, random_s, answered = await round_trips(client, n, args.requests)
    progress(f"N={n}: rtt {single_s * 1e6:.0f} us, random {random_s * 1e6:.0f} us, {answered}/{n} answered")
    idle = await idle_traffic(broker, namespace, n, args.idle_s)
    agents_kb = sum(tree_rss_kb(p.pid) for p in procs) - baseline_kb * len(procs)
    return {
        "new_agent_spread_ms": round(spread_ms, 1),
        "rtt_us": round(single_s * 1e6, 1),
        "random_rtt_us": round(random_s * 1e6, 1),
        "random_rtt_ratio": ratio(random_s, single_s),
        "answered": answered,
        "rss_per_agent_kb": round(agents_kb / n, 1),
        "broker_rss_mb": round(rss_kb(broker_pid) / 1024, 1),
        "idle_discovery_msgs_per_s": round(idle, 3),
    }


async def measure(url: str, broker_pid: int, n: int, per_process: int, args: argparse.Namespace) -> dict[str, object]:
    namespace = f"bench/{uuid.uuid4().hex[:8]}"
    broker = BrokerSettings.from_url(url)
    store = "memory" if args.memory else "sqlite"
    extra: dict[str, object] = {"agents": n}
    if args.startup:  # first, on the fresh broker: nothing else runs meanwhile
        runs = []
        for run in range(args.startup_runs):
            figures = await startup(url, f"bench/{uuid.uuid4().hex[:8]}", n, store, args.watchers)
            progress(
                f"N={n}: mesh run {run + 1}/{args.startup_runs} of {n} agents: first card "
                f"{figures['startup_first_card_s']} s, last {figures['startup_last_card_s']} s ({args.watchers} "
                f"watchers), {figures['startup_cpu_s']} s of CPU"
            )
            runs.append(figures)
        extra |= startup_medians(runs)
        if args.only and not args.rollcall:
            return extra
    progress(f"N={n}: starting {n} agents in {(n + per_process - 1) // per_process} process(es)")
    children = []
    started = time.perf_counter()
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
        steady: dict[str, object] = {}
        if not args.only:
            steady = await steady_state(broker, namespace, n, procs, baseline_kb, broker_pid, args)
        if args.rollcall:
            rollcall_s, peak = await rollcall_cost(broker, namespace, n)
            progress(f"N={n}: roll call answered by all in {rollcall_s:.2f} s, peak {peak:.0f} msgs/s")
            extra |= {"rollcall_all_cards_s": round(rollcall_s, 3), "rollcall_peak_msgs_per_s": round(peak)}
        return {
            "agents": n,
            "processes": len(procs),
            "task_store": store,
            "all_cards_s": round(all_cards_s, 3),
            **steady,
            **extra,
        }
    finally:
        for ctx in reversed(children):
            ctx.__exit__(None, None, None)


def raise_open_files_limit(needed: int) -> None:
    """Let this process, and the broker and agents it starts, hold ``needed`` sockets: each agent has
    a connection, and Mosquitto a descriptor per connection (the soft limit is often 1,024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < needed:
        raised = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
        if raised < needed:
            progress(f"open files limited to {raised} (hard limit): raise it (ulimit -Hn) for {needed}")


async def main(args: argparse.Namespace) -> None:
    # Agents, the watchers and the client here, and as many descriptors again in the broker.
    raise_open_files_limit(2 * max(args.agents) + args.watchers + 1000)
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
    parser.add_argument("--startup", action="store_true", help="measure one mesh run of N agents: first, last card")
    parser.add_argument("--startup-runs", type=int, default=5, help="start-ups measured (their medians reported)")
    parser.add_argument("--only", action="store_true", help="skip the steady-state figures (with --rollcall/--startup)")
    asyncio.run(main(parser.parse_args()))
