"""Fixtures: a real a2a-sdk remote agent on a free port, and the proxy serving it on the mesh."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from agents.remote.agent import RemoteAgent
from agents.remote.config import RemoteConfig
from agents.service import AgentService
from agents.settings import AgentSettings
from mesh.brokertools.localbroker import free_port
from tests.agents.remote.server import Tokens, Weather, app, serving

ServeRemote = Callable[..., Awaitable[tuple[RemoteAgent, AgentService]]]


@dataclass
class Remote:
    port: int
    executor: Weather
    tokens: Tokens | None

    @property
    def card_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/.well-known/agent-card.json"


@pytest.fixture
async def remote() -> AsyncIterator[Remote]:
    port = free_port()
    executor = Weather()
    async with serving(app(port, executor), port):
        yield Remote(port, executor, None)


@pytest.fixture
async def guarded_remote() -> AsyncIterator[Remote]:
    """A remote whose A2A routes want an OAuth 2 token from its own token endpoint."""
    port = free_port()
    executor, tokens = Weather(), Tokens()
    async with serving(app(port, executor, tokens), port):
        yield Remote(port, executor, tokens)


@pytest.fixture
async def serve_remote(serve_agent: Any) -> ServeRemote:
    async def start(
        name: str = "weather", settings: AgentSettings | None = None, **config: Any
    ) -> tuple[RemoteAgent, AgentService]:
        agent = RemoteAgent(name=name, remote=RemoteConfig.model_validate(config))
        service = await serve_agent(agent, settings)
        return agent, service

    return start
