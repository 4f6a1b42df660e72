"""LLM agents: what the mesh adds to a pydantic-ai run, to a peer tool call, and to streaming.

With an instant scripted model (pydantic-ai ``FunctionModel``), so only the mesh is measured,
each figure against the same work done in-process (the agent's own engine, with the same tools
offered: its artifact tools and its peer tools, and the same empty history):

- ``rtt_us``: the LLM agent's ``message/send`` round trip through the broker, against
  ``inprocess_us``, the same pydantic-ai agent run in this process; ``overhead_us`` is the
  difference (the issue's bound: at most 1,000 us).
- ``peer_call_added_us``: what one peer tool call adds to the mesh's overhead: the calling
  agent's round trip less the same agent run in-process with the peer answering at once
  (``caller_inprocess_us``: same tool, same answer), less ``overhead_us``. The engine's own
  work for the tool call and the second model request (``engine_tool_step_us``, in-process) is
  thus on both sides and left out. ``peer_call_over_peer_us`` is that less ``peer_rtt_us``, the
  peer's own round trip from a client (bound: at most 1,500 us). ``peer_call_naive_added_us``
  is the plain difference of the two agents' round trips (engine work included), as before.
- ``budget_check_us``: the budget check before each model request (issue 44: a per-user and a
  per-agent budget, each one primary-key read of the usage store's SQLite counters, or of the
  PostgreSQL store's cache with ``--usage-store``, after the prefetch call the model wrapper makes; bound:
  under 50 us), and ``usage_record_us``, storing one response's usage (a row and the counters:
  the mean, with its share of the group commits of ten rows), both measured alone over
  ``--requests`` x 20 calls; ``budgeted_rtt_us`` is the round trip of
  an agent with both budgets, against ``rtt_us`` (its agent has no budget and no ``approve:``;
  ``gated_rtt_us``: one with an ``approve:`` pattern no tool matches, so approvals are on but
  never asked).
- ``stream_latency_p99_ms``: a 2,000-token answer streamed at ``--token-ms`` per token; for each
  token, the time from the model yielding it to the streaming client seeing it (bound: 50 ms).
  Text is coalesced to ~20 events a second, so this is mostly the coalescing window.

Agent, client and model share one process and one asyncio loop (the floor of the agent's own
work, the conservative case for latency). Figures are noisy on a loaded machine, and they depend
on what else the bench runs (the budgeted and gated agents' journals add ~70 us to ``rtt_us`` on
2 cores): compare two versions of the product with one version of this script.
Last line on stdout::

    {"inprocess_us": ..., "rtt_us": ..., "overhead_us": ..., "peer_rtt_us": ..., ...}

``--memory-journal`` keeps the agents' tasks in memory instead of their SQLite journals, to show
the journal's share: its writer process commits the accepted task while a handler computes (an
LLM run is long enough for that to overlap, an echo is not). ``--usage-store postgresql://...``
keeps the budgets and usage in PostgreSQL (:mod:`mesh.telemetry.pgusage`: the check reads the
process's cache, the writes go in the store's thread) for ``budget_check_us``,
``usage_record_us`` and the budgeted agent; its password in ``$MESH_STORE_PASSWORD``.

Run: ``python bench/llm.py [--broker URL] [--requests N] [--token-ms MS] [--memory-journal]
[--usage-store URL]``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic_ai import Agent as Engine
from pydantic_ai import messages as pm
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel
from pydantic_ai.usage import RequestUsage

from agents import AgentSettings
from agents.builtin.echo import EchoAgent
from agents.context import TaskContext
from agents.llm import LlmAgent, LlmConfig
from agents.llm.budgets import Meter
from agents.llm.config import Budget, Budgets
from agents.llm.tools import RunDeps
from agents.service import AgentService
from bench.harness import base_arguments, broker_url, emit, median_us, p99_us, progress
from mesh.a2a import (
    Message,
    Role,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    TextPart,
    get_text_from_message,
)
from mesh.broker import BrokerSettings
from mesh.cli.gctuning import tune_for_serving
from mesh.client import MeshClient
from mesh.telemetry.usage import open_usage_store

TEXT = "What is the weather in Paris?"
TOKENS = 2000


async def answer(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    yield "It is sunny."


async def ask_echo(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str | DeltaToolCalls]:
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
        yield "It is sunny."
        return
    yield {0: DeltaToolCall(name="echo", json_args=json.dumps({"message": TEXT}), tool_call_id="c")}


class Stream:
    """A model answering with ``TOKENS`` tokens, one every ``token_s``; records when each was yielded."""

    def __init__(self, token_s: float) -> None:
        self.token_s = token_s
        self.yielded: list[float] = []

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        self.yielded = []
        start = time.monotonic()
        for index in range(TOKENS):
            # Paced on a clock (not sleep after sleep), so the rate holds under load.
            await asyncio.sleep(max(0.0, start + index * self.token_s - time.monotonic()))
            self.yielded.append(time.monotonic())
            yield "tok "


def llm(name: str, model: FunctionModel, peers: tuple[str, ...] = (), **config: Any) -> LlmAgent:
    return LlmAgent(name=name, llm=LlmConfig(model="test", peers=peers, **config), model=model)


BUDGETS = Budgets(per_user=Budget(tokens=10**12, period="1d"), per_agent=Budget(tokens=10**12, period="1d"))


def budget_figures(n: int, directory: Path, usage_store: str = "") -> tuple[float, float]:
    """The median of one budget check (two budgets) and of one usage record, in seconds."""
    # A namespace of its own: the counters of a shared store start at 0.
    store = open_usage_store(f"bench-{uuid.uuid4().hex[:8]}", usage_store or str(directory / "bench-usage.sqlite3"))
    config = LlmConfig(model="test", budgets=BUDGETS)
    ctx = TaskContext(task_id="t", context_id="c", agent_name="budgeted", caller="client:bench")
    meter = Meter.of(store, config, ctx)
    response = ModelResponse(parts=[pm.TextPart("ok")], usage=RequestUsage(input_tokens=50, output_tokens=10))
    records, checks = [], []
    try:
        for index in range(n):
            start = time.perf_counter()
            meter.record(response)
            if index % 10 == 9:  # the group commit of the rows of ~50 ms (on a loop, its timer does it)
                store.flush()
            records.append(time.perf_counter() - start)
            start = time.perf_counter()
            unread = meter.unread()  # what the model wrapper does first (None once the counters are known)
            meter.check()
            checks.append(time.perf_counter() - start)
            if unread is not None:
                unread.result()
    finally:
        store.close()
    return statistics.median(checks), statistics.fmean(records)  # a record: its share of the commits too


async def round_trips(client: MeshClient, agent: str, n: int) -> list[float]:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        result = await client.send(agent, TEXT)
        samples.append(time.perf_counter() - start)
        assert isinstance(result, Task) and result.status.state.value == "completed", result
    return samples


class InstantPeers:
    """The in-process stand-in of a delegator: the same registry (so the same peer tools), and
    each peer answers at once, as the echo agent does."""

    def __init__(self, service: AgentService) -> None:
        self.registry = service.delegator.registry
        self.settings = service.delegator.settings

    async def delegate(self, ctx: TaskContext, agent: str, message: str | Message, **_options: Any) -> Task:
        text = message if isinstance(message, str) else get_text_from_message(message)
        reply = Message(message_id=uuid.uuid4().hex, role=Role.agent, parts=[TextPart(text=text)])
        status = TaskStatus(state=TaskState.completed, message=reply)
        return Task(id=uuid.uuid4().hex, context_id=ctx.context_id, status=status)


async def in_process(agent: LlmAgent, n: int, service: AgentService) -> list[float]:
    """The agent's own pydantic-ai run (same model, tools and streaming), with no mesh around it."""
    engine = agent.engine
    samples = []
    for _ in range(n):
        # As the mesh gives each task: a context of its own (with the store and the peers).
        task = TaskContext(task_id=uuid.uuid4().hex, context_id=uuid.uuid4().hex, agent_name=agent.name)
        task.artifacts, task.delegator = service.artifacts, InstantPeers(service)  # type: ignore[assignment]
        start = time.perf_counter()
        async with engine.iter(TEXT, deps=RunDeps(task=task), message_history=[]) as run:
            async for node in run:
                if Engine.is_model_request_node(node) or Engine.is_call_tools_node(node):
                    async with node.stream(run.ctx) as events:
                        async for _ in events:
                            pass
        samples.append(time.perf_counter() - start)
    return samples


