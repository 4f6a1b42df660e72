"""message/send to a worker-backed echo vs a Python echo agent, in the same run.

One child process serves both agents on the same broker: ``echo`` (agents.builtin.echo, a
Python handler) and ``wecho`` (agents/a2e/examples/echo_worker.py, a plain-Python A2E worker
behind a WorkerAgent: NDJSON over its stdin/stdout); with Node installed also ``wshout``, the
JavaScript example. This process calls them in turn, one request at a time, so both see the
same broker and machine load. The difference of the medians is what the worker path adds.

Last line on stdout::

    {"python_echo_rtt_us": ..., "worker_echo_rtt_us": ..., "worker_added_us": ..., "rtt_ratio": ...,
     "python_echo_p99_us": ..., "worker_echo_p99_us": ..., "node_worker_rtt_us": ..., "requests": ...}

Run: ``python bench/worker.py [--broker URL] [--requests N]``.
"""

from __future__ import annotations

import argparse
import asyncio
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


async def measure(url: str, namespace: str, agents: list[str], requests: int) -> dict[str, list[float]]:
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
    with broker_url(args.broker) as url, child([*serve_args, "--broker", url]):
        progress(f"{args.requests} sequential requests to each of {', '.join(agents)}, interleaved")
        samples = asyncio.run(measure(url, args.namespace, agents, args.requests))
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
