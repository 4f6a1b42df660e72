"""A broker restart under load: how soon everyone is back, and whether any request is lost.

The broker is the persistent Mosquitto ``mesh up`` runs (the repository's mosquitto.conf with
``persistence true`` and a 1 s autosave). An echo agent (its own process, default settings and
task store) and a client (this process, default settings) are connected; the client sends
``--rate`` requests per second, each with a ``--timeout`` deadline, as ``mesh send`` would. After
``--before-s`` seconds the broker is killed (SIGKILL; ``--stop`` for SIGTERM), stays down
``--outage-s`` seconds, and comes back with its state from disk; the load goes on for
``--after-s`` seconds. Then:

- ``client_back_s`` / ``agent_back_s``: from the broker's return to the client's connection being
  up again (its subscriptions acknowledged), and to the agent's card being published again
  (what the agent does once it is back);
- ``requests``, ``past_timeout``, ``failed``: requests sent, those that ran past their deadline
  although the agent is there (the goal is 0), and any other failure;
- with ``--herd N`` (default 1,000): N connections of default settings in a child process (as
  ``mesh run`` of N agents would hold), through a second restart: ``herd_back_p50_s`` /
  ``herd_back_max_s`` after the broker's return, and ``herd_peak_connects_per_100ms``, the most
  CONNECTs the broker took in 100 ms (the thundering herd the jittered backoff spreads).

Last line on stdout: one JSON object with those figures. No peer is compared: an HTTP A2A
client has no connection to lose; the figure that matters is the mesh's own, before and after.
Run: ``python bench/restart.py [--outage-s 8] [--rate 200] [--timeout 15] [--herd 1000] [--stop]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import child, emit, progress
from mesh.a2a import Task, TaskState
from mesh.broker import BrokerSettings
from mesh.brokertools.localbroker import LocalBroker, default_config_path, persistence_config
from mesh.client import MeshClient
from mesh.errors import MeshError, RequestTimeoutError
from mesh.transport import MqttTransport
from topics import get_agent_discovery_topic

AGENT = "restart-echo"


async def serve_agent(url: str, namespace: str) -> None:
    from agents.builtin.echo import EchoAgent
    from agents.service import AgentService

    agent = EchoAgent(name=AGENT)
    service = AgentService(agent, broker=BrokerSettings.from_url(url), namespace=namespace)
    await service.start()
    print("ready", flush=True)
    await asyncio.Event().wait()


async def hold_herd(url: str, count: int) -> None:
    """``count`` connections; prints, per reconnect, the time it happened (epoch seconds)."""
    transports = [
        MqttTransport(BrokerSettings.from_url(url), client_id=f"herd-{uuid.uuid4().hex}") for _ in range(count)
    ]
    for transport in transports:
        await transport.connect()
        transport.add_connect_listener(lambda _present: _back())
    print("ready", flush=True)
    await asyncio.Event().wait()


def _back() -> None:
    print(f"back {time.time():.4f}", flush=True)


async def load_through_restart(
    broker: LocalBroker, url: str, namespace: str, args: argparse.Namespace
) -> dict[str, object]:
    outcomes: list[asyncio.Task[object]] = []
    async with MeshClient.connect(BrokerSettings.from_url(url), namespace) as client:
        await client.wait_for_agent(AGENT, timeout=10)
        async with MqttTransport(BrokerSettings.from_url(url), client_id=f"restart-watch-{uuid.uuid4().hex}") as watch:
            cards: asyncio.Queue[float] = asyncio.Queue()
            topic = get_agent_discovery_topic(namespace, AGENT)
            await watch.subscribe(
                topic, lambda message: cards.put_nowait(time.monotonic()) if message.payload else None
            )
            await cards.get()  # the retained card
            stop = asyncio.Event()

            async def one(n: int) -> object:
                try:
                    return await client.send(AGENT, f"load {n}", timeout=args.timeout)
                except RequestTimeoutError as exc:
                    return exc
                except MeshError as exc:
                    return exc

            async def generate() -> None:
                started, n = time.monotonic(), 0
                while not stop.is_set():
                    outcomes.append(asyncio.create_task(one(n)))
                    n += 1
                    await asyncio.sleep(max(0.0, started + n / args.rate - time.monotonic()))

            generator = asyncio.create_task(generate())
            await asyncio.sleep(args.before_s)
            progress(f"{len(outcomes)} requests sent; {'stopping' if args.stop else 'killing'} the broker")
            broker.stop() if args.stop else broker.kill()
            await asyncio.sleep(args.outage_s)
            while not cards.empty():
                cards.get_nowait()
            broker.start()
            returned = time.monotonic()
            progress("the broker is back")
            await watch.wait_connected(timeout=60)
            await client.transport.wait_connected(timeout=60)
            client_back = time.monotonic() - returned
            agent_back = (await asyncio.wait_for(cards.get(), 60)) - returned
            await asyncio.sleep(args.after_s)
            stop.set()
            await generator
            results = await asyncio.gather(*outcomes)
    completed = sum(isinstance(r, Task) and r.status.state is TaskState.completed for r in results)
    past = sum(isinstance(r, RequestTimeoutError) for r in results)
    return {
        "client_back_s": round(client_back, 3),
        "agent_back_s": round(agent_back, 3),
        "requests": len(results),
        "completed": completed,
        "past_timeout": past,
        "failed": len(results) - completed - past,
    }


def herd_through_restart(broker: LocalBroker, url: str, count: int, stop: bool) -> dict[str, object]:
    progress(f"{count} connections in a child process")
    with child([__file__, "--hold-herd", str(count), "--broker", url], timeout=120) as proc:
        broker.stop() if stop else broker.kill()
        time.sleep(2)
        broker.start()
        returned = time.time()
        assert proc.stdout is not None
        backs: list[float] = []
        deadline = time.monotonic() + 60
        while len(backs) < count and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if line.startswith("back "):
                backs.append(float(line.split()[1]) - returned)
    if len(backs) < count:
        raise RuntimeError(f"only {len(backs)} of {count} connections came back within 60 s")
    buckets: dict[int, int] = {}
    for at in backs:
        buckets[int(at * 10)] = buckets.get(int(at * 10), 0) + 1
    return {
        "herd": count,
        "herd_back_p50_s": round(statistics.median(backs), 3),
        "herd_back_max_s": round(max(backs), 3),
        "herd_peak_connects_per_100ms": max(buckets.values()),
    }


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="mesh-bench-restart-") as store:
        broker = LocalBroker(default_config_path(), extra_config=persistence_config(Path(store)))
        broker.start()
        try:
            namespace = f"bench/{uuid.uuid4().hex[:8]}"
            with child([__file__, "--serve-agent", "--broker", broker.url, "--namespace", namespace]):
                result = await load_through_restart(broker, broker.url, namespace, args)
            if args.herd:
                result |= await asyncio.to_thread(herd_through_restart, broker, broker.url, args.herd, args.stop)
        finally:
            broker.remove()
    emit(
        {
            **result,
            "outage_s": args.outage_s,
            "rate": args.rate,
            "timeout_s": args.timeout,
            "how": "stop" if args.stop else "kill",
        }
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outage-s", type=float, default=8.0)
    parser.add_argument("--before-s", type=float, default=10.0, help="load before the broker goes (past an autosave)")
    parser.add_argument("--after-s", type=float, default=12.0, help="load after it is back")
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second")
    parser.add_argument("--timeout", type=float, default=15.0, help="each request's deadline, seconds")
    parser.add_argument("--herd", type=int, default=1000, help="connections for the herd figures (0: none)")
    parser.add_argument("--stop", action="store_true", help="SIGTERM the broker instead of SIGKILL")
    parser.add_argument("--broker", help=argparse.SUPPRESS)
    parser.add_argument("--namespace", help=argparse.SUPPRESS)
    parser.add_argument("--serve-agent", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--hold-herd", type=int, help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.serve_agent:
        asyncio.run(serve_agent(parsed.broker, parsed.namespace))
    elif parsed.hold_herd:
        asyncio.run(hold_herd(parsed.broker, parsed.hold_herd))
    else:
        asyncio.run(main(parsed))
