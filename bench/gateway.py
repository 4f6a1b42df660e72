"""message/send over HTTP: through the HTTP gateway to a mesh agent, and to the a2a-sdk HTTP server.

What an HTTP A2A client sees: the same JSON-RPC POST, answered by the gateway (which carries it
over MQTT to an echo agent) or by an echo agent behind the a2a-sdk HTTP server. Layout, one
process each::

    Mosquitto            from mosquitto.conf via bench/harness.py (or --broker URL)
    echo agent           AgentService(EchoAgent) on the broker          (child process)
    HTTP gateway         HttpGateway on uvicorn, connected to the broker (child process: a separate
                         service in production; rate limit off, 64 requests per client allowed)
    a2a-sdk echo         bench/a2a_http_echo.py on uvicorn               (child process)
    client               this process: bench/http_client.py's HttpPool, 16 keep-alive
                         connections to each server

- gateway: ``POST /a2a/agents/echo`` -> HttpGateway -> Mosquitto -> echo agent -> the Task back
  the same way, translated to the caller's A2A version;
- a2a-sdk: ``POST /`` to the a2a-sdk JSON-RPC routes;
- the gateway's HTTP+JSON binding: ``POST /a2a/agents/echo/rest/message:send`` (``gateway_rest``),
  and its gRPC binding: ``SendMessage`` with tenant ``echo`` on one channel (``gateway_grpc``).

Both servers are asked in A2A 0.3 (``message/send``) and in 1.0 (``SendMessage`` with
``A2A-Version: 1.0``); the better figure of each side is compared with the better of the other,
as bench/agent.py does. Each measurement: 200 requests of warm-up, the sequential round trip
(median, p99), then throughput with 16 requests in flight. Last line on stdout::

    {"gateway_rtt_us": ..., "a2a_http_rtt_us": ..., "rtt_ratio": ..., "gateway_rps": ...,
     "a2a_http_rps": ..., "rps_ratio": ..., "gateway_p99_us": ..., "a2a_http_p99_us": ...,
     "gateway_0_3": {...}, "gateway_1_0": {...}, "a2a_http_0_3": {...}, "a2a_http_1_0": {...}, ...}

``--profile-gateway FILE`` runs the gateway under cProfile (from its first request to the end)
and writes the stats to FILE (read with ``python -m pstats FILE``); the top functions by own
time go to stderr. The profiler slows the gateway, so its figures are not comparable then.

``--profile-echo FILE`` does the same for the echo agent child (from its start to the end).

``--trust`` runs the echo agent and the gateway with trust (README, "Trust"): signed cards, a
user token minted by the gateway per request and verified by the agent, which requires it.

``--secured`` also measures, in the same run, the gateway (A2A 0.3) as the secured default of
``mesh up`` runs it (issue 23): a broker of its own under the generated rules, the gateway and
the agent each as its own broker user, signed cards, a user token minted per request and
verified, the task owner checks on, an API key asked of every caller; ``secured_*`` are its
figures, ``secured_open_*`` the open gateway's 0.3 figures measured in turns with them (three
rounds each, medians: both sides see the same load), and ``secured_rps_ratio`` /
``secured_rtt_ratio`` compare the two.

Run: ``python bench/gateway.py [--broker URL] [--requests N] [--concurrent-requests M] [--trust] [--secured]``.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import tempfile
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.agent import CONCURRENCY, bench_keys, bench_trust, http_payload, measure, serve_echo
from bench.harness import (
    base_arguments,
    broker_url,
    child,
    emit,
    interleaved_rounds,
    medians,
    progress,
    ratio,
    report_profile,
    secured_broker,
    secured_figures,
)
from bench.http_client import HttpPool
from mesh.brokertools.localbroker import free_port
from mesh.cli.gctuning import tune_for_serving

HERE = Path(__file__).resolve().parent
#: With keys (--trust, --secured) the gateway authenticates callers, as a secured edge does: it
#: vouches (mints a user token) only for a caller it authenticated, never for an anonymous one.
BENCH_API_KEY = "bench-api-key-0123456789abcdef"
VERSIONS = ("0.3", "1.0")
GATEWAY_PATH = "/a2a/agents/echo"


async def http_side(port: int, path: str, version: str, requests: int, concurrent_requests: int) -> dict[str, float]:
    async with HttpPool("127.0.0.1", port, size=CONCURRENCY) as pool:

        async def call() -> None:
            body, headers = http_payload("1.0" if version == "rest" else version)
            headers = {**headers, "X-API-Key": BENCH_API_KEY}  # ignored where no authentication is asked
            if version == "rest":  # HTTP+JSON: the params are the body, the result the answer
                status, result = await pool.post_json(path, body["params"], headers)
            else:
                status, response = await pool.post_json(path, body, headers)
                result = response["result"]
            state = (result.get("task") or result)["status"]["state"]
            assert status == 200 and state in ("completed", "TASK_STATE_COMPLETED"), result

        return await measure(call, requests, concurrent_requests)


async def grpc_side(port: int, requests: int, concurrent_requests: int) -> dict[str, float]:
    """SendMessage over the gateway's gRPC binding (one HTTP/2 channel, as a gRPC client has)."""
    import grpc
    from a2a.types import a2a_pb2 as pb
    from a2a.types import a2a_pb2_grpc

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)

        async def call() -> None:
            message_id = uuid.uuid4().hex
            message = pb.Message(role=pb.Role.ROLE_USER, message_id=message_id, parts=[pb.Part(text="hello")])
            request = pb.SendMessageRequest(tenant="echo", message=message)
            response = await stub.SendMessage(request, metadata=(("x-api-key", BENCH_API_KEY),))
            assert response.task.status.state == pb.TaskState.TASK_STATE_COMPLETED, response

        return await measure(call, requests, concurrent_requests)


