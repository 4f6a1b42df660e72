"""message/send to a worker-backed echo vs a Python echo agent, in the same run.

One child process serves both agents on the same broker: ``echo`` (agents.builtin.echo, a
Python handler) and ``wecho`` (agents/a2e/examples/echo_worker.py, a plain-Python A2E worker
behind a WorkerAgent: NDJSON over its stdin/stdout); with Node installed also ``wshout``, the
JavaScript example. This process calls them in turn, one request at a time, so both see the
same broker and machine load. The difference of the medians is what the worker path adds.
``a2e_stdio_rtt_us`` is its floor: a ``skill/call`` round trip to the same worker process
straight over its stdio, without the mesh.

On a loaded machine every extra process wake-up waits for a CPU, and the worker path has two
more (the worker, then the agent again) than the Python agent. So the run also measures, for
each agent alone, per request, from the scheduler's own accounting (Linux
``/proc/<pid>/task/<tid>/schedstat``) of the serving process and its worker processes:
``*_cpu_us``, the CPU time spent, which load does not inflate (``worker_process_cpu_us`` is
the worker's share), and ``*_wait_us``, the time spent runnable but waiting for a CPU, which
is what load adds.

Last line on stdout::

    {"python_echo_rtt_us": ..., "worker_echo_rtt_us": ..., "worker_added_us": ..., "rtt_ratio": ...,
     "python_echo_p99_us": ..., "worker_echo_p99_us": ..., "a2e_stdio_rtt_us": ...,
     "python_echo_cpu_us": ..., "worker_echo_cpu_us": ..., "worker_added_cpu_us": ...,
     "worker_process_cpu_us": ..., "python_echo_wait_us": ..., "worker_echo_wait_us": ...,
     "worker_added_wait_us": ..., "node_worker_rtt_us": ..., "requests": ...}

Run: ``python bench/worker.py [--broker URL] [--requests N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import base_arguments, broker_url, child, emit, median_us, p99_us, progress, ratio
from mesh.client import MeshClient

TEXT = "Analyze the quarterly sales data and summarise the top three trends."
EXAMPLES = Path(__file__).resolve().parent.parent / "agents" / "a2e" / "examples"
# agent name -> the metadata that picks its skill
TARGETS: dict[str, dict[str, Any] | None] = {"echo": None, "wecho": {"skill": "echo"}, "wshout": {"skill": "shout"}}


async def measure(
    url: str, namespace: str, agents: list[str], requests: int, server_pid: int
) -> tuple[dict[str, list[float]], dict[str, SchedStats]]:
    async with MeshClient.connect(url, namespace) as client:
        for agent in agents:
            await client.wait_for_agent(agent, timeout=10)

        async def call(agent: str) -> float:
            start = time.perf_counter()
            task = await client.send(agent, TEXT, metadata=TARGETS[agent])
            elapsed = time.perf_counter() - start
            assert task.status.state.value == "completed", task  # type: ignore[union-attr]
            return elapsed

        for _ in range(200):  # warm-up
            for agent in agents:
                await call(agent)
        samples: dict[str, list[float]] = {agent: [] for agent in agents}
        for _ in range(requests):  # interleaved, so drift in load hits every agent alike
            for agent in agents:
                samples[agent].append(await call(agent))
        stats: dict[str, SchedStats] = {}
        for agent in agents[:2]:  # one agent at a time, so the CPU spent is its own
            before = process_tree_stats(server_pid)
            for _ in range(requests):
                await call(agent)
            stats[agent] = (process_tree_stats(server_pid) - before) / requests
        return samples, stats


@dataclass(frozen=True)
class SchedStats:
    """Seconds on a CPU and waiting for one: of the serving process, and of its children."""

    cpu: float = 0.0
    wait: float = 0.0
    children_cpu: float = 0.0

    def __sub__(self, other: SchedStats) -> SchedStats:
        return SchedStats(self.cpu - other.cpu, self.wait - other.wait, self.children_cpu - other.children_cpu)

    def __truediv__(self, count: int) -> SchedStats:
        return SchedStats(self.cpu / count, self.wait / count, self.children_cpu / count)


def process_tree_stats(pid: int) -> SchedStats:
    """The scheduler's accounting (ns, per thread) of ``pid`` and its descendants, summed."""
    cpu = wait = children_cpu = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                on_cpu, waiting = (int(f) for f in (task / "schedstat").read_text().split()[:2])
                cpu += on_cpu
                wait += waiting
                children_cpu += on_cpu if current != pid else 0
                pending.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # it exited meanwhile
    return SchedStats(cpu / 1e9, wait / 1e9, children_cpu / 1e9)


