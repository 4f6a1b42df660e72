"""The EMQX profile's error names against A2A's own codes, on the real broker (issue 38, item 5-7: 6).

The profile's -32003 ``request_expired`` and -32004 ``responder_unavailable`` are retryable; A2A's
own -32003 (push notifications not supported) and -32004 (unsupported operation) are permanent.
A mesh agent names only the profile's conditions in ``data.a2a_error``, so a requester sends a
permanent error's request once, not three times.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from a2a_over_mqtt import MqttConfig, TopicSpace

from agents import AgentSettings
from agents.service import AgentService
from mesh.a2a import RpcError, Task, TaskIdParams, TaskState
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.profile.emqx import EmqxProfile, profile_error
from mesh.transport import InboundMessage, MqttTransport
from tests.agents.profile_tests.test_responder import one_reply, v1_request
from tests.agents.service_agents import Echo


@pytest.fixture
def org() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def echo(broker_settings: BrokerSettings, namespace: str, org: str) -> AsyncIterator[AgentService]:
    service = AgentService(
        Echo(),
        broker=broker_settings,
        namespace=namespace,
        settings=AgentSettings(task_store=":memory:", push_notifications=False, emqx=EmqxProfile(org=org, unit="ai")),
    )
    await service.start()
    yield service
    await service.stop()


@pytest.mark.asyncio
async def test_permanent_a2a_errors_are_sent_once_and_carry_no_profile_name(
    echo: AgentService, broker_settings: BrokerSettings, namespace: str, org: str
) -> None:
    requests: list[bytes] = []
    watcher = MqttTransport(broker_settings)
    await watcher.connect()

    def seen(message: InboundMessage) -> None:
        requests.append(message.payload)

    await watcher.subscribe(f"$a2a/v1/request/{org}/ai/echo", seen)
    try:
        async with MeshClient.connect(broker_settings, namespace) as client:
            done = await client.send(f"{org}/ai/echo", "finished")
            assert isinstance(done, Task) and done.status.state is TaskState.completed
            requests.clear()
            # SubscribeToTask of a completed task: A2A's UnsupportedOperation (-32004), permanent.
            params = TaskIdParams(id=done.id)
            with pytest.raises(RpcError) as refused:
                _ = [item async for item in client.profile.items(f"{org}/ai/echo", "tasks/resubscribe", params)]
            # Every request publishes before it waits for its reply: one GetTask after it is in order.
            got = await client.get_task(f"{org}/ai/echo", done.id)
            assert got.status.state is TaskState.completed
            subscribes = [p for p in requests if b'"SubscribeToTask"' in p]
            assert len(subscribes) == 1, f"SubscribeToTask was sent {len(subscribes)} times"
            assert refused.value.code == -32004
            data = refused.value.error.data
            assert not (isinstance(data, dict) and "a2a_error" in data), data
            # MeshClient.resubscribe reaches profile agents too, with the same answer.
            with pytest.raises(RpcError) as again:
                _ = [item async for item in client.resubscribe(f"{org}/ai/echo", done.id, idle_timeout=10)]
            assert again.value.code == -32004
    finally:
        await watcher.close()


@pytest.mark.asyncio
async def test_push_not_supported_is_not_request_expired(
    echo: AgentService, broker_settings: BrokerSettings, org: str
) -> None:
    """A2A's -32003 (an agent without push notifications) is no ``request_expired``."""
    mqtt, space = MqttConfig(host=broker_settings.host, port=broker_settings.port), TopicSpace(org=org, unit="ai")
    config = {"taskId": "t-1", "id": "p-1", "url": "https://example.invalid/hook"}
    reply = await one_reply(mqtt, space, "echo", v1_request("CreateTaskPushNotificationConfig", config))
    error = reply["error"]
    assert error["code"] == -32003, error
    assert "a2a_error" not in (error.get("data") or {}), error


def test_only_the_profiles_conditions_are_named() -> None:
    # A2A's own codes: no name, whatever their data claims.
    assert "data" not in profile_error(-32004, "unsupported")
    assert profile_error(-32003, "no push", {"a2a_error": "request_expired", "x": 1})["data"] == {"x": 1}
    assert "a2a_error" not in profile_error(-32005, "content type").get("data", {})
    # A name that does not belong to its code is dropped.
    assert "data" not in profile_error(-32001, "not found", {"a2a_error": "request_expired"})
    # The profile's conditions: busy and gone, a busy past its expiry, the profile layer's own -32005.
    assert profile_error(-32050, "busy")["data"]["a2a_error"] == "responder_unavailable"
    assert profile_error(-32010, "gone")["data"]["a2a_error"] == "responder_unavailable"
    expired = profile_error(-32050, "busy", {"expired": True})
    assert expired["code"] == -32003 and expired["data"]["a2a_error"] == "request_expired"
    own = profile_error(-32005, "no task id", {"a2a_error": "transport_protocol_error"})
    assert own["data"]["a2a_error"] == "transport_protocol_error"