def best(results: dict[str, dict[str, float]]) -> dict[str, float]:
    """The better round trip (with its p99) and the better throughput over the A2A versions."""
    fastest = min(results.values(), key=lambda r: r["rtt_us"])
    return {"rtt_us": fastest["rtt_us"], "p99_us": fastest["p99_us"], "rps": max(r["rps"] for r in results.values())}


def arguments() -> argparse.Namespace:
    parser = base_arguments(__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="sequential requests for the round trip")
    parser.add_argument(
        "--concurrent-requests",
        type=int,
        default=6000,
        help=f"requests for the throughput run ({CONCURRENCY} in flight)",
    )
    parser.add_argument("--profile-gateway", metavar="FILE", help="run the gateway under cProfile; stats to FILE")
    parser.add_argument("--profile-echo", metavar="FILE", help="run the echo agent under cProfile; stats to FILE")
    parser.add_argument("--serve-echo", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-gateway", type=int, metavar="PORT", help=argparse.SUPPRESS)
    parser.add_argument("--grpc-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--namespace", default=f"bench/{uuid.uuid4().hex[:8]}", help=argparse.SUPPRESS)
    parser.add_argument("--trust", action="store_true", help="signed cards, gateway-minted user tokens required")
    parser.add_argument("--keys", help=argparse.SUPPRESS)
    # In memory, as the a2a-sdk side's InMemoryTaskStore (bench/agent.py measures SQLite too).
    parser.add_argument("--task-store", default=":memory:", help="the echo agent's task store")
    parser.add_argument("--secured", action="store_true", help="also measure the secured default (mesh up's)")
    return parser.parse_args()


def main() -> None:
    args = arguments()
    if args.serve_echo:
        asyncio.run(profiled_echo(args.broker, args.namespace, args.task_store, args.keys, args.profile_echo))
        return
    if args.serve_gateway is not None:
        asyncio.run(
            serve_gateway(
                args.broker, args.namespace, args.serve_gateway, args.grpc_port, args.profile_gateway, args.keys
            )
        )
        return
    emit(run_sides(args))


def run_sides(args: argparse.Namespace) -> dict[str, object]:
    """Start the echo agent, the gateway and the a2a-sdk server; measure each side; the figures."""
    gateway_port, a2a_port, grpc_port = free_port(), free_port(), free_port()
    script = str(Path(__file__).resolve())
    profile = ["--profile-gateway", str(Path(args.profile_gateway).resolve())] if args.profile_gateway else []
    profile_echo = ["--profile-echo", str(Path(args.profile_echo).resolve())] if args.profile_echo else []
    gateway, a2a = {}, {}
    keys_dir = tempfile.TemporaryDirectory(prefix="mesh-bench-keys-")
    trust = ["--keys", bench_keys(keys_dir.name)] if args.trust else []
    with (
        keys_dir,
        broker_url(args.broker) as url,
        child(
            [
                script,
                "--serve-echo",
                "--broker",
                url,
                "--namespace",
                args.namespace,
                "--task-store",
                args.task_store,
                *profile_echo,
                *trust,
            ]
        ),
        child(
            [
                script,
                "--serve-gateway",
                str(gateway_port),
                "--grpc-port",
                str(grpc_port),
                "--broker",
                url,
                "--namespace",
                args.namespace,
                *profile,
                *trust,
            ]
        ),
        child([str(HERE / "a2a_http_echo.py"), str(a2a_port)]),
    ):
        for version in VERSIONS:
            for side, results, port, path in (
                ("a2a-sdk HTTP", a2a, a2a_port, "/"),
                ("gateway", gateway, gateway_port, GATEWAY_PATH),
            ):
                progress(
                    f"{side} ({version}): {args.requests} sequential, then {args.concurrent_requests} "
                    f"with {CONCURRENCY} in flight"
                )
                results[version] = asyncio.run(http_side(port, path, version, args.requests, args.concurrent_requests))
                progress(f"{side} {version}: {results[version]}")
        progress(f"gateway (HTTP+JSON): {args.requests} sequential, then {args.concurrent_requests}")
        rest = asyncio.run(
            http_side(
                gateway_port, f"{GATEWAY_PATH}/rest/message:send", "rest", args.requests, args.concurrent_requests
            )
        )
        progress(f"gateway rest: {rest}")
        progress(f"gateway (gRPC): {args.requests} sequential, then {args.concurrent_requests}")
        grpc_figures = asyncio.run(grpc_side(grpc_port, args.requests, args.concurrent_requests))
        progress(f"gateway grpc: {grpc_figures}")
        secured = secured_side(args, script, bench_keys(keys_dir.name) if args.secured else None, gateway_port)
    if args.profile_gateway:
        report_profile(args.profile_gateway, "gateway")
    if args.profile_echo:
        report_profile(args.profile_echo, "echo agent")
    return figures(args, gateway, a2a, rest, grpc_figures, secured)


def figures(
    args: argparse.Namespace,
    gateway: dict[str, dict[str, float]],
    a2a: dict[str, dict[str, float]],
    rest: dict[str, float],
    grpc_figures: dict[str, float],
    secured: dict[str, object],
) -> dict[str, object]:
    """The one JSON line: the best of each side, then every measured figure."""
    gw, sdk = best(gateway), best(a2a)
    return {
        "gateway_rtt_us": gw["rtt_us"],
        "a2a_http_rtt_us": sdk["rtt_us"],
        "rtt_ratio": ratio(gw["rtt_us"], sdk["rtt_us"]),
        "gateway_rps": gw["rps"],
        "a2a_http_rps": sdk["rps"],
        "rps_ratio": ratio(gw["rps"], sdk["rps"]),
        "gateway_p99_us": gw["p99_us"],
        "a2a_http_p99_us": sdk["p99_us"],
        # The 1.0 edge (translation included) against 0.3 on the same gateway, same run.
        "v1_rtt_ratio": ratio(gateway["1.0"]["rtt_us"], gateway["0.3"]["rtt_us"]),
        "gateway_0_3": gateway["0.3"],
        "gateway_1_0": gateway["1.0"],
        "gateway_rest": rest,  # A2A 1.0 HTTP+JSON (not in the best-of figures above)
        "gateway_grpc": grpc_figures,  # A2A 1.0 gRPC (not in the best-of figures above)
        "a2a_http_0_3": a2a["0.3"],
        "a2a_http_1_0": a2a["1.0"],
        "concurrency": CONCURRENCY,
        "requests": args.requests,
        "concurrent_requests": args.concurrent_requests,
        "profiled": bool(args.profile_gateway or args.profile_echo),
        "trust": args.trust,
        **secured,
    }


def secured_side(args: argparse.Namespace, script: str, keys: str | None, open_port: int) -> dict[str, object]:
    """The gateway's 0.3 figures under the secured default (``--secured``), measured in turns with
    the open gateway's (at ``open_port``), so both see the same machine: medians of the rounds."""
    if keys is None:
        return {}
    namespace, port = f"{args.namespace}-secured", free_port()
    with (
        secured_broker([("agent", "echo", namespace), ("gateway", "bench", namespace)]) as urls,
        child([script, "--serve-echo", "--broker", urls["echo"], "--namespace", namespace, "--keys", keys]),
        child(
            [script, "--serve-gateway", str(port), "--broker", urls["bench"], "--namespace", namespace, "--keys", keys]
        ),
    ):
        progress(
            f"secured vs open gateway (0.3): {args.requests} sequential, then {args.concurrent_requests}, in turns"
        )
        opened_rounds, figures_rounds = interleaved_rounds(
            lambda n, c: asyncio.run(http_side(open_port, GATEWAY_PATH, "0.3", n, c)),
            lambda n, c: asyncio.run(http_side(port, GATEWAY_PATH, "0.3", n, c)),
            args.requests,
            args.concurrent_requests,
        )
        opened, figures = medians(opened_rounds), medians(figures_rounds)
        progress(f"secured gateway: {figures}; open, in the same turns: {opened}")
    return secured_figures(figures, opened)


async def serve_gateway(
    url: str, namespace: str, port: int, grpc_port: int | None, profile_file: str | None, keys: str | None
) -> None:
    """The gateway child: serves until SIGTERM, then writes its profile if asked to."""
    from gateways.http.protection import AuthConfig, ConcurrencyConfig, Credential
    from gateways.http.server import HttpGateway
    from gateways.http.settings import HttpGatewaySettings
    from mesh.broker import BrokerSettings

    settings = HttpGatewaySettings(
        id="bench",
        port=port,
        default_agent="echo",
        grpc_port=grpc_port,
        rate_limit=None,
        concurrency=ConcurrencyConfig(max_requests_per_client=4 * CONCURRENCY),
        auth=AuthConfig(mode="api_key", keys=[Credential(name="bench-user", secret=BENCH_API_KEY)])
        if keys
        else AuthConfig(),
    )
    trust = bench_trust(keys, "bench")
    gateway = HttpGateway(settings, broker=BrokerSettings.from_url(url), namespace=namespace, trust=trust)
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    await gateway.start()
    await gateway.runtime.registry.wait_for("echo", timeout=10)
    profiler = None
    if profile_file:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    tune_for_serving()  # as `mesh run` does once its components are started
    print("ready", flush=True)
    await stopping.wait()
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile_file)
    await gateway.stop()


async def profiled_echo(url: str, namespace: str, task_store: str, keys: str | None, profile_file: str | None) -> None:
    """The echo agent child, under cProfile if asked to (stats written on SIGTERM)."""
    if not profile_file:
        await serve_echo(url, namespace, task_store, keys)
        return
    import cProfile

    profiler = cProfile.Profile()
    serving = asyncio.create_task(serve_echo(url, namespace, task_store, keys))
    stopping = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stopping.set)
    profiler.enable()
    await stopping.wait()
    profiler.disable()
    profiler.dump_stats(profile_file)
    serving.cancel()


if __name__ == "__main__":
    main()
