"""An echo tool call through ``mesh mcp`` against the same call through ``mesh send``'s client path.

What an MCP client sees (Claude Desktop, Cursor...) next to what ``mesh send`` sees, one process each::

    Mosquitto            from mosquitto.conf via bench/harness.py (or --broker URL)
    echo agent           AgentService(EchoAgent) on the broker            (child process)
    mesh mcp             the command over stdio, as a client launches it   (child process)
    client               this process: the official mcp SDK's ClientSession to mesh mcp, and
                         a MeshClient (the client path of `mesh send`) to the broker

- mcp: ``tools/call echo {"message": "hello"}`` -> stdio -> mesh mcp -> Mosquitto -> echo -> back;
- mesh_send: ``MeshClient.send("echo", "hello")`` -> Mosquitto -> echo -> back;
- mcp_floor (context): the same tool call to a bare MCP server (the SDK's low-level ``Server``
  as it ships, answering at once, on mesh mcp's stdio transport, :mod:`gateways.mcp.stdio`):
  what MCP itself costs (two SDK sides, a pipe each way), with no mesh behind it. It shares
  mesh mcp's transport, so a faster transport lowers both; it keeps the SDK's OpenTelemetry
  middleware, which mesh mcp skips while no tracer provider is installed.

Both sequential (one call in flight), 200 warm-up calls each, then ``--requests`` measured on
each side, the two sides taking turns call by call, so both see the machine as it is at that
moment (measured one side after the other, a 2-core machine's drift between the two runs moved
the overhead by ±400 us). The goal: the MCP call costs at most 1 ms more (median) than the
direct one. Last line on stdout::

    {"mcp_echo_rtt_us": ..., "mesh_send_rtt_us": ..., "overhead_us": ..., "goal_overhead_us": 1000,
     "within_goal": ..., "mcp_floor_rtt_us": ..., "overhead_beyond_mcp_floor_us": ...,
     "mcp_p99_us": ..., "mesh_send_p99_us": ..., "requests": ...}

``overhead_beyond_mcp_floor_us`` = mcp - (mesh_send + mcp_floor): what the gateway adds beyond
the two paths it joins.

``--profile-mcp FILE`` runs ``mesh mcp`` under cProfile (read with ``python -m pstats FILE``); its
figures are then not comparable.

Run: ``python bench/mcp.py [--broker URL] [--requests N] [--profile-mcp FILE]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

# This file is bench/mcp.py: with bench/ first on the path, ``import mcp`` would find it, not the SDK.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from bench.agent import serve_echo  # noqa: E402 (after the path fix above)
from bench.harness import ROOT, base_arguments, broker_url, child, emit, median_us, p99_us, progress  # noqa: E402

GOAL_OVERHEAD_US = 1000.0
WARMUP = 200


async def sequential(call: Callable[[], Awaitable[None]], requests: int) -> list[float]:
    for _ in range(WARMUP):
        await call()
    samples = []
    for _ in range(requests):
        start = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - start)
    return samples


async def taking_turns(
    first: Callable[[], Awaitable[None]], second: Callable[[], Awaitable[None]], requests: int
) -> tuple[list[float], list[float]]:
    """Each call sequential, the two alternating: ``first``'s and ``second``'s round trips."""
    for _ in range(WARMUP):
        await first()
        await second()
    samples: tuple[list[float], list[float]] = ([], [])
    for _ in range(requests):
        for call, times in ((first, samples[0]), (second, samples[1])):
            start = time.perf_counter()
            await call()
            times.append(time.perf_counter() - start)
    return samples


@contextlib.asynccontextmanager
async def mcp_session(args: list[str]) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """An echo tool call to the MCP server ``python args...`` launched over stdio."""
    import mcp_types as types
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=args, env={"PYTHONPATH": str(ROOT)})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        while "echo" not in {tool.name for tool in (await session.list_tools()).tools}:
            await asyncio.sleep(0.05)  # the echo card may still be on its way to mesh mcp

        async def call() -> None:
            result = await session.call_tool("echo", {"message": "hello"})
            block = result.content[0]
            assert not result.is_error and isinstance(block, types.TextContent) and block.text == "hello", result

        yield call


async def mcp_side(args: list[str], requests: int) -> list[float]:
    """Tool calls to the MCP server ``python args...`` launched over stdio."""
    async with mcp_session(args) as call:
        return await sequential(call, requests)


async def both_sides(url: str, namespace: str, args: list[str], requests: int) -> tuple[list[float], list[float]]:
    """``mesh send``'s client path and the tool call through ``mesh mcp``, taking turns."""
    from mesh.a2a import Task, TaskState
    from mesh.client import MeshClient

    async with MeshClient.connect(url, namespace) as client, mcp_session(args) as tool_call:
        await client.wait_for_agent("echo", 10)

        async def send() -> None:
            task = await client.send("echo", "hello")
            assert isinstance(task, Task) and task.status.state is TaskState.completed, task

        return await taking_turns(send, tool_call, requests)


