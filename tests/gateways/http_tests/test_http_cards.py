"""The cards the HTTP gateway serves: the A2A versions configured, a strictly valid 1.0 card when
only 1.0 is served, and HTTP caching (Cache-Control, ETag / If-None-Match -> 304, Last-Modified).

Strict 1.0 validity: the A2A 1.0 JSON schema file is not available offline, so the card is
validated against a2a-sdk's 1.0 ``AgentCard`` (its protobuf, generated from the same
specification): ProtoJSON parsing that refuses any unknown member, plus every member the proto
marks REQUIRED (``google.api.field_behavior``), recursively.
"""

from __future__ import annotations

import uuid
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.types import AgentCard, Message, Part, Role, SendMessageRequest, TaskState
from google.api import field_behavior_pb2
from google.protobuf import json_format
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from gateways.http.a2a_v1 import served_card
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent
from tests.gateways.conftest import StartGateway
from tests.gateways.http_tests.test_a2a_v1 import card_0_3
from tests.gateways.jsonrpc_http import V1, call, error_of, message, message_v1, result_of

AUTH = {"mode": "bearer", "tokens": [{"name": "ada", "secret": "card-token-1"}]}
TOKEN = {"Authorization": "Bearer card-token-1"}


def missing_required(data: Any, descriptor: Descriptor, path: str = "card") -> list[str]:
    """The members the proto marks REQUIRED that ``data`` (ProtoJSON) lacks, recursively."""
    missing = []
    for field in descriptor.fields:
        behaviors = field.GetOptions().Extensions[field_behavior_pb2.field_behavior]
        value = data.get(field.json_name)
        if field_behavior_pb2.REQUIRED in behaviors and value in (None, "", []):
            missing.append(f"{path}.{field.json_name}")
        if value is None or field.type != FieldDescriptor.TYPE_MESSAGE or field.message_type.GetOptions().map_entry:
            continue
        items = value if isinstance(value, list) else [value]
        for i, item in enumerate(items):
            if isinstance(item, dict):
                missing += missing_required(item, field.message_type, f"{path}.{field.json_name}[{i}]")
    return missing


def assert_strict_v1_card(card: dict[str, Any]) -> AgentCard:
    parsed = json_format.ParseDict(card, AgentCard())  # unknown members raise ParseError
    assert missing_required(card, AgentCard.DESCRIPTOR) == []
    return parsed


async def test_a_1_0_only_gateway_serves_a_strict_1_0_card_and_refuses_0_3(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo", a2a_versions=["1.0"], auth=AUTH)
    for path in ("/a2a/agents/echo/card", "/.well-known/agent-card.json"):
        card = (await http.get(gateway.public_url + path)).json()
        parsed = assert_strict_v1_card(card)
        interfaces = [(i.protocol_binding, i.protocol_version) for i in parsed.supported_interfaces]
        assert interfaces == [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0")]
        assert not {"url", "preferredTransport", "protocolVersion", "additionalInterfaces", "security"} & set(card)
        assert "stateTransitionHistory" not in card["capabilities"]
        assert parsed.security_schemes["gateway"].http_auth_security_scheme.scheme == "bearer"

    url = f"{gateway.public_url}/a2a"
    refused = error_of(await call(http, url, "message/send", {"message": message()}, headers=TOKEN))
    assert refused["code"] == -32009 and refused["data"]["detail"].startswith("this gateway serves A2A 1.0, not 0.3")
    result_of(await call(http, url, "SendMessage", {"message": message_v1()}, headers={**V1, **TOKEN}))

    sdk_card = parse_agent_card((await http.get(f"{gateway.public_url}/a2a/agents/echo/card")).json())
    async with httpx.AsyncClient(headers=TOKEN) as authed:
        config = ClientConfig(streaming=False, httpx_client=authed)
        async with await create_client(sdk_card, client_config=config) as client:
            request = SendMessageRequest(
                message=Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text="strict")])
            )
            [response] = [event async for event in client.send_message(request)]
    assert response.task.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_0_3_only_gateway_serves_a_0_3_card_and_refuses_1_0(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo", a2a_versions=["0.3"])
    card = (await http.get(f"{gateway.public_url}/a2a/agents/echo/card")).json()
    assert card["protocolVersion"] == "0.3.0" and card["url"].endswith("/a2a/agents/echo")
    assert "supportedInterfaces" not in card
    url = f"{gateway.public_url}/a2a"
    refused = error_of(await call(http, url, "SendMessage", {"message": message_v1()}, headers=V1))
    assert refused["code"] == -32009
    assert result_of(await call(http, url, "message/send", {"message": message()}))["status"]["state"] == "completed"


async def test_both_versions_by_default_a_card_for_each(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    """No dual card any more (issue 38): a strict 1.0 card listing the 0.3 interface, and the 0.3
    card for a client asking for 0.3 (tests/gateways/http_tests/test_a2a_conformance_i38.py)."""
    await serve_agent(Echo())
    gateway = await start_gateway(wait_for=("echo",))
    card = (await http.get(f"{gateway.public_url}/a2a/agents/echo/card")).json()
    assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"1.0", "0.3"}
    assert "protocolVersion" not in card
    assert_strict_v1_card(card)
    card_0_3 = (await http.get(f"{gateway.public_url}/a2a/agents/echo/card", headers={"A2A-Version": "0.3"})).json()
    assert card_0_3["protocolVersion"] == "0.3.0" and "supportedInterfaces" not in card_0_3


async def test_cards_carry_cache_headers_and_answer_304_to_their_etag(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo", card_max_age_s=120)
    for path in ("/a2a/agents/echo/card", "/.well-known/agent-card.json"):
        first = await http.get(gateway.public_url + path)
        assert first.status_code == 200 and first.headers["cache-control"] == "public, max-age=120"
        etag = first.headers["etag"]
        assert etag.startswith('"') and etag.endswith('"')
        assert parsedate_to_datetime(first.headers["last-modified"]).tzinfo is not None
        again = await http.get(gateway.public_url + path, headers={"If-None-Match": etag})
        assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == etag
        assert again.headers["last-modified"] == first.headers["last-modified"]
        other = await http.get(gateway.public_url + path, headers={"If-None-Match": '"something-else"'})
        assert other.status_code == 200 and other.json() == first.json()
        weak = await http.get(gateway.public_url + path, headers={"If-None-Match": f'"x", W/{etag}'})
        assert weak.status_code == 304

    # another view of the same agent (another URL, other interfaces) is another representation
    echo_card = await http.get(f"{gateway.public_url}/a2a/agents/echo/card")
    default_card = await http.get(f"{gateway.public_url}/.well-known/agent-card.json")
    assert echo_card.headers["etag"] != default_card.headers["etag"]


def test_every_0_3_card_member_becomes_strict_1_0() -> None:
    """A card using every 0.3 member (security on skills, five scheme types, OAuth flows,
    extensions, provider, icon, stateTransitionHistory, signatures...) served as 1.0 only."""
    card = served_card(card_0_3(), url_v1="https://gw.example/a2a/agents/echo", url_v0_3=None)
    parsed = assert_strict_v1_card(card)
    assert parsed.skills[0].security_requirements[0].schemes["oauth"].list == ["a2a"]
    assert parsed.security_schemes["oauth"].oauth2_security_scheme.flows.HasField("authorization_code")
    assert parsed.capabilities.extensions[0].uri == "urn:ext:x"
