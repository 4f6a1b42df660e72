"""Shared fixtures: a real Mosquitto for the session and a random namespace per test.

The broker comes from ``MESH_TEST_BROKER_URL`` if set; else a testcontainers Mosquitto when a
Docker engine answers; else the local ``mosquitto`` binary on a free port. Both started
brokers use the repository's mosquitto.conf. With none of these the run stops and says how
to get a broker.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from agents import Agent, AgentSettings
from agents.journal import STATE_DIR_ENV
from agents.service import AgentService
from mesh.broker import BrokerSettings
from mesh.brokertools.localbroker import (
    BrokerUnavailableError,
    LocalBroker,
    default_config_path,
    running_broker,
)
from mesh.transport import MqttTransport

# The artifact stores' fixtures (an S3-compatible server, store settings), for every test package.
pytest_plugins = ["tests.artifact_stores", "tests.postgres"]

TransportFactory = Callable[..., Awaitable[MqttTransport]]
ServeAgent = Callable[..., Awaitable[AgentService]]


@pytest.fixture(scope="session", autouse=True)
def state_dir() -> Iterator[Path]:
    """Agents' task files (SQLite) go to a directory of the run's, inherited by child processes."""
    with tempfile.TemporaryDirectory(prefix="mesh-state-") as directory:
        previous = os.environ.get(STATE_DIR_ENV)
        os.environ[STATE_DIR_ENV] = directory
        yield Path(directory)
        if previous is None:
            del os.environ[STATE_DIR_ENV]
        else:
            os.environ[STATE_DIR_ENV] = previous


@pytest.fixture(scope="session")
def broker_url() -> Iterator[str]:
    url = os.environ.get("MESH_TEST_BROKER_URL")
    if url:
        yield url
        return
    try:
        with running_broker(prefer="container") as broker:
            yield broker.url
    except BrokerUnavailableError as exc:
        pytest.exit(f"integration tests need an MQTT broker: {exc}", returncode=3)


@pytest.fixture
def broker_settings(broker_url: str) -> BrokerSettings:
    return BrokerSettings.from_url(broker_url)


@pytest.fixture
def namespace() -> str:
    """A namespace no other test uses, so tests never see each other's messages."""
    return f"test/{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def make_transport(broker_settings: BrokerSettings) -> AsyncIterator[TransportFactory]:
    """Connected transports to the session broker, closed after the test."""
    made: list[MqttTransport] = []

    async def make(settings: BrokerSettings | None = None, **kwargs: object) -> MqttTransport:
        transport = MqttTransport(settings or broker_settings, **kwargs)  # type: ignore[arg-type]
        await transport.connect()
        made.append(transport)
        return transport

    yield make
    for transport in made:
        await transport.close()


@pytest.fixture
async def serve_agent(broker_settings: BrokerSettings, namespace: str) -> AsyncIterator[ServeAgent]:
    """``await serve_agent(agent, settings)``: the agent served on the test's namespace until the test ends."""
    started: list[AgentService] = []

    async def start(agent: Agent, settings: AgentSettings | None = None) -> AgentService:
        service = AgentService(agent, broker=broker_settings, namespace=namespace, settings=settings)
        await service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        await service.stop()  # a second stop does nothing


@pytest.fixture
def broker_dir() -> Iterator[Path]:
    """A directory for files a test's own Mosquitto reads (ACL, passwords, certificates, store).

    Mosquitto reads them as user 'mosquitto', so it sits directly under the system temp
    directory: pytest's tmp_path lies under an owner-only parent that any other pytest session
    on the machine may reset to 0700 at any time.
    """
    directory = Path(tempfile.mkdtemp(prefix="mesh-test-broker-"))
    directory.chmod(0o777)
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def make_broker() -> Iterator[Callable[..., LocalBroker]]:
    """Brokers of the test's own (extra config lines appended), which it may stop and restart."""
    started: list[LocalBroker] = []

    def make(extra_config: str = "") -> LocalBroker:
        try:
            broker = LocalBroker(default_config_path(), extra_config=extra_config)
        except BrokerUnavailableError as exc:
            pytest.skip(f"needs the mosquitto binary to run a broker of its own: {exc}")
        broker.start()
        started.append(broker)
        return broker

    yield make
    for broker in started:
        broker.remove()
