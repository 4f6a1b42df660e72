"""A pool of the EMQX profile on Mosquitto while others watch the profile's topics (issue 38, item 5).

Mosquitto 2.0 does not deliver ``$`` topics to shared subscriptions; a pool member finds that out
at start and splits the pool by Task.id instead. An observer of ``$a2a/v1/event/#`` or
``$a2a/v1/#`` (a monitoring client, ``mosquitto_sub``) must not fool that probe, and the probe
must not put empty messages where such observers read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from a2a_over_mqtt import MqttConfig, TopicSpace

from agents import AgentSettings
from agents.service import AgentService
from mesh.a2a import Task, TaskState
from mesh.broker import BrokerSettings
from mesh.brokertools.brokerrules import Identity, ProfileScope, profile_member_id, profile_user
from mesh.brokertools.localbroker import LocalBroker
from mesh.client import MeshClient
from mesh.clientids import slot_user
from mesh.config.credentials import password_for
from mesh.errors import SubscribeError
from mesh.profile.emqx import EmqxProfile
from mesh.transport import InboundMessage, MqttTransport
from tests.agents.profile_tests.test_responder import message, one_reply, v1_request
from tests.agents.service_agents import Echo
from tests.test_broker_rules import broker_under_rules
from topics import profile_client_id

pytestmark = pytest.mark.asyncio


async def test_a_pool_answers_on_mosquitto_while_others_watch_the_profiles_topics(
    broker_settings: BrokerSettings, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    org = f"t{uuid.uuid4().hex[:10]}"
    space = TopicSpace(org=org, unit="ai")
    events, watcher = MqttTransport(broker_settings), MqttTransport(broker_settings)
    seen: list[tuple[str, bytes]] = []

    def watch(msg: InboundMessage) -> None:
        if f"/{org}/" in msg.topic:  # (other tests' orgs are theirs)
            seen.append((msg.topic, msg.payload))

    for transport in (events, watcher):
        await transport.connect()
    await events.subscribe("$a2a/v1/event/#", lambda msg: None)  # a plain observer of the events
    await watcher.subscribe("$a2a/v1/#", watch)
    settings = AgentSettings(
        task_store=":memory:", shared_subscription=True, emqx=EmqxProfile(org=org, unit="ai", pool="echoes")
    )
    services = [AgentService(Echo(), broker=broker_settings, namespace=namespace, settings=settings) for _ in range(2)]
    try:
        with caplog.at_level(logging.INFO, logger="agents.profile"):
            for service in services:
                await service.start()
        assert all(s.profile is not None and s.profile.split_pool for s in services)
        shared = [r.getMessage() for r in caplog.records if "does not share $ topics" in r.getMessage()]
        assert len(shared) == 2, [r.getMessage() for r in caplog.records]
        mqtt = MqttConfig(host=broker_settings.host, port=broker_settings.port)
        async with asyncio.timeout(30):
            for i in range(5):
                reply = await one_reply(
                    mqtt,
                    space,
                    "pool/echoes",
                    v1_request("SendMessage", {"message": message(f"n{i}", str(uuid.uuid4()))}),
                )
                assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert seen, "the watcher saw nothing of the pool"
        empty = [topic for topic, payload in seen if not payload]
        assert empty == [], f"empty messages on {empty}"
    finally:
        for service in services:
            await service.stop()
        for transport in (events, watcher):
            await transport.close()


async def test_the_probe_stays_within_a_pool_members_broker_rules(
    make_broker: Callable[..., LocalBroker], broker_dir: Path, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Under the generated rules a replica's profile user may make the probe's shared
    subscription (nothing more of the replies), and the pool answers the CLI's requests."""
    org = f"t{uuid.uuid4().hex[:10]}"
    identities = [
        Identity(
            "agent",
            "echo",
            namespace,
            replica=True,
            profile=ProfileScope(org, "ai", "echo", pool="echoes", replica=True),
        ),
        Identity("client", "cli", namespace),
    ]
    with broker_under_rules(make_broker, broker_dir, namespace, identities) as ruled:
        settings = AgentSettings(
            task_store=":memory:", shared_subscription=True, emqx=EmqxProfile(org=org, unit="ai", pool="echoes")
        )
        service = AgentService(Echo(), broker=ruled.settings("echo"), namespace=namespace, settings=settings)
        with caplog.at_level(logging.INFO, logger="agents.profile"):
            await service.start()
        try:
            assert service.profile is not None and service.profile.split_pool
            assert any("does not share $ topics" in r.getMessage() for r in caplog.records)
            async with MeshClient.connect(ruled.settings("cli"), namespace) as client:
                task = await client.send(f"{org}/ai/pool/echoes", "ruled pool")
            assert isinstance(task, Task) and task.status.state is TaskState.completed
            # The probe's grant is its suffix only: another requester's replies stay unreadable (as
            # the profile user of another slot than the service's, under that slot's client id).
            user = profile_user("echo")
            probe_user = dataclasses.replace(
                ruled.settings("echo"), username=slot_user(user, 15), password=password_for(ruled.files.passwords, user)
            )
            other = MqttTransport(probe_user, client_id=profile_client_id(org, "ai", profile_member_id("echo", 15)))
            await other.connect()
            try:
                with pytest.raises(SubscribeError):
                    await other.subscribe(f"$share/x/$a2a/v1/reply/{org}/ai/cli/+", lambda msg: None)
            finally:
                await other.close()
        finally:
            await service.stop()
