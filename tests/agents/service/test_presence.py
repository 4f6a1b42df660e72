"""An agent's card on the discovery topics: retained, refreshed, cleared by will and shutdown."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

from agents import AgentSettings
from agents.service import AgentService
from mesh.a2a import AgentCard
from mesh.broker import BrokerSettings
from mesh.brokertools.localbroker import LocalBroker
from mesh.transport import MqttTransport
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent, TransportFactory
from tests.support import Inbox, start_agent_process


async def first_message_on(transport: MqttTransport, topic: str) -> bytes:
    """What a new subscriber to ``topic`` gets first: the retained message, or a marker we send.

    A marker published after the subscription is in place arrives after any retained message,
    so getting the marker first proves nothing is retained.
    """
    inbox = Inbox()
    subscription = await transport.subscribe(topic, inbox)
    await transport.publish(topic, b"marker")
    first = (await inbox.wait_for(1))[0]
    await transport.unsubscribe(subscription)
    return first.payload


async def test_card_is_retained_without_an_expiry_and_names_the_request_topic(
    serve_agent: ServeAgent, make_transport: TransportFactory, namespace: str, broker_settings: BrokerSettings
) -> None:
    await serve_agent(Echo())
    watcher = await make_transport()
    inbox = Inbox()
    await watcher.subscribe(f"{namespace}/a2a/v1/discovery/agentcards/echo", inbox)
    [message] = await inbox.wait_for(1)
    assert message.retain
    assert message.properties.message_expiry_s is None  # liveness is keepalive + will, not a TTL
    card = AgentCard.model_validate_json(message.payload)
    assert card.name == "echo" and card.skills[0].id == "echo"
    assert card.url == f"{broker_settings.url}/{namespace}/a2a/v1/agent/request/echo"
    assert card.capabilities.streaming and card.capabilities.push_notifications


async def test_sam_heartbeat_publishes_the_card_on_the_bare_topic_every_interval(
    serve_agent: ServeAgent, make_transport: TransportFactory, namespace: str
) -> None:
    watcher = await make_transport()
    inbox = Inbox()
    await watcher.subscribe(f"{namespace}/a2a/v1/discovery/agentcards", inbox)
    await serve_agent(Echo(), AgentSettings(sam_heartbeat=True, card_interval_s=0.2))
    messages = await inbox.wait_for(3, timeout=5)
    assert not any(m.retain for m in messages)
    assert AgentCard.model_validate_json(messages[-1].payload).name == "echo"


async def test_clean_stop_clears_the_card(
    serve_agent: ServeAgent, make_transport: TransportFactory, namespace: str
) -> None:
    service = await serve_agent(Echo())
    watcher = await make_transport()
    topic = f"{namespace}/a2a/v1/discovery/agentcards/echo"
    assert (await first_message_on(watcher, topic)).startswith(b"{")
    await service.stop()
    assert await first_message_on(watcher, topic) == b"marker"


async def test_the_will_clears_the_card_when_the_process_dies(
    make_transport: TransportFactory, namespace: str, broker_url: str
) -> None:
    watcher = await make_transport()
    inbox = Inbox()
    await watcher.subscribe(f"{namespace}/a2a/v1/discovery/agentcards/echo", inbox)
    proc = await start_agent_process(broker_url, namespace)
    await inbox.wait_for(1)
    proc.send_signal(signal.SIGKILL)
    await proc.wait()
    messages = await inbox.wait_for(2, timeout=10)
    assert messages[0].payload.startswith(b"{") and messages[-1].payload == b""


async def test_card_is_republished_after_a_broker_restart(
    make_broker: Callable[..., LocalBroker], namespace: str
) -> None:
    broker = make_broker()
    settings = BrokerSettings.from_url(broker.url, reconnect_min_delay_s=0.05, reconnect_max_delay_s=0.2)
    service = AgentService(Echo(), broker=settings, namespace=namespace)
    await service.start()
    back = asyncio.Event()
    service.transport.add_connect_listener(lambda _present: back.set())
    watcher = MqttTransport(settings)
    try:
        broker.stop()  # persistence is off: the retained card is gone with it
        broker.start()
        await asyncio.wait_for(back.wait(), 10)
        await watcher.connect()
        inbox = Inbox()
        await watcher.subscribe(f"{namespace}/a2a/v1/discovery/agentcards/echo", inbox)
        [card] = await inbox.wait_for(1, timeout=10)
        assert AgentCard.model_validate_json(card.payload).name == "echo"
    finally:
        await watcher.close()
        await service.stop()
