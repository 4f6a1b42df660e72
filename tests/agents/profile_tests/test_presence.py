"""The EMQX profile's presence, pools and bearer tokens, served by mesh agents on the real broker.

Against the official SDK (``a2a-over-mqtt``): its Requester calls a pool, and raw aiomqtt
clients read what the profile's observers read (retained cards and their user properties).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from a2a_over_mqtt import MqttConfig, Requester, TopicSpace

from agents import AgentSettings
from agents.service import AgentService
from mesh.broker import BrokerSettings
from mesh.profile.emqx import EmqxProfile
from mesh.trust import generate_keys
from tests.agents.profile_tests.test_responder import collect, message, one_reply, v1_request
from tests.agents.service_agents import Echo
from tests.agents.test_trust import Whoami, minter, trust_of

pytestmark = pytest.mark.asyncio


@pytest.fixture
def space() -> TopicSpace:
    return TopicSpace(org=f"t{uuid.uuid4().hex[:10]}", unit="ai")


@pytest.fixture
def sdk_mqtt(broker_settings: BrokerSettings) -> MqttConfig:
    return MqttConfig(host=broker_settings.host, port=broker_settings.port)


async def card_updates(
    mqtt: MqttConfig, topic: str, until: str, first: asyncio.Event | None = None
) -> list[tuple[dict[str, Any], dict[str, str]]]:
    """The card messages on ``topic`` (card, user properties) until one has ``a2a-status=until``;
    ``first`` is set once the first one (the retained card) arrived."""
    seen: list[tuple[dict[str, Any], dict[str, str]]] = []
    async with aiomqtt.Client(**mqtt.client_kwargs()) as client:
        await client.subscribe(topic, qos=1)
        async with asyncio.timeout(15):
            async for msg in client.messages:
                props = dict(msg.properties.UserProperty) if msg.properties and msg.properties.UserProperty else {}
                seen.append((json.loads(msg.payload), props))
                if first is not None:
                    first.set()
                if props.get("a2a-status") == until:
                    return seen
    return seen


async def test_a_killed_agents_card_shows_offline_from_its_will(
    broker_url: str, sdk_mqtt: MqttConfig, space: TopicSpace, namespace: str
) -> None:
    script = textwrap.dedent(
        f"""
        import asyncio
        from agents import AgentSettings
        from agents.service import AgentService
        from mesh.broker import BrokerSettings
        from mesh.profile.emqx import EmqxProfile
        from tests.agents.service_agents import Echo
        async def main():
            settings = AgentSettings(task_store=":memory:", emqx=EmqxProfile(org={space.org!r}, unit="ai"))
            service = AgentService(Echo(), broker=BrokerSettings.from_url({broker_url!r}, keepalive_s=2),
                                   namespace={namespace!r}, settings=settings)
            await service.start()
            print("ready", flush=True)
            await asyncio.Event().wait()
        asyncio.run(main())
        """
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE, env={**os.environ, "PYTHONPATH": os.getcwd()}
    )
    assert proc.stdout is not None
    try:
        assert (await asyncio.wait_for(proc.stdout.readline(), 20)).strip() == b"ready"
        online = await card_updates(sdk_mqtt, space.discovery("echo"), until="online")
        assert online[-1][1] == {"a2a-status": "online", "a2a-status-source": "agent"}
        retained = asyncio.Event()
        watching = asyncio.create_task(card_updates(sdk_mqtt, space.discovery("echo"), "offline", retained))
        await asyncio.wait_for(retained.wait(), 10)  # the watcher has the retained online card
        proc.send_signal(signal.SIGKILL)
        seen = await watching
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    card, props = seen[-1]
    assert props == {"a2a-status": "offline", "a2a-status-source": "lwt"}
    assert card["name"] == "echo" and card["supportedInterfaces"]


async def test_a_clean_stop_republishes_the_card_offline(
    broker_settings: BrokerSettings, sdk_mqtt: MqttConfig, space: TopicSpace, namespace: str
) -> None:
    service = AgentService(
        Echo(),
        broker=broker_settings,
        namespace=namespace,
        settings=AgentSettings(task_store=":memory:", emqx=EmqxProfile(org=space.org, unit="ai")),
    )
    await service.start()
    await service.stop()
    seen = await card_updates(sdk_mqtt, space.discovery("echo"), until="offline")
    assert seen[-1][1] == {"a2a-status": "offline", "a2a-status-source": "agent"}


async def test_a_pool_of_two_replicas_answers_with_the_responder_id(
    broker_settings: BrokerSettings, sdk_mqtt: MqttConfig, space: TopicSpace, namespace: str
) -> None:
    services = []
    settings = AgentSettings(shared_subscription=True, emqx=EmqxProfile(org=space.org, unit="ai", pool="echoes"))
    for _ in range(2):
        service = AgentService(Echo(), broker=broker_settings, namespace=namespace, settings=settings)
        await service.start()
        services.append(service)
    try:
        members = {s.profile.agent_id for s in services if s.profile is not None}
        assert len(members) == 2
        # Mosquitto 2.0 does not share $ topics, so the members split the pool by Task.id over the
        # replicas they know. The first knows the second once its instance card arrives: until then
        # it serves the whole pool, so the split is asserted once each has seen the other.
        async with asyncio.timeout(10):
            while any(s.siblings is None or not s.siblings.others() for s in services):
                await asyncio.sleep(0.01)
        # Which member serves a task depends on its random id: six requests all went to one member
        # once in 32 runs. Until both have answered (64 all to one: once in 2**63).
        responders: set[str] = set()
        for i in range(64):
            reply = await one_reply(
                sdk_mqtt,
                space,
                "pool/echoes",
                v1_request("SendMessage", {"message": message(f"n{i}", str(uuid.uuid4()))}),
            )
            assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            responders.add(reply["_responder"])
            if responders == members:
                break
        assert responders == members  # both members served, each named itself
        # The SDK's requester reaches the pool too.
        requester = Requester(sdk_mqtt, space, requester_id="pool-user", first_reply_timeout=5)
        replies = await collect(
            requester, "pool/echoes", v1_request("SendMessage", {"message": message("hi", str(uuid.uuid4()))})
        )
        assert replies == [("terminal", "hi")]
        # A member's follow-ups go to its own topic: GetTask there finds the task it owns.
        task_id = str(uuid.uuid4())
        first = await one_reply(
            sdk_mqtt, space, "pool/echoes", v1_request("SendMessage", {"message": message("x", task_id)})
        )
        got = await one_reply(sdk_mqtt, space, first["_responder"], v1_request("GetTask", {"id": task_id}))
        assert got["result"]["task"]["id"] == task_id
    finally:
        for service in services:
            await service.stop()


async def test_bearer_tokens_under_trust(
    broker_settings: BrokerSettings, sdk_mqtt: MqttConfig, space: TopicSpace, namespace: str, tmp_path: Path
) -> None:
    generate_keys(tmp_path, ["whoami", "http"])
    service = AgentService(
        Whoami(),
        broker=broker_settings,
        namespace=namespace,
        settings=AgentSettings(
            task_store=":memory:", require_user_token=True, emqx=EmqxProfile(org=space.org, unit="ai")
        ),
        trust=trust_of(tmp_path, "whoami", token_issuers=["http"]),
    )
    await service.start()
    try:
        token = minter(tmp_path, "http", namespace).mint("alice")
        payload = v1_request("SendMessage", {"message": message("who", str(uuid.uuid4()))})
        reply = await one_reply(sdk_mqtt, space, "whoami", payload, **{"a2a-authorization": f"Bearer {token}"})
        status = reply["result"]["task"]["status"]
        answer = json.loads(status["message"]["parts"][0]["text"])
        assert answer["user"] == "alice" and answer["verified"] is True and answer["issuer"] == "http"
        refused = await one_reply(
            sdk_mqtt, space, "whoami", v1_request("SendMessage", {"message": message("who", str(uuid.uuid4()))})
        )
        assert refused["error"]["code"] == -32020
        forged = await one_reply(
            sdk_mqtt,
            space,
            "whoami",
            v1_request("SendMessage", {"message": message("who", str(uuid.uuid4()))}),
            **{"a2a-authorization": "Bearer not.a.token"},
        )
        assert forged["error"]["code"] == -32020
    finally:
        await service.stop()
