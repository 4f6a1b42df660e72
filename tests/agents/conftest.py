"""Fixtures: agents served on the session broker, and a client to call them."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from agents import Agent, AgentSettings
from agents.service import AgentService
from mesh.broker import BrokerSettings
from mesh.client import MeshClient

Serve = Callable[..., Awaitable[AgentService]]


@pytest.fixture
async def serve(broker_settings: BrokerSettings, namespace: str) -> AsyncIterator[Serve]:
    """Start agents on the test's namespace; stopped after the test."""
    started: list[AgentService] = []

    async def start(agent: Agent, settings: AgentSettings | None = None) -> AgentService:
        service = AgentService(agent, broker=broker_settings, namespace=namespace, settings=settings)
        await service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        await service.stop()


@pytest.fixture
async def client(broker_settings: BrokerSettings, namespace: str) -> AsyncIterator[MeshClient]:
    async with MeshClient.connect(broker_settings, namespace) as connected:
        yield connected
