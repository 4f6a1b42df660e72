"""Three bridged Mosquitto brokers: a hub and two sites, each site bridged to the hub with the
repository's deploy/mosquitto/bridge.conf, agents on every broker.

Discovery, send, stream and delegation work across brokers; replicas live on one site, because
``$share`` groups are per broker (README, "Replicas").
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from agents import AgentSettings, TaskContext
from agents.agent import Agent
from agents.service import AgentService
from mesh.a2a import Message, Task, TaskArtifactUpdateEvent, TaskState, get_text_from_message
from mesh.broker import BrokerSettings
from mesh.brokertools.localbroker import LocalBroker
from mesh.client import MeshClient
from mesh.discovery.registry import DiscoveryRegistry
from mesh.transport import MqttTransport
from tests.agents.service_agents import Echo, Relay, Streamer
from tests.support import Inbox, wait_until


class Counted(Echo):
    """An echo that counts the requests it runs, in this process."""

    runs: ClassVar[list[str]] = []
    ran: ClassVar[asyncio.Event]

    async def handle(self, message: Message, ctx: TaskContext) -> str:
        type(self).runs.append(ctx.task_id)
        type(self).ran.set()
        return await super().handle(message, ctx)


BRIDGE_CONF = Path(__file__).resolve().parents[2] / "deploy" / "mosquitto" / "bridge.conf"


def bridge_config(name: str, hub: LocalBroker, namespace: str) -> str:
    """deploy/mosquitto/bridge.conf for a site of ``hub``: this test's namespace, no credentials."""
    text = BRIDGE_CONF.read_text()
    text = re.sub(r"(?m)^connection .*$", f"connection {name}", text)
    text = re.sub(r"(?m)^address .*$", f"address {hub.host}:{hub.port}", text)
    text = re.sub(r"(?m)^topic mesh/a2a/v1/# ", f"topic {namespace}/a2a/v1/# ", text)
    return re.sub(r"(?m)^remote_(username|password) .*$\n?", "", text)


async def bridged(site: LocalBroker) -> None:
    """Wait until the site's bridge to the hub is up (Mosquitto's connection notification)."""
    watcher = MqttTransport(BrokerSettings.from_url(site.url))
    await watcher.connect()
    inbox = Inbox()
    try:
        await watcher.subscribe("$SYS/broker/connection/+/state", inbox)  # its client id: host.name
        async with asyncio.timeout(10):
            while not inbox.messages or inbox.messages[-1].payload != b"1":
                await inbox.wait_for(len(inbox.messages) + 1, timeout=10)
    finally:
        await watcher.close()


async def test_three_bridged_brokers_carry_discovery_send_stream_delegation_and_site_replicas(
    make_broker: Callable[..., LocalBroker], namespace: str
) -> None:
    hub = make_broker()
    site_a = make_broker(bridge_config("site-a", hub, namespace))
    site_b = make_broker(bridge_config("site-b", hub, namespace))
    await asyncio.gather(bridged(site_a), bridged(site_b))
    urls = {"hub": hub.url, "a": site_a.url, "b": site_b.url}
    memory = AgentSettings(task_store=":memory:")
    replica = AgentSettings(shared_subscription=True)
    served: list[tuple[str, Agent, AgentSettings]] = [
        ("hub", Echo(name="echo"), memory),
        ("a", Streamer(steps=2, name="streamer"), memory),
        ("b", Relay(name="relay", next_agent="streamer", forward=True, stream=True), memory),
        ("a", Echo(name="twin"), replica),
        ("a", Echo(name="twin"), replica),
        ("a", Counted(name="split"), replica),
        ("b", Counted(name="split"), replica),
    ]
    services = [
        AgentService(agent, broker=BrokerSettings.from_url(urls[where]), namespace=namespace, settings=settings)
        for where, agent, settings in served
    ]
    try:
        for service in services:
            await service.start()
        # Discovery: a registry on site b sees the agents of every broker, replicas counted.
        transport = MqttTransport(BrokerSettings.from_url(site_b.url))
        await transport.connect()
        registry = DiscoveryRegistry(transport, namespace)
        changed = asyncio.Event()
        registry.add_instance_listener(lambda *_: changed.set())
        await registry.start()
        try:
            for name in ("echo", "streamer", "relay", "twin"):
                await registry.wait_for(name, 10)
            while len(registry.instances("twin")) < 2:
                changed.clear()
                await asyncio.wait_for(changed.wait(), 10)
        finally:
            await registry.stop()
            await transport.close()

        async with MeshClient.connect(site_b.url, namespace) as client:
            # Send: site b -> hub.
            task = await client.send("echo", "across", timeout=10)
            assert isinstance(task, Task) and task.status.message is not None
            assert get_text_from_message(task.status.message) == "across"
            # Stream: site b -> site a, through the hub.
            items = [item async for item in client.stream("streamer", "go", idle_timeout=10)]
            assert [i.artifact.name for i in items if isinstance(i, TaskArtifactUpdateEvent)][:2] == ["log", "log"]
            final = items[-1]
            assert isinstance(final, Task) and final.status.state is TaskState.completed
            # Delegation: the relay on site b streams from the streamer on site a.
            relayed = await client.send("relay", "go", timeout=10)
            assert isinstance(relayed, Task) and relayed.status.state is TaskState.completed
            # Replicas on site a: each request from site b is served once, by one of them.
            twins = await asyncio.gather(*(client.send("twin", f"n{i}", timeout=10) for i in range(20)))
            owners = Counter(client.calls.owner_of("twin", t.id) for t in twins if isinstance(t, Task))
            assert sum(owners.values()) == 20 and len(owners) == 2
            twin_tasks = sum(len(s.tasks) for s in services[3:])
            assert twin_tasks == 20  # no duplicate: one group, on one broker
            # A follow-up goes across the bridges to the replica that owns the task.
            got = await client.get_task("twin", twins[0].id, timeout=10)
            assert got.id == twins[0].id
        # Shared groups are per broker: replicas on two sites each run a request sent once.
        Counted.runs, Counted.ran = [], asyncio.Event()
        async with MeshClient.connect(hub.url, namespace) as client:
            await client.send("split", "once", timeout=10)
            await wait_until(lambda: len(Counted.runs) == 2, Counted.ran, 10)
        assert len(set(Counted.runs)) == 1  # the same task, run by a replica on each site
    finally:
        for service in reversed(services):
            await service.stop()
