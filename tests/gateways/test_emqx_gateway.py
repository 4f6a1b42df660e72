"""The HTTP gateway reaches EMQX "A2A over MQTT" profile agents: ``POST /a2a/emqx/{org}/{unit}/{agent}``.

The gateway calls them through the profile (mesh agents serving it, addressed by their profile
name) and answers in its own JSON-RPC, 0.3 and 1.0, on the real broker.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from agents import AgentSettings
from agents.service import AgentService
from mesh.broker import BrokerSettings
from mesh.profile.emqx import EmqxProfile
from tests.agents.service_agents import Asker, Echo
from tests.gateways.conftest import StartGateway
from tests.gateways.jsonrpc_http import call, message, message_v1

pytestmark = pytest.mark.asyncio


async def test_the_gateway_calls_a_profile_agent(
    start_gateway: StartGateway, http: httpx.AsyncClient, broker_settings: BrokerSettings, namespace: str
) -> None:
    org = f"t{uuid.uuid4().hex[:10]}"
    services = [
        AgentService(
            agent,
            broker=broker_settings,
            namespace=namespace,
            settings=AgentSettings(task_store=":memory:", emqx=EmqxProfile(org=org, unit="ai")),
        )
        for agent in (Echo(), Asker())
    ]
    for service in services:
        await service.start()
    try:
        gateway = await start_gateway(wait_for=(f"{org}/ai/echo", f"{org}/ai/asker"))
        url = f"{gateway.public_url}/a2a/emqx/{org}/ai"
        sent = await call(http, f"{url}/echo", "message/send", {"message": message("through the gateway")})
        task = sent.json()["result"]
        assert task["kind"] == "task" and task["status"]["state"] == "completed"
        assert task["status"]["message"]["parts"][0]["text"] == "through the gateway"
        # A2A 1.0 at the edge, multi-turn with the task id the gateway's caller got back.
        v1 = {"A2A-Version": "1.0"}
        first = await call(http, f"{url}/asker", "SendMessage", {"message": message_v1("hi")}, headers=v1)
        asked = first.json()["result"]["task"]
        assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        answer = message_v1("Ada", taskId=asked["id"], contextId=asked["contextId"])
        second = await call(http, f"{url}/asker", "SendMessage", {"message": answer}, headers=v1)
        assert second.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        missing = await call(http, f"{url}/nobody", "message/send", {"message": message("x")})
        assert missing.json()["error"]["code"] == -32000  # agent not found, as for any name
    finally:
        for service in services:
            await service.stop()
