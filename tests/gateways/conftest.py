"""Fixtures: agents and an HTTP gateway on the session broker, in this process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from gateways.http.server import HttpGateway
from gateways.http.settings import HttpGatewaySettings
from mesh.broker import BrokerSettings

StartGateway = Callable[..., Awaitable[HttpGateway]]


@pytest.fixture
async def start_gateway(broker_settings: BrokerSettings, namespace: str) -> AsyncIterator[StartGateway]:
    """``await start_gateway(default_agent="echo", auth={...})``: a gateway on a free port.

    It waits until the gateway's registry has seen ``wait_for`` agents (default: the default
    agent), so a test never races the discovery of its agents.
    """
    started: list[HttpGateway] = []

    async def start(*, wait_for: tuple[str, ...] | None = None, **settings: Any) -> HttpGateway:
        settings.setdefault("port", 0)
        gateway = HttpGateway(HttpGatewaySettings.model_validate(settings), broker=broker_settings, namespace=namespace)
        await gateway.start()
        started.append(gateway)
        names = wait_for if wait_for is not None else tuple(filter(None, [settings.get("default_agent")]))
        for name in names:
            await gateway.runtime.registry.wait_for(name, 5)
        return gateway

    yield start
    for gateway in started:
        await gateway.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=30) as client:
        yield client
