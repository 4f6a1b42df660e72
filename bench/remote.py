"""A remote A2A agent through the mesh vs the same remote called directly.

The remote is bench/a2a_http_echo.py (the a2a-sdk 1.3 server on uvicorn, an echo agent) in a
process of its own. Two clients, taking turns in rounds (medians):

- mesh: ``MeshClient.send`` -> Mosquitto -> the proxy (``agents.remote``, its own process) ->
  the a2a-sdk client -> the remote, and the Task back the same way;
- direct: the a2a-sdk client, configured as the proxy configures it (streaming, JSON-RPC), sending
  to the remote from this process. Both sides stream: the proxy streams ``message/send`` too,
  so that a cancel during the call reaches the remote task (docs/remote-agents.md, "Tasks").

``mesh_added_us`` is what the mesh adds to a round trip (the medians' difference); to tell the
mesh's own hop from the proxy's work, ``mesh_echo_rtt_us`` is a local echo agent served in the
proxy's process, and ``proxy_added_us`` what is left (``mesh_added_us`` minus it).

A round of one kind of call back to back flatters the direct side: on a VM, a process that
slept a few milliseconds wakes slowly (the echo hop costs ~0.6-1 ms more after 3 ms of idle),
and on the mesh path the caller and the broker sleep while the remote works, while the direct
path has no one else to wake. The ``interleaved_*`` figures take the three calls in turn,
request by request, so that each runs after the others, as calls from different places
would: the same three measures in the same conditions.
Last line on stdout::

    {"mesh_rtt_us": ..., "direct_rtt_us": ..., "mesh_added_us": ..., "mesh_echo_rtt_us": ...,
     "proxy_added_us": ..., "rtt_ratio": ..., "interleaved_mesh_rtt_us": ...,
     "interleaved_direct_rtt_us": ..., "interleaved_mesh_added_us": ...,
     "interleaved_mesh_echo_rtt_us": ..., "interleaved_proxy_added_us": ..., "requests": ...}

``--profile-proxy FILE`` runs the proxy's process under cProfile (from ready to the end) and
writes the stats to FILE (read with ``python -m pstats FILE``); the top functions go to stderr.
The profiler slows the proxy, so the figures of such a run are not comparable.

Run: ``python bench/remote.py [--broker URL] [--requests N] [--profile-proxy FILE]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.harness import base_arguments, broker_url, child, emit, median_us, progress, ratio, report_profile
from mesh.brokertools.localbroker import free_port
from mesh.client import MeshClient

ROUNDS = 5


async def serve_proxy(broker: str, namespace: str, card_url: str, profile_file: str | None = None) -> None:
    """The child: the proxy agent for the remote at ``card_url``, until SIGTERM."""
    from agents.remote.agent import RemoteAgent
    from agents.remote.config import RemoteConfig
    from agents.service import AgentService
    from agents.settings import AgentSettings
    from mesh.broker import BrokerSettings

    agent = RemoteAgent(name="remote-echo", remote=RemoteConfig(card_url=card_url))
    service = AgentService(
        agent,
        broker=BrokerSettings.from_url(broker),
        namespace=namespace,
        settings=AgentSettings(task_store=":memory:"),
    )
    await service.start()
    from agents.builtin.echo import EchoAgent

    echo = AgentService(
        EchoAgent(name="local-echo"),
        broker=BrokerSettings.from_url(broker),
        namespace=namespace,
        settings=AgentSettings(task_store=":memory:"),
    )
    await echo.start()
    from mesh.cli.gctuning import tune_for_serving

    tune_for_serving()  # as mesh run does
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    profiler = None
    if profile_file:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    print("ready", flush=True)
    await stopping.wait()
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile_file)


Send = Callable[[str], Awaitable[object]]


async def timed(send: Send, requests: int) -> list[float]:
    samples = []
    for i in range(requests):
        start = time.perf_counter()
        await send(f"hello {i}")
        samples.append(time.perf_counter() - start)
    return samples


def mesh_sender(client: MeshClient, agent: str) -> Send:
    return lambda text: client.send(agent, text)


@contextlib.asynccontextmanager
async def direct_sender(card_url: str) -> AsyncIterator[Send]:
    """The a2a-sdk client as the proxy configures it (streaming, JSON-RPC), on a keep-alive client."""
    import httpx
    from a2a.client import ClientConfig, ClientFactory
    from a2a.types import a2a_pb2 as pb

    from mesh.discovery.remote_cards import fetch_remote_card

    async with httpx.AsyncClient() as http:
        card = await fetch_remote_card(http, card_url)
        client = ClientFactory(ClientConfig(streaming=True, httpx_client=http)).create(card)

        async def send(text: str) -> None:
            message = pb.Message(message_id=uuid.uuid4().hex, role=pb.ROLE_USER, parts=[pb.Part(text=text)])
            async for _ in client.send_message(pb.SendMessageRequest(message=message)):
                pass

        yield send


def figures(mesh: list[float], direct: list[float], echo: list[float], prefix: str = "") -> dict[str, object]:
    mesh_us, direct_us, echo_us = median_us(mesh), median_us(direct), median_us(echo)
    return {
        f"{prefix}mesh_rtt_us": round(mesh_us, 1),
        f"{prefix}direct_rtt_us": round(direct_us, 1),
        f"{prefix}mesh_added_us": round(mesh_us - direct_us, 1),
        f"{prefix}mesh_echo_rtt_us": round(echo_us, 1),
        f"{prefix}proxy_added_us": round(mesh_us - direct_us - echo_us, 1),
    }


async def measure(broker: str, namespace: str, card_url: str, requests: int) -> dict[str, object]:
    mesh: list[float] = []
    direct: list[float] = []
    echo: list[float] = []
    async with MeshClient.connect(broker, namespace) as client:
        await client.wait_for_agent("remote-echo", timeout=10)
        through_proxy, local_echo = mesh_sender(client, "remote-echo"), mesh_sender(client, "local-echo")
        await timed(through_proxy, 20)  # warm both paths
        async with direct_sender(card_url) as straight:
            await timed(straight, 20)
        for index in range(ROUNDS):
            progress(f"round {index + 1}/{ROUNDS}")
            mesh += await timed(through_proxy, requests)
            async with direct_sender(card_url) as straight:
                direct += await timed(straight, requests)
            echo += await timed(local_echo, requests)
        progress(f"interleaved: {requests * 2} of each in turn")
        turns: tuple[list[float], list[float], list[float]] = ([], [], [])
        async with direct_sender(card_url) as straight:
            for _ in range(requests * 2):
                for samples, send in zip(turns, (through_proxy, straight, local_echo), strict=True):
                    samples += await timed(send, 1)
    return {
        **figures(mesh, direct, echo),
        "rtt_ratio": ratio(median_us(mesh), median_us(direct)),
        **figures(*turns, prefix="interleaved_"),
        "requests": requests * ROUNDS,
    }


def main() -> None:
    parser = base_arguments(__doc__ or "")
    parser.add_argument("--requests", type=int, default=200, help="sequential requests per round and side")
    parser.add_argument("--profile-proxy", metavar="FILE", help="run the proxy under cProfile; stats to FILE")
    parser.add_argument("--serve-proxy", nargs=3, metavar=("BROKER", "NAMESPACE", "CARD_URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_proxy:
        asyncio.run(serve_proxy(*args.serve_proxy, args.profile_proxy))
        return
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    port = free_port()
    card_url = f"http://127.0.0.1:{port}/.well-known/agent-card.json"
    here = str(Path(__file__).resolve())
    profile = ["--profile-proxy", str(Path(args.profile_proxy).resolve())] if args.profile_proxy else []
    with (
        broker_url(args.broker) as broker,
        child([str(Path(__file__).with_name("a2a_http_echo.py")), str(port)]),
        child([here, "--serve-proxy", broker, namespace, card_url, *profile]),
    ):
        result = asyncio.run(measure(broker, namespace, card_url, args.requests))
    if args.profile_proxy:
        report_profile(args.profile_proxy, "proxy")
    emit(result)


if __name__ == "__main__":
    main()