async def stream_latencies(client: MeshClient, model: Stream) -> list[float]:
    seen_chars = 0
    latencies: list[float] = []
    async for item in client.stream("streamer", TEXT, idle_timeout=60):
        if isinstance(item, TaskStatusUpdateEvent) and not item.final and item.status.message is not None:
            now = time.monotonic()
            seen_chars += len(get_text_from_message(item.status.message))
            upto = seen_chars // 4  # "tok " is 4 characters
            latencies.extend(now - t for t in model.yielded[len(latencies) : upto])
    return latencies


async def main() -> None:
    parser = base_arguments(__doc__ or "")
    parser.add_argument("--requests", type=int, default=300, help="round trips per figure (default 300)")
    parser.add_argument("--token-ms", type=float, default=2.0, help="ms between streamed tokens (default 2)")
    parser.add_argument(
        "--memory-journal",
        action="store_true",
        help="keep the agents' tasks in memory, not in their SQLite journals (to see the journal's share)",
    )
    parser.add_argument(
        "--usage-store",
        default="",
        metavar="URL",
        help="the budgets' and usage's store: a postgresql:// URL (default: a SQLite file)",
    )
    args = parser.parse_args()
    n = args.requests
    with broker_url(args.broker) as url:
        settings = BrokerSettings.from_url(url)
        namespace = f"bench-llm-{uuid.uuid4().hex[:8]}"
        streamer = Stream(args.token_ms / 1000)
        agents: list[Any] = [
            EchoAgent(),
            llm("plain", FunctionModel(stream_function=answer)),
            llm("caller", FunctionModel(stream_function=ask_echo), peers=("echo",)),
            llm("streamer", FunctionModel(stream_function=streamer)),
            llm("budgeted", FunctionModel(stream_function=answer), budgets=BUDGETS, usage_store=args.usage_store),
            llm("gated", FunctionModel(stream_function=answer), approve=("no-such-tool",)),
        ]
        journal = AgentSettings(task_store=":memory:") if args.memory_journal else None
        services = [AgentService(a, broker=settings, namespace=namespace, settings=journal) for a in agents]
        for service in services:
            await service.start()
        tune_for_serving()  # as `mesh run` does once its components are started
        try:
            async with MeshClient.connect(settings, namespace) as client:
                progress("warming up")
                await in_process(agents[1], 50, services[1])
                await in_process(agents[2], 50, services[2])
                for agent in ("echo", "plain", "caller", "budgeted", "gated"):
                    await round_trips(client, agent, 50)
                kinds = ("inprocess", "plain", "echo", "caller", "caller_ip", "budgeted", "gated")
                figures: dict[str, list[float]] = {k: [] for k in kinds}
                progress(f"{n} round trips of each, interleaved")
                for _ in range(max(1, n // 50)):  # in turns, so the machine's load weighs on all alike
                    figures["inprocess"] += await in_process(agents[1], 50, services[1])
                    figures["caller_ip"] += await in_process(agents[2], 50, services[2])
                    for agent in ("plain", "echo", "caller", "budgeted", "gated"):
                        figures[agent] += await round_trips(client, agent, 50)
                progress(f"streaming {TOKENS} tokens, one every {args.token_ms:g} ms")
                latencies = await stream_latencies(client, streamer)
        finally:
            for service in reversed(services):
                await service.stop()
    progress(f"the budget check and the usage record, {n * 20} each")
    with tempfile.TemporaryDirectory() as scratch:
        check_s, record_s = budget_figures(n * 20, Path(scratch), args.usage_store)
    inprocess, plain = median_us(figures["inprocess"]), median_us(figures["plain"])
    echo, caller = median_us(figures["echo"]), median_us(figures["caller"])
    caller_ip = median_us(figures["caller_ip"])
    overhead = plain - inprocess
    added = (caller - caller_ip) - overhead  # the mesh's overhead for the caller, beyond the plain agent's
    emit(
        {
            "inprocess_us": round(inprocess),
            "rtt_us": round(plain),
            "overhead_us": round(overhead),
            "rtt_p99_us": round(p99_us(figures["plain"])),
            "peer_rtt_us": round(echo),
            "peer_call_rtt_us": round(caller),
            "caller_inprocess_us": round(caller_ip),
            "engine_tool_step_us": round(caller_ip - inprocess),
            "peer_call_added_us": round(added),
            "peer_call_over_peer_us": round(added - echo),
            "peer_call_naive_added_us": round(caller - plain),
            "budget_check_us": round(check_s * 1e6, 1),
            "usage_record_us": round(record_s * 1e6, 1),
            "budgeted_rtt_us": round(median_us(figures["budgeted"])),
            "gated_rtt_us": round(median_us(figures["gated"])),
            "stream_tokens": len(latencies),
            "stream_latency_median_ms": round(median_us(latencies) / 1000, 1),
            "stream_latency_p99_ms": round(p99_us(latencies) / 1000, 1),
            "requests": n,
            "journal": "memory" if args.memory_journal else "sqlite",
            "usage_store": "postgresql" if args.usage_store else "sqlite",
        }
    )


if __name__ == "__main__":
    asyncio.run(main())
