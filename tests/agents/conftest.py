"""Fixtures: a client to call the agents served with ``serve_agent`` (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from mesh.broker import BrokerSettings
from mesh.client import MeshClient


@pytest.fixture
async def client(broker_settings: BrokerSettings, namespace: str) -> AsyncIterator[MeshClient]:
    async with MeshClient.connect(broker_settings, namespace) as connected:
        yield connected