async def stdio_floor(requests: int) -> list[float]:
    from agents.a2e.messages import SkillCallRequest
    from agents.a2e.process import WorkerCommand, WorkerProcess

    worker = WorkerProcess(WorkerCommand.of([sys.executable, str(EXAMPLES / "echo_worker.py")]), name="floor")
    await worker.start(agent_caps=[], timeout=10)
    samples = []
    try:
        for index in range(200 + requests):
            start = time.perf_counter()
            call = await worker.open_call(SkillCallRequest(name="echo", arguments={"text": TEXT}))
            await call.result()
            if index >= 200:  # after the warm-up
                samples.append(time.perf_counter() - start)
    finally:
        await worker.stop()
    return samples


def main() -> None:
    parser = base_arguments(__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="sequential requests per agent")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--node", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--namespace", default=f"bench/{uuid.uuid4().hex[:8]}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.broker, args.namespace, node=args.node))
        return

    node = shutil.which("node") is not None
    agents = ["echo", "wecho", *(["wshout"] if node else [])]
    script = str(Path(__file__).resolve())
    serve_args = [script, "--serve", "--namespace", args.namespace, *(["--node"] if node else [])]
    with broker_url(args.broker) as url, child([*serve_args, "--broker", url]) as server:
        progress(f"{args.requests} sequential requests to each of {', '.join(agents)}, interleaved; then CPU")
        samples, stats = asyncio.run(measure(url, args.namespace, agents, args.requests, server.pid))
    progress(f"{args.requests} skill/call round trips straight over the worker's stdio")
    floor = asyncio.run(stdio_floor(args.requests))
    python, worker = median_us(samples["echo"]), median_us(samples["wecho"])
    progress(f"python echo {python} us, worker echo {worker} us")
    emit(
        {
            "python_echo_rtt_us": python,
            "worker_echo_rtt_us": worker,
            "worker_added_us": round(worker - python, 1),
            "rtt_ratio": ratio(worker, python),
            "python_echo_p99_us": p99_us(samples["echo"]),
            "worker_echo_p99_us": p99_us(samples["wecho"]),
            "a2e_stdio_rtt_us": median_us(floor),
            "python_echo_cpu_us": us(stats["echo"].cpu),
            "worker_echo_cpu_us": us(stats["wecho"].cpu),
            "worker_added_cpu_us": us(stats["wecho"].cpu - stats["echo"].cpu),
            "worker_process_cpu_us": us(stats["wecho"].children_cpu),
            "python_echo_wait_us": us(stats["echo"].wait),
            "worker_echo_wait_us": us(stats["wecho"].wait),
            "worker_added_wait_us": us(stats["wecho"].wait - stats["echo"].wait),
            "node_worker_rtt_us": median_us(samples["wshout"]) if node else None,
            "requests": args.requests,
        }
    )


def us(seconds: float) -> float:
    return round(seconds * 1e6, 1)


async def serve(url: str, namespace: str, *, node: bool) -> None:
    from agents.a2e import WorkerAgent
    from agents.builtin.echo import EchoAgent
    from agents.service import AgentService
    from mesh.broker import BrokerSettings

    broker = BrokerSettings.from_url(url)
    agents = [EchoAgent(), WorkerAgent(name="wecho", worker=[sys.executable, str(EXAMPLES / "echo_worker.py")])]
    if node:
        agents.append(WorkerAgent(name="wshout", worker=["node", "shout.js"], cwd=EXAMPLES, env={"SHOUT_LEVEL": "0"}))
    services = [AgentService(agent, broker=broker, namespace=namespace) for agent in agents]
    for service in services:
        await service.start()
    print("ready", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        for service in services:
            await service.stop()


if __name__ == "__main__":
    main()
