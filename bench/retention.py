"""An echo agent's resident memory under rounds of 1,000 message/send requests of 0.9 MB each.

The agent runs in a process of its own with ``max_retained_bytes`` (default 64 MB, the agents'
own default) and the GC and allocator settings ``mesh run`` applies (mesh.cli.gctuning); this
process sends the requests (8 in flight) and reads the agent's RSS from ``/proc/<pid>/status``
(Linux) before the first request and after each round. With retention bounded by bytes the RSS
settles at the bound plus a fixed overhead (the interpreter, the runtime, the allocator's
slack) instead of growing with every request. Last line on stdout::

    {"requests_per_round": ..., "request_bytes": ..., "max_retained_bytes": ...,
     "rss_before_mb": ..., "rss_after_mb": [...], "rss_peak_mb": ..., "rss_growth_mb": ..., "seconds": ...}

Run: ``python bench/retention.py [--broker URL] [--requests N] [--rounds R] [--max-retained-bytes B]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import base_arguments, broker_url, child, emit, progress
from mesh.a2a import Message, Task, TextPart, create_user_message
from mesh.client import MeshClient

IN_FLIGHT = 8
MB = 1_000_000


def big_message() -> Message:
    # Ten text parts of 90 KB: ~0.9 MB, valid under the default limits (100 KB per text part).
    return create_user_message([TextPart(text=f"{n}" * 90_000) for n in range(10)])


def memory_mb(pid: int, field: str) -> float:
    """``VmRSS`` (resident now) or ``VmHWM`` (resident at its peak) of ``pid``, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return round(int(line.split()[1]) * 1024 / MB, 1)
    raise RuntimeError(f"no {field} in /proc/{pid}/status (Linux only)")


async def send_round(url: str, namespace: str, requests: int) -> None:
    async with MeshClient.connect(url, namespace) as client:
        await client.wait_for_agent("echo", timeout=10)
        todo = iter(range(requests))

        async def sender() -> None:
            for _ in todo:
                task = await client.send("echo", big_message(), history_length=0, timeout=60)
                assert isinstance(task, Task) and task.status.state.value == "completed", task

        await asyncio.gather(*(sender() for _ in range(IN_FLIGHT)))


def main() -> None:
    parser = base_arguments(__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="requests of 0.9 MB per round")
    parser.add_argument("--rounds", type=int, default=2, help="rounds, RSS read after each")
    parser.add_argument(
        "--max-retained-bytes", type=int, default=64 * MB, help="the agent's byte bound (default: the agents' default)"
    )
    parser.add_argument("--serve-echo", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--namespace", default=f"bench/{uuid.uuid4().hex[:8]}", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_echo:
        asyncio.run(serve_echo(args.broker, args.namespace, args.max_retained_bytes))
        return

    script = str(Path(__file__).resolve())
    agent_args = ["--serve-echo", "--namespace", args.namespace, "--max-retained-bytes", str(args.max_retained_bytes)]
    with broker_url(args.broker) as url, child([script, "--broker", url, *agent_args]) as agent:
        before = memory_mb(agent.pid, "VmRSS")
        progress(f"agent RSS {before} MB; {args.rounds} round(s) of {args.requests} requests of 0.9 MB")
        after = []
        start = time.perf_counter()
        for n in range(args.rounds):
            asyncio.run(send_round(url, args.namespace, args.requests))
            after.append(memory_mb(agent.pid, "VmRSS"))
            progress(f"round {n + 1}: agent RSS {after[-1]} MB")
        seconds = round(time.perf_counter() - start, 1)
        peak = memory_mb(agent.pid, "VmHWM")
    emit(
        {
            "requests_per_round": args.requests,
            "request_bytes": len(big_message().model_dump_json(by_alias=True)),
            "max_retained_bytes": args.max_retained_bytes,
            "rss_before_mb": before,
            "rss_after_mb": after,
            "rss_peak_mb": peak,
            "rss_growth_mb": round(after[-1] - before, 1),
            "seconds": seconds,
        }
    )


async def serve_echo(url: str, namespace: str, max_retained_bytes: int) -> None:
    from agents import AgentSettings
    from agents.builtin.echo import EchoAgent
    from agents.service import AgentService
    from mesh.broker import BrokerSettings
    from mesh.cli.gctuning import tune_for_serving

    settings = AgentSettings(max_retained_bytes=max_retained_bytes)
    service = AgentService(EchoAgent(), broker=BrokerSettings.from_url(url), namespace=namespace, settings=settings)
    await service.start()
    tune_for_serving()  # as `mesh run` does once its components are started (GC and allocator)
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    main()
