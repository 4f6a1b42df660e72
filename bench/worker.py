"""message/send to a worker-backed echo vs a Python echo agent, in the same run.

One child process serves both agents on the same broker: ``echo`` (agents.builtin.echo, a
Python handler) and ``wecho`` (agents/a2e/examples/echo_worker.py, a plain-Python A2E worker
behind a WorkerAgent: NDJSON over its stdin/stdout); with Node installed also ``wshout``, the
JavaScript example. This process calls them in turn, one request at a time, so both see the
same broker and machine load. The difference of the medians is what the worker path adds.
``a2e_stdio_rtt_us`` is its floor: a ``skill/call`` round trip to the same worker process
straight over its stdio, without the mesh.

On a loaded machine every extra process wake-up waits for a CPU, and the worker path has two
more (the worker, then the agent again) than the Python agent. So the run also measures CPU
time, which load does not inflate: ``*_cpu_us`` is the CPU (user + system) the serving
process and its worker processes spent per request, for each agent alone (Linux ``/proc``).

Last line on stdout::

    {"python_echo_rtt_us": ..., "worker_echo_rtt_us": ..., "worker_added_us": ..., "rtt_ratio": ...,
     "python_echo_p99_us": ..., "worker_echo_p99_us": ..., "a2e_stdio_rtt_us": ...,
     "python_echo_cpu_us": ..., "worker_echo_cpu_us": ..., "worker_added_cpu_us": ...,
     "node_worker_rtt_us": ..., "requests": ...}

Run: ``python bench/worker.py [--broker URL] [--requests N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import base_arguments, broker_url, child, emit, median_us, p99_us, progress, ratio  # noqa: E402
from mesh.client import MeshClient  # noqa: E402

TEXT = "Analyze the quarterly sales data and summarise the top three trends."
EXAMPLES = Path(__file__).resolve().parent.parent / "agents" / "a2e" / "examples"
# agent name -> the metadata that picks its skill
TARGETS: dict[str, dict[str, Any] | None] = {"echo": None, "wecho": {"skill": "echo"}, "wshout": {"skill": "shout"}}


async def measure(
    url: str, namespace: str, agents: list[str], requests: int, server_pid: int
) -> tuple[dict[str, list[float]], dict[str, float]]:
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
        cpu: dict[str, float] = {}
        for agent in agents[:2]:  # one agent at a time, so the CPU spent is its own
            before = process_tree_cpu_s(server_pid)
            for _ in range(requests):
                await call(agent)
            cpu[agent] = (process_tree_cpu_s(server_pid) - before) / requests
        return samples, cpu


def process_tree_cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its descendants, from /proc."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
            for task in Path(f"/proc/{current}/task").iterdir():
                pending.extend(int(c) for c in (task / "children").read_text().split())
        except (FileNotFoundError, ProcessLookupError):
            continue  # it exited meanwhile
    return total


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
        samples, cpu = asyncio.run(measure(url, args.namespace, agents, args.requests, server.pid))
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
            "python_echo_cpu_us": round(cpu["echo"] * 1e6, 1),
            "worker_echo_cpu_us": round(cpu["wecho"] * 1e6, 1),
            "worker_added_cpu_us": round((cpu["wecho"] - cpu["echo"]) * 1e6, 1),
            "node_worker_rtt_us": median_us(samples["wshout"]) if node else None,
            "requests": args.requests,
        }
    )


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
