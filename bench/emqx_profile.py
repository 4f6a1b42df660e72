"""The EMQX "A2A over MQTT" profile: the official SDK's requester against a mesh agent and against
the SDK's own responder, on the same broker.

Both responders echo the request's text and run in processes of their own:

- mesh: ``AgentService(Echo)`` with ``emqx: {org: bench, unit: ai}``, with its default SQLite task
  store (the mesh's guarantees: a request is acknowledged once its task is stored; ``mesh_*``)
  and with ``task_store: ":memory:"`` (``mesh_memory_*``, tasks in memory as the SDK keeps them);
- sdk: ``a2a_over_mqtt.Responder`` (tasks in memory), as its README shows.

Two requesters, each measured against both:

- ``sdk``: ``a2a_over_mqtt.Requester.stream`` as the SDK ships it: one MQTT connection per
  request (connect, subscribe to the reply topic, publish, read until terminal);
- ``raw``: one persistent aiomqtt connection that publishes ``SendMessage`` with Response Topic
  and Correlation Data and matches replies by correlation (what a long-lived profile requester
  does): the responder's own cost shows here.

Median sequential round trip and requests/s with 16 in flight. The responders take turns in
rounds (``--rounds``, the first of each round rotating) and each figure is the median over
the rounds, so that the load of a shared machine drifting during the run favours none of them. Last line on stdout::

    {"mesh_sdk_rtt_us": ..., "sdk_sdk_rtt_us": ..., "sdk_rtt_ratio": ..., "mesh_sdk_rps": ..., ...}

(``*_ratio`` = SDK responder / mesh agent for round trips, mesh / SDK for requests/s: above 1 the
mesh is faster.) Run: ``python bench/emqx_profile.py [--broker URL] [--requests N]``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import statistics
import sys
import textwrap
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiomqtt
from a2a_over_mqtt import A2ARequest, MqttConfig, Requester, TopicSpace, make_properties

from bench.harness import base_arguments, broker_url, child, emit, median_us, progress, ratio
from mesh.broker import BrokerSettings

CONCURRENCY = 16
TEXT = "Analyze the quarterly sales data and summarise the top three trends."
SPACE = TopicSpace(org="bench", unit="ai")

MESH_AGENT = """
import asyncio
from agents import Agent, AgentSettings
from agents.service import AgentService
from mesh.a2a import get_text_from_message
from mesh.broker import BrokerSettings
from mesh.profile.emqx import EmqxProfile

class Echo(Agent):
    name = "mesh-echo"
    async def handle(self, message, ctx):
        return get_text_from_message(message)

async def main():
    broker = BrokerSettings.from_url({url!r})
    emqx = EmqxProfile(org="bench", unit="ai")
    services = [
        AgentService(Echo(), broker=broker, namespace="bench", settings=AgentSettings(emqx=emqx)),
        AgentService(Echo(name="mesh-echo-mem"), broker=broker, namespace="bench",
                     settings=AgentSettings(task_store=":memory:", emqx=emqx)),
    ]
    for service in services:
        await service.start()
    print("ready", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""

SDK_RESPONDER = """
import asyncio
from a2a_over_mqtt import MqttConfig, Responder, TopicSpace, build_card

class Echo(Responder):
    async def on_request(self, request, stream):
        return request.text

async def main():
    agent = Echo(agent_id="sdk-echo", mqtt=MqttConfig(host={host!r}, port={port}),
                 topics=TopicSpace(org="bench", unit="ai"),
                 card=build_card(name="sdk-echo", description="echo", url="mqtt://{host}:{port}"), max_concurrent=64)
    task = asyncio.create_task(agent.run())
    await asyncio.sleep(1.0)  # run() has no ready signal: its subscription is made at once
    print("ready", flush=True)
    await task
asyncio.run(main())
"""


def payload() -> str:
    return A2ARequest(text=TEXT, request_id=uuid.uuid4().hex).to_json()


class RawRequester:
    """One persistent profile requester: replies matched by Correlation Data."""

    def __init__(self, mqtt: MqttConfig) -> None:
        self.mqtt = mqtt
        self.reply_topic = SPACE.reply("bench", uuid.uuid4().hex[:8])
        self.waiting: dict[bytes, asyncio.Future[None]] = {}

    async def run(self, ready: asyncio.Event, stop: asyncio.Event) -> None:
        identifier = f"bench/ai/raw-{uuid.uuid4().hex[:6]}"
        async with aiomqtt.Client(**self.mqtt.client_kwargs(identifier=identifier)) as client:
            self.client = client
            # As the mesh's transport does (DESIGN, "Transport rules"): without it, Nagle and delayed
            # ACKs add tens of ms per request on this persistent connection.
            client._client.socket().setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            await client.subscribe(self.reply_topic, qos=1)
            ready.set()
            reader = asyncio.create_task(self._read(client))
            await stop.wait()
            reader.cancel()

    async def _read(self, client: aiomqtt.Client) -> None:
        async for msg in client.messages:
            correlation = getattr(msg.properties, "CorrelationData", None)
            body = json.loads(msg.payload)
            result = body.get("result", {})
            state = (result.get("task") or result.get("statusUpdate") or {}).get("status", {}).get("state")
            if state == "TASK_STATE_COMPLETED" or "error" in body:
                future = self.waiting.pop(correlation, None)
                if future is not None and not future.done():
                    future.set_result(None)

    async def call(self, agent: str) -> None:
        correlation = uuid.uuid4().hex
        future = asyncio.get_running_loop().create_future()
        self.waiting[correlation.encode()] = future
        props = make_properties(response_topic=self.reply_topic, correlation_data=correlation)
        await self.client.publish(SPACE.request(agent), payload(), qos=1, properties=props)
        await asyncio.wait_for(future, 30)


async def warm(call: Callable[[], Awaitable[None]]) -> None:
    for _ in range(20):
        await call()


async def sequential(call: Callable[[], Awaitable[None]], requests: int) -> list[float]:
    samples = []
    for _ in range(requests):
        started = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - started)
    return samples


