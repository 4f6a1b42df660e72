"""A2A conformance of the HTTP gateway (issue 38), each test failing before its fix:

1. a 0.3 streaming JSON-RPC method answers ``text/event-stream`` even for an error
   (``tasks/resubscribe`` of an unknown, finished or another caller's task), as the 0.3 TCK's
   ``test_tasks_resubscribe_nonexistent`` reads it; 1.0 ``SubscribeToTask`` answers an error known
   before its stream as a plain JSON-RPC error, as a2a-sdk 1.x's server does and the 1.0 TCK's
   STREAM-SUB-003 reads it (a stream holding the error counts there as a subscription that worked);
2. each A2A version's clients get that version's card, valid against its schema: a strict 1.0
   card (no 0.3 member) for 1.0 clients, the 0.3 card for 0.3 clients;
3. a JSON-RPC body of an unsupported content type is -32005 ContentTypeNotSupported (the 1.0
   TCK's JSONRPC-SSE-002), not -32600.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.card_resolver import parse_agent_card
from a2a.compat.v0_3 import types as types_v03
from a2a.types import Message, Part, Role, SendMessageRequest, SubscribeToTaskRequest, TaskState
from a2a.utils.errors import TaskNotFoundError

from gateways.http.grpc_binding import grpc_code
from gateways.http.rest_errors import status_of
from mesh.a2a import AgentCard as MeshAgentCard
from mesh.a2a import RpcError
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent
from tests.gateways.conftest import StartGateway
from tests.gateways.http_tests.test_http_cards import assert_strict_v1_card
from tests.gateways.jsonrpc_http import V1, message, message_v1, rpc, sse_events

#: The members of a 0.3 card a strict 1.0 reader refuses.
CARD_0_3_MEMBERS = {"url", "preferredTransport", "protocolVersion", "additionalInterfaces", "security"}

TOKENS = {"mode": "bearer", "tokens": [{"name": "ada", "secret": "i38-ada"}, {"name": "bob", "secret": "i38-bob"}]}
ADA = {"Authorization": "Bearer i38-ada"}
BOB = {"Authorization": "Bearer i38-bob"}


async def plain_error(http: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    """POST a streaming request; assert it answers a plain JSON-RPC error and return it."""
    response = await http.post(url, json=body, headers=headers)
    assert response.status_code == 200 and response.headers["content-type"].startswith("application/json"), response
    answer = response.json()
    assert answer["jsonrpc"] == "2.0" and answer["id"] == body["id"] and "result" not in answer, answer
    return answer["error"]


async def stream_error(http: httpx.AsyncClient, url: str, body: dict[str, Any], headers: dict[str, str]) -> Any:
    """POST a streaming request; assert it answers one SSE ``error`` event and return its error."""
    async with http.stream("POST", url, json=body, headers=headers) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream"), response.headers
        events = [event async for event in sse_events(response)]
    assert [name for name, _ in events] == ["error"], events
    answer = events[0][1]
    assert answer["jsonrpc"] == "2.0" and answer["id"] == body["id"] and "result" not in answer, answer
    return answer["error"]


# ---------------------------------------------------------------- 1. errors of a streaming method


async def test_a_subscription_to_an_unknown_task_answers_its_error_on_the_event_stream(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    url = f"{gateway.public_url}/a2a"
    unknown = f"no-such-task-{uuid.uuid4().hex}"

    error = await stream_error(http, url, rpc("tasks/resubscribe", {"id": unknown}, request_id="r03"), {})
    assert error["code"] == -32001 and error["message"] == "Task not found", error  # the 0.3 TCK reads "not found"
    error = await plain_error(http, url, rpc("SubscribeToTask", {"id": unknown}, request_id="r10"), V1)
    assert error["code"] == -32001 and error["data"][0]["reason"] == "TASK_NOT_FOUND", error

    # A finished task: its error (UnsupportedOperation) on the stream in 0.3, plain in 1.0.
    sent = await http.post(url, json=rpc("message/send", {"message": message("done")}))
    task_id = sent.json()["result"]["id"]
    error = await stream_error(http, url, rpc("tasks/resubscribe", {"id": task_id}), {})
    assert error["code"] == -32004, error
    error = await plain_error(http, url, rpc("SubscribeToTask", {"id": task_id}), V1)
    assert error["code"] == -32004, error

    # REST keeps its plain error with the HTTP status (the binding's way).
    rest = await http.post(f"{gateway.public_url}/a2a/rest/tasks/{unknown}:subscribe")
    assert rest.status_code == 404 and rest.headers["content-type"].startswith("application/json"), rest.text


async def test_another_callers_task_is_answered_as_an_unknown_one(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo", auth=TOKENS)
    url = f"{gateway.public_url}/a2a"
    sent = await http.post(url, json=rpc("SendMessage", {"message": message_v1("ada's")}), headers={**V1, **ADA})
    task_id = sent.json()["result"]["task"]["id"]
    theirs = await plain_error(http, url, rpc("SubscribeToTask", {"id": task_id}), {**V1, **BOB})
    unknown = await plain_error(http, url, rpc("SubscribeToTask", {"id": "never-was"}), {**V1, **BOB})
    assert theirs["code"] == unknown["code"] == -32001 and theirs["message"] == unknown["message"]
    theirs = await stream_error(http, url, rpc("tasks/resubscribe", {"id": task_id}), BOB)
    unknown = await stream_error(http, url, rpc("tasks/resubscribe", {"id": "never-was"}), BOB)
    assert theirs["code"] == unknown["code"] == -32001 and theirs["message"] == unknown["message"]


async def test_the_a2a_sdk_client_gets_task_not_found_from_a_subscription(
    serve_agent: ServeAgent, start_gateway: StartGateway
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(wait_for=("echo",))
    async with httpx.AsyncClient() as http:
        config = ClientConfig(streaming=True, httpx_client=http)
        url = f"{gateway.public_url}/a2a/agents/echo"
        async with await create_client(url, client_config=config, relative_card_path="card") as client:
            with pytest.raises(TaskNotFoundError):
                [event async for event in client.subscribe(SubscribeToTaskRequest(id="no-such-task"))]


# ---------------------------------------------------------------- 2. a card per A2A version


def assert_1_0_card(card: dict[str, Any], url: str) -> None:
    """A strict A2A 1.0 card (no 0.3 member) listing every interface, the 0.3 one included."""
    assert not CARD_0_3_MEMBERS & set(card), card
    assert "stateTransitionHistory" not in card["capabilities"], card
    parsed = assert_strict_v1_card(card)  # unknown members refused, every REQUIRED one there
    interfaces = [(i.protocol_binding, i.protocol_version, i.url) for i in parsed.supported_interfaces]
    assert interfaces[0] == ("JSONRPC", "1.0", url) and ("JSONRPC", "0.3", url) in interfaces, interfaces
    assert {(b, v) for b, v, _ in interfaces} == {
        ("JSONRPC", "1.0"),
        ("HTTP+JSON", "1.0"),
        ("GRPC", "1.0"),
        ("JSONRPC", "0.3"),
    }


def assert_0_3_card(card: dict[str, Any], url: str) -> None:
    """The A2A 0.3 card, as a2a-sdk's 0.3 types and the mesh's read it."""
    assert "supportedInterfaces" not in card, card
    sdk = types_v03.AgentCard.model_validate(card)
    assert (sdk.url, sdk.protocol_version, sdk.preferred_transport) == (url, "0.3.0", "JSONRPC"), sdk
    assert MeshAgentCard.model_validate(card).url == url


async def test_each_a2a_version_gets_its_own_card(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo", grpc_port=0)
    base = gateway.public_url
    for path, url in (
        ("/a2a/agents/echo/card", f"{base}/a2a/agents/echo"),
        ("/.well-known/agent-card.json", f"{base}/a2a"),
    ):
        # 1.0: named by the header or the query parameter, or no version named (the gateway's first)
        for params, headers in (({}, V1), ({"A2A-Version": "1.0"}, {}), ({}, {})):
            response = await http.get(base + path, params=params, headers=headers)
            assert response.status_code == 200 and response.headers["vary"] == "A2A-Version", response.headers
            assert_1_0_card(response.json(), url)
        for params, headers in (({}, {"A2A-Version": "0.3"}), ({"A2A-Version": "0.3"}, {})):
            assert_0_3_card((await http.get(base + path, params=params, headers=headers)).json(), url)
        one, other = [await http.get(base + path, headers=h) for h in (V1, {"A2A-Version": "0.3"})]
        assert one.headers["etag"] != other.headers["etag"]  # two representations, two ETags
    # A2A 0.2's well-known path: 0.3 clients' card
    assert_0_3_card((await http.get(f"{base}/.well-known/agent.json")).json(), f"{base}/a2a")


async def test_a_0_3_first_gateway_gives_a_client_naming_no_version_the_0_3_card(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo", grpc_port=0, a2a_versions=["0.3", "1.0"])
    url = f"{gateway.public_url}/a2a/agents/echo"
    assert_0_3_card((await http.get(f"{url}/card")).json(), url)
    assert_1_0_card((await http.get(f"{url}/card", headers=V1)).json(), url)


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_the_a2a_sdk_client_sends_with_each_versions_card(
    serve_agent: ServeAgent, start_gateway: StartGateway, version: str
) -> None:
    """a2a-sdk 1.3 reads the card it fetched (its ``A2A-Version: 1.0``: the 1.0 card) or the 0.3 one
    (parse_agent_card's compat reading: its 0.3 JSON-RPC transport) and sends through it."""
    await serve_agent(Echo())
    gateway = await start_gateway(wait_for=("echo",))
    url = f"{gateway.public_url}/a2a/agents/echo"
    message_pb = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=f"hi in {version}")])
    async with httpx.AsyncClient() as http:
        config = ClientConfig(streaming=False, httpx_client=http)
        if version == "1.0":
            client = await create_client(url, client_config=config, relative_card_path="card")
        else:
            card = (await http.get(f"{url}/card", headers={"A2A-Version": "0.3"})).json()
            client = await create_client(parse_agent_card(card), client_config=config)
        async with client:
            [response] = [event async for event in client.send_message(SendMessageRequest(message=message_pb))]
    assert response.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert response.task.status.message.parts[0].text == f"hi in {version}"


