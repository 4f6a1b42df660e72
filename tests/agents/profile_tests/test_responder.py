"""Mesh agents as responders of the EMQX "A2A over MQTT" profile, against the official SDK's Requester.

Each test takes an org of its own (the profile's topics are ``$a2a/v1/...``, outside the mesh's
namespaces) and runs on the real broker. The SDK (``a2a-over-mqtt``) is the requester the
issue names: its ``Requester.stream`` publishes with Response Topic and Correlation Data, keeps
the Task.id across retries and yields ``(kind, text)`` per reply.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiomqtt
import pytest
from a2a_over_mqtt import A2ARequest, MqttConfig, Requester, TopicSpace, make_properties

from agents import AgentSettings
from agents.service import AgentService
from mesh.broker import BrokerSettings
from mesh.profile.emqx import PROFILE_BINDING, EmqxProfile
from tests.agents.service_agents import Asker, Blocker, Echo, Streamer, Whoami

pytestmark = pytest.mark.asyncio

ServeProfile = Callable[..., Any]


@pytest.fixture
def org() -> str:
    return f"t{uuid.uuid4().hex[:10]}"


@pytest.fixture
def space(org: str) -> TopicSpace:
    return TopicSpace(org=org, unit="ai")


@pytest.fixture
def sdk_mqtt(broker_settings: BrokerSettings) -> MqttConfig:
    return MqttConfig(host=broker_settings.host, port=broker_settings.port)


@pytest.fixture
def requester(sdk_mqtt: MqttConfig, space: TopicSpace) -> Requester:
    return Requester(sdk_mqtt, space, requester_id="tester", first_reply_timeout=5.0, stream_idle_timeout=5.0)


@pytest.fixture
async def serve_profile(broker_settings: BrokerSettings, namespace: str, org: str) -> AsyncIterator[Callable[..., Any]]:
    started: list[AgentService] = []

    async def start(agent: Any, **settings: Any) -> AgentService:
        emqx = EmqxProfile(org=org, unit="ai", **settings.pop("emqx", {}))
        service = AgentService(
            agent,
            broker=broker_settings,
            namespace=namespace,
            settings=AgentSettings(emqx=emqx, task_store=":memory:", **settings),
        )
        await service.start()
        started.append(service)
        return service

    yield start
    for service in started:
        await service.stop()


async def collect(
    requester: Requester, agent: str, payload: str, correlation: str | None = None
) -> list[tuple[str, str]]:
    return [item async for item in requester.stream(agent, payload, correlation or uuid.uuid4().hex)]


def v1_request(method: str, params: dict[str, Any], request_id: str | None = None) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": request_id or uuid.uuid4().hex, "method": method, "params": params})


def message(text: str, task_id: str, *, message_id: str | None = None, context_id: str | None = None) -> dict[str, Any]:
    msg = {
        "messageId": message_id or uuid.uuid4().hex,
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        "taskId": task_id,
    }
    if context_id:
        msg["contextId"] = context_id
    return msg


async def test_send_message_answers_the_task(serve_profile: ServeProfile, requester: Requester) -> None:
    await serve_profile(Echo())
    request = A2ARequest(text="hello profile", request_id="r-1")
    replies = await collect(requester, "echo", request.to_json())
    assert replies == [("terminal", "hello profile")]


async def test_streaming_message_yields_stream_responses(
    serve_profile: ServeProfile, requester: Requester, space: TopicSpace, sdk_mqtt: MqttConfig
) -> None:
    await serve_profile(Streamer())
    task_id = str(uuid.uuid4())
    payload = v1_request("SendStreamingMessage", {"message": message("go", task_id)})
    # Read the raw items too: each is a StreamResponse with the Correlation Data echoed.
    reply_topic = space.reply("raw", uuid.uuid4().hex[:8])
    async with aiomqtt.Client(**sdk_mqtt.client_kwargs(identifier=f"{space.org}/ai/raw")) as client:
        await client.subscribe(reply_topic, qos=1)
        from a2a_over_mqtt import make_properties

        await client.publish(
            space.request("streamer"), payload, qos=1, properties=make_properties(reply_topic, "corr-7")
        )
        items: list[dict[str, Any]] = []
        async with asyncio.timeout(10):
            async for msg in client.messages:
                assert msg.properties is not None and msg.properties.CorrelationData == b"corr-7"
                body = json.loads(msg.payload)
                items.append(body["result"])
                last = body["result"]
                state = (last.get("statusUpdate") or last.get("task") or {}).get("status", {}).get("state")
                if state == "TASK_STATE_COMPLETED":
                    break
    assert "task" in items[0] and items[0]["task"]["id"] == task_id
    assert all("kind" not in json.dumps(item) for item in items)
    kinds = [next(iter(item)) for item in items]
    assert "artifactUpdate" in kinds and kinds[-1] == "statusUpdate"
    # The SDK's requester reads the same stream to its end.
    replies = await collect(
        requester, "streamer", v1_request("SendStreamingMessage", {"message": message("go", str(uuid.uuid4()))})
    )
    assert replies[-1][0] == "terminal"
    assert ("text", "step 0") in replies and any(kind == "artifact" for kind, _ in replies)


async def test_multi_turn_input_required_then_the_same_task_id(
    serve_profile: ServeProfile, requester: Requester
) -> None:
    await serve_profile(Asker())
    task_id, context = str(uuid.uuid4()), str(uuid.uuid4())
    first = await collect(
        requester, "asker", v1_request("SendMessage", {"message": message("hi", task_id, context_id=context)})
    )
    assert first == [("input_required", "What is your name?")]
    second = await collect(
        requester, "asker", v1_request("SendMessage", {"message": message("Ada", task_id, context_id=context)})
    )
    assert second == [("terminal", "Hello, Ada!")]


async def test_cancel_and_get_task(
    serve_profile: ServeProfile, requester: Requester, sdk_mqtt: MqttConfig, space: TopicSpace
) -> None:
    agent = Blocker()
    await serve_profile(agent)
    task_id = str(uuid.uuid4())
    payload = v1_request(
        "SendMessage", {"message": message("block", task_id), "configuration": {"returnImmediately": True}}
    )
    stream = requester.stream("blocker", payload, "c-1")
    first = await anext(stream)
    await stream.aclose()
    assert first[0] in ("submitted", "text")
    await asyncio.wait_for(agent.started.wait(), 5)
    got = await one_reply(sdk_mqtt, space, "blocker", v1_request("GetTask", {"id": task_id}))
    assert got["result"]["task"]["id"] == task_id and got["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    canceled = await collect(requester, "blocker", v1_request("CancelTask", {"id": task_id}))
    assert canceled[0][0] == "failed", canceled  # CANCELED: a terminal state other than completed
    got = await one_reply(sdk_mqtt, space, "blocker", v1_request("GetTask", {"id": task_id}))
    assert got["result"]["task"]["status"]["state"] == "TASK_STATE_CANCELED"
    missing = await one_reply(sdk_mqtt, space, "blocker", v1_request("GetTask", {"id": "no-such-task"}))
    assert missing["error"]["code"] == -32001


async def one_reply(mqtt: MqttConfig, space: TopicSpace, agent: str, payload: str, **props: str) -> dict[str, Any]:
    """Publish one request as the profile says and return its first reply (raw JSON)."""
    from paho.mqtt.packettypes import PacketTypes
    from paho.mqtt.properties import Properties

    session = uuid.uuid4().hex[:8]
    reply_topic = space.reply("raw", session)
    async with aiomqtt.Client(**mqtt.client_kwargs(identifier=f"{space.org}/{space.unit}/raw-{session}")) as client:
        await client.subscribe(reply_topic, qos=1)
        properties = Properties(PacketTypes.PUBLISH)
        properties.ResponseTopic = reply_topic
        properties.CorrelationData = session.encode()
        if props:
            properties.UserProperty = list(props.items())
        await client.publish(space.request(agent), payload, qos=1, properties=properties)
        async with asyncio.timeout(10):
            async for msg in client.messages:
                assert msg.properties is not None and msg.properties.CorrelationData == session.encode()
                reply: dict[str, Any] = json.loads(msg.payload)
                reply["_responder"] = dict(getattr(msg.properties, "UserProperty", [])).get("a2a-responder-agent-id")
                return reply
    raise AssertionError("no reply")


async def test_duplicate_task_id_is_answered_once(serve_profile: ServeProfile, requester: Requester) -> None:
    runs: list[str] = []

    class Counting(Echo):
        name = "counting"

        async def handle(self, message: Any, ctx: Any) -> str:
            runs.append(ctx.task_id)
            return "ran"

    await serve_profile(Counting())
    payload = v1_request("SendMessage", {"message": message("once", str(uuid.uuid4()), message_id="m-1")})
    first = await collect(requester, "counting", payload, "c-a")
    again = await collect(requester, "counting", payload, "c-b")  # a retry: new Correlation Data, same Task.id
    assert first == again == [("terminal", "ran")]
    assert len(runs) == 1


async def test_missing_task_id_is_a_transport_protocol_error(
    serve_profile: ServeProfile, sdk_mqtt: MqttConfig, space: TopicSpace
) -> None:
    await serve_profile(Echo())
    msg = message("x", "t")
    del msg["taskId"]
    reply = await one_reply(sdk_mqtt, space, "echo", v1_request("SendMessage", {"message": msg}))
    assert reply["error"]["code"] == -32005
    assert reply["error"]["data"]["a2a_error"] == "transport_protocol_error"


async def test_card_is_retained_with_presence(
    serve_profile: ServeProfile, sdk_mqtt: MqttConfig, space: TopicSpace
) -> None:
    await serve_profile(Echo())
    async with aiomqtt.Client(**sdk_mqtt.client_kwargs()) as client:
        await client.subscribe(space.discovery("echo"), qos=1)
        async with asyncio.timeout(5):
            msg = await anext(aiter(client.messages))
    card = json.loads(msg.payload)
    assert msg.retain
    assert card["name"] == "echo" and "url" not in card
    assert card["supportedInterfaces"][0]["protocolBinding"] == PROFILE_BINDING
    assert msg.properties is not None
    assert ("a2a-status", "online") in msg.properties.UserProperty


async def test_bad_reply_topic_is_dropped(
    serve_profile: ServeProfile, sdk_mqtt: MqttConfig, space: TopicSpace, namespace: str
) -> None:
    service = await serve_profile(Echo())
    payload = v1_request("SendMessage", {"message": message("x", str(uuid.uuid4()))})
    async with aiomqtt.Client(**sdk_mqtt.client_kwargs()) as client:
        from a2a_over_mqtt import make_properties

        await client.publish(
            space.request("echo"),
            payload,
            qos=1,
            properties=make_properties(f"{namespace}/a2a/v1/agent/request/echo", "c"),
        )
    # Requests are handled in order: once a later one is answered, the bad one was seen.
    good = await one_reply(
        sdk_mqtt, space, "echo", v1_request("SendMessage", {"message": message("y", str(uuid.uuid4()))})
    )
    assert good["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert service.profile is not None and service.profile.dropped == 1


async def test_bearer_token_reaches_the_handler(
    serve_profile: ServeProfile, sdk_mqtt: MqttConfig, space: TopicSpace
) -> None:
    await serve_profile(Whoami())
    payload = v1_request("SendMessage", {"message": message("who", str(uuid.uuid4()))})
    reply = await one_reply(sdk_mqtt, space, "whoami", payload, **{"a2a-authorization": "Bearer not-a-jwt"})
    assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_request_held_past_its_message_expiry_is_answered_request_expired(
    serve_profile: ServeProfile,
    requester: Requester,
    sdk_mqtt: MqttConfig,
    space: TopicSpace,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The profile: "Request expired before processing" is -32003 ``request_expired``. The
    agent runs one task at a time; a second request waits (held, unacknowledged) for a place,
    and its MQTT Message Expiry, which the profile lets requesters set, passes meanwhile."""
    from a2a_over_mqtt import requester as sdk_requester

    def with_expiry(response_topic: str | None = None, correlation_data: str | None = None) -> Any:
        properties = make_properties(response_topic, correlation_data)
        properties.MessageExpiryInterval = 1
        return properties

    agent = Blocker()
    await serve_profile(agent, max_concurrent_tasks=1)
    first = asyncio.create_task(collect(requester, "blocker", A2ARequest(text="first", request_id="r-first").to_json()))
    await asyncio.wait_for(agent.started.wait(), 10)
    monkeypatch.setattr(sdk_requester, "make_properties", with_expiry)  # the SDK's requester, with an expiry
    async with aiomqtt.Client(**sdk_mqtt.client_kwargs(identifier=f"{space.org}/ai/watcher")) as watcher:
        await watcher.subscribe(space.reply("tester", "+"), qos=1)
        expired = await asyncio.wait_for(
            collect(requester, "blocker", A2ARequest(text="second", request_id="r-second").to_json()), 10
        )
        assert [kind for kind, _ in expired] == ["error"]
        assert "expired before processing" in expired[0][1]
        async with asyncio.timeout(10):
            async for msg in watcher.messages:
                reply = json.loads(msg.payload)
                if "error" in reply:
                    break
    assert reply["error"]["code"] == -32003
    assert reply["error"]["data"]["a2a_error"] == "request_expired"
    assert not first.done()  # the running task was left alone; the expired one never ran
    first.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await first
