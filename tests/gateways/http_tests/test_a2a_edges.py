"""The A2A edge defects a review and the conformance kit found (issue 24), each failing before
its fix: the A2A-Version check on REST and gRPC, ListTasks' boolean query members, REST
subscribe routed for GET and POST, an error known before a stream starts answered as a plain
error (REST; JSON-RPC streams it since issue 38), the gateway's codes apart from A2A's, and one
"agent not found"."""

from __future__ import annotations

import asyncio
import uuid

import grpc
import httpx
import pytest
from a2a.types import a2a_pb2 as pb
from a2a.types import a2a_pb2_grpc
from a2a.utils.grpc_status import status_from_call
from google.protobuf import any_pb2
from google.rpc import error_details_pb2
from pydantic import ValidationError

from gateways.http.protection import resource_exhausted
from gateways.http.settings import HttpGatewaySettings
from mesh.a2a import ErrorCode
from tests.agents.service_agents import Blocker, Echo
from tests.conftest import ServeAgent
from tests.gateways.conftest import StartGateway
from tests.gateways.jsonrpc_http import V1, message, message_v1, rpc, sse_events


async def _finished_task(http: httpx.AsyncClient, base: str) -> str:
    sent = await http.post(f"{base}/message:send", json={"message": message_v1("done")})
    assert sent.status_code == 200, sent.text
    task = sent.json()["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return str(task["id"])


async def test_rest_refuses_an_a2a_version_it_does_not_serve(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    echo = await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    base = f"{gateway.public_url}/a2a/agents/echo/rest"
    body = {"message": message_v1("never served")}
    for refused in (
        await http.post(f"{base}/message:send", json=body, headers={"A2A-Version": "99.0"}),
        await http.post(f"{base}/message:send?A2A-Version=99.0", json=body),
        await http.post(f"{base}/message:send", json=body, headers={"A2A-Version": "0.3"}),
        await http.get(f"{base}/tasks", headers={"A2A-Version": "99.0"}),
    ):
        assert refused.status_code == 400, refused.text
        error = refused.json()["error"]
        assert error["details"][0]["reason"] == "VERSION_NOT_SUPPORTED", error
    assert len(echo.tasks) == 0
    served = await http.post(f"{base}/message:send", json=body, headers={"A2A-Version": "1.0"})
    assert served.status_code == 200 and served.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def _error_info(detail: any_pb2.Any) -> error_details_pb2.ErrorInfo:
    info = error_details_pb2.ErrorInfo()
    assert detail.Unpack(info), detail
    return info


async def test_grpc_refuses_an_a2a_version_it_does_not_serve(
    serve_agent: ServeAgent, start_gateway: StartGateway
) -> None:
    echo = await serve_agent(Echo())
    gateway = await start_gateway(grpc_port=0, wait_for=("echo",))
    request = pb.SendMessageRequest(
        tenant="echo",
        message=pb.Message(message_id=uuid.uuid4().hex, role=pb.Role.ROLE_USER, parts=[pb.Part(text="hi")]),
    )
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway.grpc_port}") as channel:
        stub = a2a_pb2_grpc.A2AServiceStub(channel)  # type: ignore[no-untyped-call]
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.SendMessage(request, metadata=(("a2a-version", "99.0"),))
        # UNIMPLEMENTED, as the 1.0 TCK's GRPC-ERR-002 checks; the error itself is in the ErrorInfo
        # (a2a-sdk's client raises VersionNotSupportedError from its reason, whatever the status).
        assert refused.value.code() == grpc.StatusCode.UNIMPLEMENTED
        assert refused.value.details() == "Version not supported"
        status = status_from_call(refused.value)  # what the a2a-sdk client reads
        assert status is not None
        [info] = [_error_info(detail) for detail in status.details]
        assert (info.reason, info.domain) == ("VERSION_NOT_SUPPORTED", "a2a-protocol.org")
        assert len(echo.tasks) == 0
        served = await stub.SendMessage(request, metadata=(("a2a-version", "1.0"),))
    assert served.task.status.state == pb.TaskState.TASK_STATE_COMPLETED


async def test_rest_list_tasks_reads_include_artifacts_as_a_boolean(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    base = f"{gateway.public_url}/a2a/agents/echo/rest"
    task_id = await _finished_task(http, base)
    for flag in ("true", "false", "True"):
        listed = await http.get(f"{base}/tasks", params={"includeArtifacts": flag})
        assert listed.status_code == 200, (flag, listed.text)
        assert [t["id"] for t in listed.json()["tasks"]] == [task_id]
    bad = await http.get(f"{base}/tasks", params={"includeArtifacts": "maybe"})
    assert bad.status_code == 400 and "includeArtifacts" in bad.text


async def test_rest_subscribe_is_routed_for_get_and_post(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    agent = Blocker()
    await serve_agent(agent)
    gateway = await start_gateway(default_agent="blocker")
    base = f"{gateway.public_url}/a2a/agents/blocker/rest"
    sent = await http.post(
        f"{base}/message:send", json={"message": message_v1("work"), "configuration": {"returnImmediately": True}}
    )
    task_id = sent.json()["task"]["id"]
    await asyncio.wait_for(agent.started.wait(), 5)
    for method in ("GET", "POST"):
        async with http.stream(method, f"{base}/tasks/{task_id}:subscribe") as response:
            assert response.status_code == 200, method
            async for _name, event in sse_events(response):
                assert event["task"]["id"] == task_id, (method, event)  # a subscription opens with the Task
                break
    canceled = await http.post(f"{base}/tasks/{task_id}:cancel", json={})
    assert canceled.status_code == 200, canceled.text
    assert canceled.json()["status"]["state"] == "TASK_STATE_CANCELED", canceled.text


async def test_an_error_known_before_a_stream_starts_is_a_plain_error(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    base = f"{gateway.public_url}/a2a/agents/echo/rest"
    task_id = await _finished_task(http, base)
    for method in ("GET", "POST"):  # REST: the HTTP status of the error, a google.rpc.Status body
        refused = await http.request(method, f"{base}/tasks/{task_id}:subscribe")
        assert refused.status_code == 400, (method, refused.status_code, refused.text)
        assert refused.headers["content-type"].startswith("application/json")
        assert refused.json()["error"]["details"][0]["reason"] == "UNSUPPORTED_OPERATION"
    url = f"{gateway.public_url}/a2a/agents/echo"
    # JSON-RPC 1.0: a plain JSON-RPC error too, as a2a-sdk 1.x's server answers (the 1.0 TCK's
    # STREAM-SUB-003); 0.3: on its event stream (issue 38: tests/gateways/http_tests/test_a2a_conformance_i38.py).
    plain = await http.post(url, json=rpc("SubscribeToTask", {"id": task_id}), headers=V1)
    assert plain.headers["content-type"].startswith("application/json"), plain.headers
    assert plain.json()["error"]["code"] == ErrorCode.UNSUPPORTED_OPERATION, plain.text
    async with http.stream("POST", url, json=rpc("tasks/resubscribe", {"id": task_id})) as answer:
        assert answer.status_code == 200
        events = [event async for event in sse_events(answer)]
    [(name, body)] = events
    assert name == "error" and body["id"] == 1, body
    assert body["error"]["code"] == ErrorCode.UNSUPPORTED_OPERATION, body


def test_the_gateways_resource_exhausted_is_not_a2as_extended_card_code() -> None:
    refusal = resource_exhausted("full", resource="requestsPerCaller", limit=1)
    assert refusal.code != ErrorCode.EXTENDED_AGENT_CARD_NOT_CONFIGURED
    assert refusal.code == ErrorCode.RESOURCE_EXHAUSTED and -32099 <= refusal.code <= -32000


async def test_agent_not_found_is_404_with_the_same_words_on_every_route(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    url = f"{gateway.public_url}/a2a/agents/nobody"
    posted = await http.post(url, json=rpc("message/send", {"message": message()}))
    card = await http.get(f"{url}/card")
    described = await http.get(url)
    rest = await http.post(f"{url}/rest/message:send", json={"message": message_v1("hi")})
    statuses = (posted.status_code, card.status_code, described.status_code, rest.status_code)
    assert statuses == (404, 404, 404, 404)
    expected = "agent 'nobody' is not on the mesh; available agents: echo"
    assert posted.json()["error"]["message"] == expected
    assert described.json()["error"]["message"] == expected
    assert card.json()["error"]["message"] == expected
    assert rest.json()["error"]["message"] == expected


def test_the_gateway_has_no_card_interval_it_would_ignore() -> None:
    with pytest.raises(ValidationError, match="card_interval_s"):
        HttpGatewaySettings.model_validate({"card_interval_s": 5})
