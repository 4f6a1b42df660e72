"""Nothing lost across a broker outage: persistent sessions carry the answers (DESIGN, "Delivery guarantees")."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from agents import Agent, TaskContext
from agents.service import AgentService
from mesh.a2a import Message, Task, TaskState, get_text_from_message
from mesh.broker import BrokerSettings
from mesh.brokertools.localbroker import LocalBroker
from mesh.client import MeshClient
from mesh.transport import MqttTransport

TASKS = 15
# The broker stays down 8 s: long enough for both sides' backoff to grow past its first steps
# while every answer is published during the outage.
OUTAGE_S = 8.0


class Gated(Agent):
    """Each task waits for ``release``; ``started`` / ``finished`` count the tasks at each point."""

    name = "gated"

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()
        self.started = 0
        self.finished = 0
        self.all_started = asyncio.Event()
        self.all_finished = asyncio.Event()

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        self.started += 1
        if self.started == TASKS:
            self.all_started.set()
        await self.release.wait()
        self.finished += 1
        if self.finished == TASKS:
            self.all_finished.set()
        return "done " + get_text_from_message(message)


async def test_answers_finished_during_a_broker_outage_all_reach_the_client(
    make_broker: Callable[..., LocalBroker], namespace: str, broker_dir: Path
) -> None:
    # With persistence the restarted broker still has both sessions (subscriptions included),
    # so the agent's answers, sent as soon as it is back, are kept for the client.
    store = broker_dir
    broker = make_broker(f"persistence true\npersistence_location {store}/")
    settings = BrokerSettings.from_url(broker.url, reconnect_min_delay_s=0.05, reconnect_max_delay_s=0.5)
    assert settings.session_expiry_s > 0  # the default: persistent sessions
    agent = Gated()
    service = AgentService(agent, broker=settings, namespace=namespace)
    await service.start()
    try:
        async with MeshClient.connect(settings, namespace) as client:
            sends = [asyncio.ensure_future(client.send("gated", f"task {i}", timeout=60)) for i in range(TASKS)]
            await asyncio.wait_for(agent.all_started.wait(), 15)

            lost: list[asyncio.Event] = [asyncio.Event(), asyncio.Event()]
            service.transport.add_disconnect_listener(lambda _reason: lost[0].set())
            client.transport.add_disconnect_listener(lambda _reason: lost[1].set())
            broker.stop()
            await asyncio.wait_for(asyncio.gather(*(event.wait() for event in lost)), 10)
            # The tasks finish while the broker is down: their answers wait in the agent's client.
            agent.release.set()
            await asyncio.wait_for(agent.all_finished.wait(), 10)
            await asyncio.sleep(OUTAGE_S)
            broker.start()

            results = await asyncio.wait_for(asyncio.gather(*sends), 30)
    finally:
        await service.stop()
    texts = []
    for task in results:
        assert isinstance(task, Task) and task.status.state is TaskState.completed, task
        assert task.status.message is not None
        texts.append(get_text_from_message(task.status.message))
    assert sorted(texts) == sorted(f"done task {i}" for i in range(TASKS))


async def test_a_lost_connection_is_logged_with_the_component_and_a_reason_in_words(
    make_broker: Callable[..., LocalBroker], caplog: pytest.LogCaptureFixture
) -> None:
    broker = make_broker()
    settings = BrokerSettings.from_url(broker.url, reconnect_min_delay_s=0.05, reconnect_max_delay_s=0.2)
    async with MqttTransport(settings, client_id="echo-component") as transport:
        lost = asyncio.Event()
        transport.add_disconnect_listener(lambda _reason: lost.set())
        with caplog.at_level(logging.WARNING, logger="mesh.transport"):
            broker.stop()
            await asyncio.wait_for(lost.wait(), 10)
        broker.start()
    [line] = [r.getMessage() for r in caplog.records if "lost" in r.getMessage()]
    assert line.startswith(f"echo-component: connection to {broker.url} lost (")
    assert "Unspecified error" not in line, line
    assert "the broker closed the connection" in line, line
