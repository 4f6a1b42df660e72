"""``mesh mcp``'s server in this process (the SDK's in-memory Client): the limits, without a subprocess."""

from __future__ import annotations

from typing import Any, cast

import anyio
import mcp_types as types
import pytest
from mcp import Client
from opentelemetry import trace

from gateways.mcp import server as mcp_server
from gateways.mcp.bridge import MeshBridge
from gateways.mcp.server import McpGateway
from mesh.broker import BrokerSettings
from tests.agents.service_agents import Blocker
from tests.conftest import ServeAgent


async def test_calls_over_the_in_flight_limit_are_refused_with_is_error(
    serve_agent: ServeAgent, broker_settings: BrokerSettings, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_server, "MAX_CALLS_IN_FLIGHT", 1)
    blocker = Blocker()
    await serve_agent(blocker)
    bridge = MeshBridge("mcp-inprocess", broker=broker_settings, namespace=namespace)
    gateway = McpGateway(bridge)
    gateway.bind_loop()
    await bridge.start()
    try:
        await bridge.registry.wait_for("blocker", 5)
        async with Client(gateway.server) as client, anyio.create_task_group() as group:
            group.start_soon(client.call_tool, "blocker", {"message": "hold"})
            with anyio.fail_after(10):
                await blocker.started.wait()
            refused = await client.call_tool("blocker", {"message": "one more"})
            assert refused.is_error
            block = refused.content[0]
            assert isinstance(block, types.TextContent) and "1 tool calls in flight, its limit" in block.text
            unknown = await client.call_tool("blocker", {"message": "x", "colour": "red"})
            assert unknown.is_error and "unknown argument(s) ['colour']" in str(unknown.content[0])
            group.cancel_scope.cancel()  # the first call's handler is cancelled: its task too
        with anyio.fail_after(10):
            while blocker.cancellations == 0:
                await anyio.sleep(0.02)  # the tasks/cancel travels to the agent
    finally:
        await gateway.close()
        await bridge.stop()


async def test_the_sdks_tracing_middleware_runs_only_once_a_tracer_provider_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    bridge = MeshBridge("mcp-tracing", broker=BrokerSettings(), namespace="mesh")  # never started
    middleware = [m for m in McpGateway(bridge).server.middleware if isinstance(m, mcp_server._OtelWhenInstalled)]
    assert len(middleware) == 1, "the SDK's OpenTelemetry middleware is wrapped, not dropped"
    spans: list[str] = []

    async def inner(ctx: object, call_next: object) -> dict[str, str]:
        spans.append("span")
        return {"via": "otel"}

    async def handler(ctx: object) -> dict[str, str]:
        return {"via": "handler"}

    monkeypatch.setattr(middleware[0], "_inner", inner)
    ctx = cast(Any, object())  # the wrapper only hands it on
    assert await middleware[0](ctx, handler) == {"via": "handler"} and spans == []  # no provider: no span
    monkeypatch.setattr(trace, "get_tracer_provider", trace.NoOpTracerProvider)  # one installed, not the proxy
    assert await middleware[0](ctx, handler) == {"via": "otel"} and spans == ["span"]
