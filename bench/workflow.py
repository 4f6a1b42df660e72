"""Workflows: what a 10-node linear workflow of echo agents costs over 10 sequential sends.

Two ways to get the same work done, measured in the same run, in turn:

- ``sends``: the client sends ``message/send`` to ``echo`` 10 times, one after the other (the
  floor: 10 round trips through the broker);
- ``workflow``: the client sends once to ``chain``, a workflow agent whose 10 nodes each
  delegate the previous node's text to ``echo`` (``{{ n3.output.text }}``): 10 delegations
  plus the client's own round trip to the workflow, the node templates, events and the node
  journal (the default SQLite task store: each node's output is committed before the next
  starts). ``chain_memory`` is the same graph with ``task_store: ":memory:"``.

``overhead_per_node_us`` = (median workflow - median 10 sends) / 10: what a workflow adds
per node, its own round trip included. The goal is at most 1 ms. ``echo`` runs in one process
and the workflows in another, as separate services are deployed; the client is this process.
On a shared 2-core machine the figures are noisy: read them side by side, not alone.

Last line on stdout::

    {"sends_10_us": ..., "workflow_10_us": ..., "overhead_per_node_us": ..., "workflow_to_sends": ...,
     "memory": {...}, ...}

Run: ``python bench/workflow.py [--broker URL] [--requests N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import base_arguments, broker_url, child, emit, median_us, p99_us, progress
from mesh.a2a import Task, get_text_from_message
from mesh.client import MeshClient

NODES = 10
WARM_UP = 30
TEXT = "Analyze the quarterly sales data and summarise the top three trends."


def chain_yaml(nodes: int) -> str:
    lines = ["nodes:", '  - {id: n0, agent: echo, input: "{{ input.text }}"}']
    lines += [f'  - {{id: n{i}, agent: echo, input: "{{{{ n{i - 1}.output.text }}}}"}}' for i in range(1, nodes)]
    lines.append(f'output: {{text: "{{{{ n{nodes - 1}.output.text }}}}"}}')
    return "\n".join(lines)


async def measure(url: str, namespace: str, requests: int) -> dict[str, Any]:
    samples: dict[str, list[float]] = {"sends": [], "workflow": [], "memory": []}
    async with MeshClient.connect(url, namespace) as client:
        for agent in ("echo", "chain", "chain_memory"):
            await client.wait_for_agent(agent, timeout=10)

        async def sends() -> None:
            for _ in range(NODES):
                task = await client.send("echo", TEXT)
                assert isinstance(task, Task) and task.status.state.value == "completed", task

        def workflow(name: str) -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                task = await client.send(name, TEXT)
                assert isinstance(task, Task) and task.status.state.value == "completed", task
                assert task.status.message is not None and get_text_from_message(task.status.message) == TEXT

            return run

        runs = {"sends": sends, "workflow": workflow("chain"), "memory": workflow("chain_memory")}

        async def timed(run: Callable[[], Awaitable[None]]) -> float:
            start = time.perf_counter()
            await run()
            return time.perf_counter() - start

        for _ in range(WARM_UP):
            for run in runs.values():
                await run()
        for done in range(requests):  # in turn, so the machine's load weighs on each alike
            for key, run in runs.items():
                samples[key].append(await timed(run))
            if (done + 1) % max(1, requests // 4) == 0:
                progress(f"  {done + 1}/{requests} rounds")
    medians = {key: median_us(values) for key, values in samples.items()}
    return {
        "sends_10_us": medians["sends"],
        "workflow_10_us": medians["workflow"],
        "overhead_per_node_us": round((medians["workflow"] - medians["sends"]) / NODES, 1),
        # The same, relative: on a loaded machine every round trip stretches, this less so.
        "workflow_to_sends": round(medians["workflow"] / medians["sends"], 3),
        "p99_us": {key: p99_us(values) for key, values in samples.items()},
        "memory": {
            "workflow_10_us": medians["memory"],
            "overhead_per_node_us": round((medians["memory"] - medians["sends"]) / NODES, 1),
        },
    }


def main() -> None:
    parser = base_arguments(__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="measured rounds (each: 10 sends and 2 workflows)")
    parser.add_argument("--serve", choices=("echo", "workflows"), help=argparse.SUPPRESS)
    parser.add_argument("--namespace", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve(args.serve, args.broker, args.namespace))
        return
    script = str(Path(__file__).resolve())
    with broker_url(args.broker) as url:
        namespace = f"bench/{uuid.uuid4().hex[:8]}"
        progress(f"{args.requests} rounds of 10 sequential sends vs a {NODES}-node linear workflow")
        with contextlib.ExitStack() as stack:
            for what in ("echo", "workflows"):
                stack.enter_context(child([script, "--serve", what, "--broker", url, "--namespace", namespace]))
            result = asyncio.run(measure(url, namespace, args.requests))
    progress(f"overhead per node: {result['overhead_per_node_us']} us (goal <= 1000 us)")
    emit({**result, "nodes": NODES, "requests": args.requests, "warm_up": WARM_UP, "goal_per_node_us": 1000})


async def serve(what: str, url: str, namespace: str) -> None:
    from agents.builtin.echo import EchoAgent
    from agents.service import AgentService
    from agents.settings import AgentSettings
    from agents.workflow import WorkflowAgent, load_workflow, workflow_store_path
    from mesh.broker import BrokerSettings

    broker = BrokerSettings.from_url(url)
    services = []
    if what == "echo":
        services.append(AgentService(EchoAgent(), broker=broker, namespace=namespace))
    else:
        graph = load_workflow(chain_yaml(NODES), name="chain")
        store = workflow_store_path({}, namespace, "chain")
        services.append(
            AgentService(WorkflowAgent(name="chain", graph=graph, store_path=store), broker=broker, namespace=namespace)
        )
        memory = AgentService(
            WorkflowAgent(name="chain_memory", graph=load_workflow(chain_yaml(NODES), name="chain_memory")),
            broker=broker,
            namespace=namespace,
            settings=AgentSettings(task_store=":memory:"),
        )
        services.append(memory)
    for service in services:
        await service.start()
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    main()