# ---------------------------------------------------------------- 3. error codes


@pytest.mark.parametrize("version", ["1.0", "0.3"])
async def test_a_body_of_an_unsupported_content_type_is_content_type_not_supported(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, version: str
) -> None:
    """As the 1.0 TCK sends it (JSONRPC-SSE-002): a Python repr of the request as ``text/plain``."""
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    payload = rpc("SendMessage" if version == "1.0" else "message/send", {"message": message_v1("content type")})
    headers = {"Content-Type": "text/plain", **(V1 if version == "1.0" else {})}
    for url in (f"{gateway.public_url}/a2a", f"{gateway.public_url}/a2a/agents/echo"):
        response = await http.post(url, content=str(payload).encode(), headers=headers)
        assert response.status_code == 415, response.text
        error = response.json()["error"]
        assert error["code"] == -32005, error  # ContentTypeNotSupported, not -32600
        if version == "1.0":
            [info] = [d for d in error["data"] if d["@type"].endswith("google.rpc.ErrorInfo")]
            assert info["reason"] == "CONTENT_TYPE_NOT_SUPPORTED" and info["domain"] == "a2a-protocol.org", info
        else:
            assert error["data"]["errorType"] == "UnsupportedMediaType", error


#: A2A 1.0.1 spec section 5.4 (a2aproject/A2A v1.0.1, docs/specification.md; a2a-sdk 1.3's
#: grpc_handler agrees): the gRPC status of each A2A error. A2A 1.0.0 had UNIMPLEMENTED for
#: -32003/-32004/-32009; 1.0.1 (#1627) made them FAILED_PRECONDITION. The 1.0 TCK's GRPC-ERR-002
#: still reads 1.0.0's table.
GRPC_STATUS_1_0_1 = {
    -32001: "NOT_FOUND",
    -32002: "FAILED_PRECONDITION",
    -32003: "FAILED_PRECONDITION",
    -32004: "FAILED_PRECONDITION",
    -32005: "INVALID_ARGUMENT",
    -32006: "INTERNAL",
    -32007: "FAILED_PRECONDITION",
    -32008: "FAILED_PRECONDITION",
    -32009: "FAILED_PRECONDITION",
}


def test_a2a_errors_map_to_the_google_rpc_statuses_of_the_1_0_1_spec_on_rest() -> None:
    assert {code: status_of(RpcError("x", code=code))[1] for code in GRPC_STATUS_1_0_1} == GRPC_STATUS_1_0_1


#: What the 1.0 TCK's GRPC-ERR-002 checks (tck/requirements/binding_grpc.py on its 1.0-dev branch:
#: A2A 1.0.0's table): the gRPC binding answers these.
GRPC_STATUS_TCK = {
    **GRPC_STATUS_1_0_1,
    -32003: "UNIMPLEMENTED",
    -32004: "UNIMPLEMENTED",
    -32009: "UNIMPLEMENTED",
}


def test_a2a_errors_map_to_the_grpc_statuses_the_1_0_tck_checks() -> None:
    assert {code: grpc_code(RpcError("x", code=code)).name for code in GRPC_STATUS_TCK} == GRPC_STATUS_TCK