async def serve_floor() -> None:
    """A bare MCP server with one echo tool, on the stdio transport mesh mcp uses."""
    import mcp_types as types
    from mcp.server import Server

    from gateways.mcp.stdio import stdio_streams

    async def list_tools(ctx: object, params: object) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="echo", input_schema={"type": "object"})])

    async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(text=str((params.arguments or {})["message"]))])

    server: Server[object] = Server("floor", on_list_tools=list_tools, on_call_tool=call_tool)  # type: ignore[arg-type]
    async with stdio_streams() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def main() -> None:
    parser = base_arguments(__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000, help="sequential calls measured on each side")
    parser.add_argument("--profile-mcp", metavar="FILE", help="run mesh mcp under cProfile; stats to FILE")
    parser.add_argument("--serve-echo", action="store_true", help="(internal) run the echo agent")
    parser.add_argument("--serve-floor", action="store_true", help="(internal) run the bare MCP server")
    parser.add_argument("--namespace", default=f"bench/{uuid.uuid4().hex[:8]}", help="(internal)")
    args = parser.parse_args()
    if args.serve_floor:
        asyncio.run(serve_floor())
        return
    if args.serve_echo:
        asyncio.run(serve_echo(args.broker, args.namespace, ":memory:"))
        return
    with broker_url(args.broker) as url:
        script = [str(Path(__file__).resolve()), "--serve-echo", "--broker", url, "--namespace", args.namespace]
        with child(script):
            progress(
                f"echo agent up; {args.requests} calls through MeshClient (mesh send's path) and as many echo "
                "tool calls through mesh mcp (stdio), taking turns"
            )
            command = ["-m", "mesh.cli", "mcp", "--broker", url, "--namespace", args.namespace, "--agents", "echo"]
            if args.profile_mcp:
                command = ["-m", "cProfile", "-o", args.profile_mcp, *command]
            direct, mcp = asyncio.run(both_sides(url, args.namespace, command, args.requests))
    progress(f"{args.requests} echo tool calls to a bare MCP server (the protocol's floor)")
    floor = asyncio.run(mcp_side([str(Path(__file__).resolve()), "--serve-floor"], args.requests))
    overhead = round(median_us(mcp) - median_us(direct), 1)
    emit(
        {
            "mcp_echo_rtt_us": median_us(mcp),
            "mesh_send_rtt_us": median_us(direct),
            "overhead_us": overhead,
            "goal_overhead_us": GOAL_OVERHEAD_US,
            "within_goal": overhead <= GOAL_OVERHEAD_US,
            "mcp_floor_rtt_us": median_us(floor),
            "overhead_beyond_mcp_floor_us": round(median_us(mcp) - median_us(direct) - median_us(floor), 1),
            "mcp_p99_us": p99_us(mcp),
            "mesh_send_p99_us": p99_us(direct),
            "requests": args.requests,
        }
    )


if __name__ == "__main__":
    main()