async def in_flight(call: Callable[[], Awaitable[None]], total: int) -> float:
    """Requests/s of ``total`` requests with :data:`CONCURRENCY` in flight."""
    queue = iter(range(total))

    async def worker() -> None:
        for _ in queue:
            await call()

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return total / (time.perf_counter() - started)


async def bench(url: str, requests: int, rounds: int) -> dict[str, float]:
    settings = BrokerSettings.from_url(url)
    mqtt = MqttConfig(host=settings.host, port=settings.port)
    sdk = Requester(mqtt, SPACE, requester_id="bench")

    def sdk_call(agent: str) -> Callable[[], Awaitable[None]]:
        async def call() -> None:
            async for kind, _text in sdk.stream(agent, payload(), uuid.uuid4().hex):
                if kind != "terminal" and kind in ("error", "failed", "timeout"):
                    raise RuntimeError(f"{agent} answered {kind}")

        return call

    raw = RawRequester(mqtt)
    ready, stop = asyncio.Event(), asyncio.Event()
    running = asyncio.create_task(raw.run(ready, stop))
    await ready.wait()
    result: dict[str, float] = {}
    responders = [("mesh", "mesh-echo"), ("mesh_memory", "mesh-echo-mem"), ("sdk", "sdk-echo")]
    calls = {
        (who, requester): call
        for who, agent in responders
        for requester, call in (("sdk", sdk_call(agent)), ("raw", lambda agent=agent: raw.call(agent)))
    }
    # The machine's load drifts: the responders take turns, round after round (the first one of
    # a round changing each time), and each figure is the median over the rounds.
    rtts: dict[tuple[str, str], list[float]] = {key: [] for key in calls}
    rates: dict[tuple[str, str], list[float]] = {key: [] for key in calls}
    per_round = max(1, requests // rounds)
    try:
        for call in calls.values():
            await warm(call)
        for round_number in range(rounds):
            progress(f"round {round_number + 1}/{rounds}: {per_round} sequential, then {CONCURRENCY} in flight, each")
            turn = responders[round_number % 3 :] + responders[: round_number % 3]
            for requester in ("sdk", "raw"):
                for who, _agent in turn:
                    rtts[who, requester] += await sequential(calls[who, requester], per_round)
                    rates[who, requester].append(await in_flight(calls[who, requester], 2 * per_round))
        for (who, requester), samples in rtts.items():
            result[f"{who}_{requester}_rtt_us"] = median_us(samples)
            result[f"{who}_{requester}_rps"] = round(statistics.median(rates[who, requester]), 1)
    finally:
        stop.set()
        await running
    for requester in ("sdk", "raw"):
        result[f"{requester}_rtt_ratio"] = ratio(result[f"sdk_{requester}_rtt_us"], result[f"mesh_{requester}_rtt_us"])
        result[f"{requester}_rps_ratio"] = ratio(result[f"mesh_{requester}_rps"], result[f"sdk_{requester}_rps"])
        result[f"{requester}_memory_rtt_ratio"] = ratio(
            result[f"sdk_{requester}_rtt_us"], result[f"mesh_memory_{requester}_rtt_us"]
        )
        result[f"{requester}_memory_rps_ratio"] = ratio(
            result[f"mesh_memory_{requester}_rps"], result[f"sdk_{requester}_rps"]
        )
    return result


def main() -> None:
    parser = base_arguments(__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="sequential requests per pair (default 300)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds the responders take turns in (default 3)")
    args = parser.parse_args()
    logging.getLogger("mqtt").setLevel(logging.ERROR)  # aiomqtt's "pending publish calls" at 16 in flight
    with broker_url(args.broker) as url:
        settings = BrokerSettings.from_url(url)
        mesh_script = textwrap.dedent(MESH_AGENT).format(url=url)
        sdk_script = textwrap.dedent(SDK_RESPONDER).format(host=settings.host, port=settings.port)
        with child(["-c", mesh_script]), child(["-c", sdk_script]):
            progress("mesh agent and SDK responder ready")
            result = asyncio.run(bench(url, args.requests, args.rounds))
    emit(result)


if __name__ == "__main__":
    main()
