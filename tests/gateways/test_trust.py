"""End to end: the HTTP gateway mints a user token per request; the agent verifies it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from agents import AgentSettings
from agents.service import AgentService
from gateways.http.server import HttpGateway
from gateways.http.settings import HttpGatewaySettings
from mesh.broker import BrokerSettings
from mesh.trust import generate_keys
from mesh.trust.config import TrustSettings, resolve
from tests.agents.test_trust import Whoami
from tests.gateways.jsonrpc_http import call, message, result_of

SECRET = "s3cret-key-for-ada-0123456789"


async def test_the_agent_sees_the_user_the_gateway_authenticated_as_verified(
    broker_settings: BrokerSettings, namespace: str, tmp_path: Path, http: httpx.AsyncClient
) -> None:
    generate_keys(tmp_path, ["whoami", "http"])
    settings = TrustSettings(keys=tmp_path, token_issuers=("http",))
    agent = AgentService(
        Whoami(),
        broker=broker_settings,
        namespace=namespace,
        settings=AgentSettings(require_user_token=True),
        trust=resolve(settings, "whoami", tmp_path),
    )
    gateway = HttpGateway(
        HttpGatewaySettings.model_validate(
            {
                "port": 0,
                "default_agent": "whoami",
                "auth": {"mode": "api_key", "keys": [{"name": "ada", "secret": SECRET}]},
            }
        ),
        broker=broker_settings,
        namespace=namespace,
        trust=resolve(settings, "http", tmp_path),
    )
    await agent.start()
    await gateway.start()
    try:
        await gateway.runtime.registry.wait_for("whoami", 5)  # the agent's card is signed: accepted
        registry = await agent.discovery.get()  # the agent's discovery, as its first delegation starts it
        gateway_seen = await registry.wait_for("http", 5, kind="gateway")  # and the gateway's
        assert gateway_seen.card.signatures
        response = await call(
            http, f"{gateway.public_url}/a2a", "message/send", {"message": message()}, headers={"X-API-Key": SECRET}
        )
        answer = json.loads(result_of(response)["status"]["message"]["parts"][0]["text"])
        assert answer == {"user": "ada", "verified": True, "issuer": "http", "why": None}
    finally:
        await gateway.stop()
        await agent.stop()


async def test_an_anonymous_caller_is_never_vouched_for(
    broker_settings: BrokerSettings, namespace: str, tmp_path: Path, http: httpx.AsyncClient
) -> None:
    """Issue 23: a gateway without authentication gave any local caller a verified "anonymous" token."""
    generate_keys(tmp_path, ["whoami", "http"])
    settings = TrustSettings(keys=tmp_path, token_issuers=("http",))
    agent = AgentService(
        Whoami(), broker=broker_settings, namespace=namespace, trust=resolve(settings, "whoami", tmp_path)
    )
    gateway = HttpGateway(
        HttpGatewaySettings.model_validate({"port": 0, "default_agent": "whoami"}),  # no auth: anonymous callers
        broker=broker_settings,
        namespace=namespace,
        trust=resolve(settings, "http", tmp_path),
    )
    await agent.start()
    await gateway.start()
    try:
        await gateway.runtime.registry.wait_for("whoami", 5)
        response = await call(http, f"{gateway.public_url}/a2a", "message/send", {"message": message()})
        answer = json.loads(result_of(response)["status"]["message"]["parts"][0]["text"])
        assert answer["user"] == "anonymous" and answer["verified"] is False, answer
        assert "no authToken" in answer["why"], answer
    finally:
        await gateway.stop()
        await agent.stop()
