"""The HTTP gateway's routes, JSON-RPC errors, SSE streams, response log and ListTasks, over real HTTP.

Every test runs a gateway and its agents on the real broker (a namespace of its own) and talks to
the gateway with plain httpx requests, as any A2A client would.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateways.http.server import HttpGateway
from mesh.a2a import TaskState
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from mesh.e2a import LOG_REQUIRED_KEYS
from tests.agents.service_agents import Asker, Blocker, Echo, Streamer
from tests.conftest import ServeAgent
from tests.gateways.conftest import StartGateway
from tests.gateways.jsonrpc_http import (
    V1,
    call,
    error_info,
    error_of,
    message,
    message_v1,
    rate_limit_headers,
    result_of,
    rpc,
    sse_events,
    stream_events,
)

# ---------------------------------------------------------------- cards, health, listing

GET_PATHS = [
    "/.well-known/agent-card.json",
    "/.well-known/agent-card",
    "/.well-known/agent.json",
    "/a2a/health",
    "/a2a/agents",
    "/a2a/agents/echo",
    "/a2a/agents/echo/card",
]


async def test_every_route_answers_with_and_without_a_trailing_slash(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    base = gateway.public_url
    for path in GET_PATHS:
        plain, slashed = await http.get(base + path), await http.get(base + path + "/")
        assert plain.status_code == slashed.status_code == 200, (path, slashed.status_code, slashed.headers)
        assert plain.json() == slashed.json(), path
    for path in ("/a2a", "/a2a/agents/echo"):
        for url in (base + path, base + path + "/"):
            response = await call(http, url, "message/send", {"message": message(url)})
            assert result_of(response)["status"]["message"]["parts"][0]["text"] == url  # no redirect
            response = await call(http, url, "SendMessage", {"message": message_v1(url)}, headers=V1)
            assert result_of(response)["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("path", ["/.well-known/agent-card.json", "/.well-known/agent-card", "/.well-known/agent.json"])
async def test_the_well_known_card_is_the_default_agents_at_the_gateway_url(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, path: str
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    response = await http.get(gateway.public_url + path)
    assert response.status_code == 200
    card = response.json()
    url = f"{gateway.public_url}/a2a"
    assert card["name"] == "echo" and card["skills"][0]["id"] == "echo"
    if path == "/.well-known/agent.json":  # A2A 0.2's path: the 0.3 card
        assert card["url"] == url and card["protocolVersion"] == "0.3.0" and card["preferredTransport"] == "JSONRPC"
        assert "supportedInterfaces" not in card
    else:  # the 1.0 card, listing the 0.3 interface too
        assert card["supportedInterfaces"] == [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": f"{url}/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        ]
        assert "url" not in card and "protocolVersion" not in card
    assert "securitySchemes" not in card  # no authentication configured
    rate_limit_headers(response)


async def test_without_a_default_agent_the_well_known_card_says_where_to_look(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(wait_for=("echo",))
    response = await http.get(f"{gateway.public_url}/.well-known/agent-card.json")
    assert response.status_code == 404
    assert "no default agent" in response.json()["error"] and "/a2a/agents" in response.json()["error"]
    rate_limit_headers(response)


async def test_a_default_agent_that_is_not_on_the_mesh_is_a_404_listing_the_agents(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="gone", wait_for=("echo",))
    response = await http.get(f"{gateway.public_url}/.well-known/agent-card.json")
    assert response.status_code == 404
    error = error_of(response, None)
    assert error["code"] == -32000 and error["data"]["availableAgents"] == ["echo"]
    rate_limit_headers(response)


async def test_health_reports_the_broker_and_the_agents(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, namespace: str
) -> None:
    await serve_agent(Echo())
    await serve_agent(Blocker())
    gateway = await start_gateway(id="web", wait_for=("echo", "blocker"), health_details=True)
    response = await http.get(f"{gateway.public_url}/a2a/health")
    assert response.status_code == 200
    health = response.json()
    assert health["status"] == "ok" and health["gateway"] == "web" and health["namespace"] == namespace
    assert health["broker"]["connected"] is True and health["agents"] == 2
    rate_limit_headers(response)


async def test_the_agent_listing_and_summary(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    await serve_agent(Blocker())
    gateway = await start_gateway(wait_for=("echo", "blocker"))
    listing = (await http.get(f"{gateway.public_url}/a2a/agents")).json()["agents"]
    assert sorted(a["name"] for a in listing) == ["blocker", "echo"]
    [echo] = [a for a in listing if a["name"] == "echo"]
    url = f"{gateway.public_url}/a2a/agents/echo"
    assert echo["url"] == url and echo["cardUrl"] == f"{url}/card"
    assert echo["description"] == "echoes" and echo["skills"] == ["echo"] and echo["streaming"] is True
    assert echo["version"] and echo["lastSeen"].endswith("Z")

    summary = (await http.get(url)).json()
    assert summary["name"] == "echo" and summary["skills"][0]["id"] == "echo"
    assert summary["capabilities"]["streaming"] is True


async def test_an_unknown_agent_is_a_404_with_the_available_agents(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(wait_for=("echo",))
    for path in ("/a2a/agents/ghost", "/a2a/agents/ghost/card"):
        response = await http.get(gateway.public_url + path)
        assert response.status_code == 404, path
        error = error_of(response, None)
        assert error["code"] == -32000 and error["data"]["errorType"] == "AgentNotFound"
        assert error["data"]["agentName"] == "ghost" and error["data"]["availableAgents"] == ["echo"]
        assert "ghost" in error["message"] and "echo" in error["message"]


async def test_an_agents_card_points_at_its_gateway_route(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(wait_for=("echo",))
    card = (await http.get(f"{gateway.public_url}/a2a/agents/echo/card")).json()
    url = f"{gateway.public_url}/a2a/agents/echo"
    assert {i["url"] for i in card["supportedInterfaces"]} == {url, f"{url}/rest"}
    assert "mqtt" not in json.dumps(card)  # the agent's broker URL stays on the mesh
    card_0_3 = (await http.get(f"{gateway.public_url}/a2a/agents/echo/card", headers={"A2A-Version": "0.3"})).json()
    assert card_0_3["url"] == url and "mqtt" not in json.dumps(card_0_3)


# ---------------------------------------------------------------- POST routes


async def test_post_to_an_agent_and_to_the_default_agent(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    for path in ("/a2a/agents/echo", "/a2a"):
        response = await call(
            http, gateway.public_url + path, "message/send", {"message": message(f"via {path}")}, request_id=path
        )
        task = result_of(response, path)
        assert task["kind"] == "task" and task["status"]["state"] == "completed"
        assert task["status"]["message"]["parts"][0]["text"] == f"via {path}"
        rate_limit_headers(response)


async def test_post_a2a_without_a_default_agent_says_to_name_one(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(wait_for=("echo",))
    response = await call(http, f"{gateway.public_url}/a2a", "message/send", {"message": message()}, request_id=7)
    assert response.status_code == 404
    error = error_of(response, 7)
    assert error["code"] == -32000 and error["data"]["availableAgents"] == ["echo"]
    assert "/a2a/agents/{name}" in error["message"]


@pytest.mark.parametrize("headers", [{}, V1], ids=["0.3", "1.0"])
async def test_post_to_an_unknown_agent_is_agent_not_found(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(wait_for=("echo",))
    method, msg = ("SendMessage", message_v1()) if headers else ("message/send", message())
    response = await call(
        http, f"{gateway.public_url}/a2a/agents/ghost", method, {"message": msg}, request_id="q", headers=headers
    )
    assert response.status_code == 404  # as GET /a2a/agents/ghost/card and REST answer it
    error = error_of(response, "q")
    assert error["code"] == -32000 and "ghost" in error["message"]
    if headers:
        info = error_info(error)
        assert info["reason"] == "AGENT_NOT_FOUND" and json.loads(info["metadata"]["availableAgents"]) == ["echo"]
    else:
        assert error["data"]["errorType"] == "AgentNotFound" and error["data"]["availableAgents"] == ["echo"]


# ---------------------------------------------------------------- JSON-RPC errors


@pytest.mark.parametrize(
    ("body", "code", "request_id", "says"),
    [
        (b'{"jsonrpc": "2.0", "id": 1, "method": ', -32700, None, "Invalid JSON"),
        (b"[1, 2]", -32600, None, "JSON object"),
        (b'{"jsonrpc": "1.0", "id": "r", "method": "message/send"}', -32600, "r", "jsonrpc"),
        (b'{"jsonrpc": "2.0", "id": 9, "method": "tasks/explode", "params": {}}', -32601, 9, "tasks/explode"),
        (
            b'{"jsonrpc": "2.0", "id": 3, "method": "message/send", "params": {"message": {"role": "user"}}}',
            -32602,
            3,
            "params.message.parts",
        ),
        (b'{"jsonrpc": "2.0", "id": 4, "method": "SendMessage", "params": {}}', -32009, 4, "A2A-Version: 1.0"),
    ],
    ids=["malformed", "not-an-object", "bad-jsonrpc", "unknown-method", "invalid-params", "1.0-method-as-0.3"],
)
async def test_json_rpc_errors_are_http_200_with_the_error_and_the_id(
    serve_agent: ServeAgent,
    start_gateway: StartGateway,
    http: httpx.AsyncClient,
    body: bytes,
    code: int,
    request_id: Any,
    says: str,
) -> None:
    service = await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    response = await http.post(f"{gateway.public_url}/a2a", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 200
    error = error_of(response, request_id)
    assert error["code"] == code and says in detail_of(error)
    if code == -32601:
        assert "message/send" in error["data"]["supported"] and "message/send" in error["message"]
    if code == -32602:
        paths = [e["path"] for e in error["data"]["errors"]]
        assert "params.message.parts" in paths and "params.message.messageId" in paths
    rate_limit_headers(response)
    assert len(service.tasks) == 0  # nothing reached the agent


@pytest.mark.parametrize(
    ("version", "method", "says"),
    [
        ("1.0", "message/send", "0.3 method"),
        ("7", "message/send", "not supported"),
        ("banana", "SendMessage", "not supported"),
        ("", "SendMessage", "1.0 method"),
    ],
)
async def test_a2a_version_mismatches_are_version_not_supported(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, version: str, method: str, says: str
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    params = {"message": message() if "/" in method else message_v1()}
    response = await call(
        http, f"{gateway.public_url}/a2a", method, params, request_id="v", headers={"A2A-Version": version}
    )
    error = error_of(response, "v")
    assert error["code"] == -32009 and error["message"] == "Version not supported" and says in detail_of(error)
    if version.startswith("1"):  # answered in the version the client asked for
        assert error_info(error)["reason"] == "VERSION_NOT_SUPPORTED"
    else:
        assert error["data"]["method"] == method


def detail_of(error: dict[str, Any]) -> str:
    """What an error says in full: A2A's codes carry the standard message and the mesh's own
    text in ``data.detail`` (1.0: the ErrorInfo's metadata); JSON-RPC's codes in the message."""
    if error["code"] > -32010:
        if isinstance(error["data"], list):
            return str(error_info(error)["metadata"]["detail"])
        return str(error["data"]["detail"])
    return str(error["message"])


async def test_task_errors_from_the_agent(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    url = f"{gateway.public_url}/a2a"
    unknown = error_of(await call(http, url, "tasks/get", {"id": "no-such-task"}, request_id="g"), "g")
    assert unknown["code"] == -32001 and unknown["data"]["taskId"] == "no-such-task"
    assert unknown["message"] == "Task not found" and "no-such-task" in unknown["data"]["detail"]

    task = result_of(await call(http, url, "message/send", {"message": message("done soon")}))
    finished = error_of(await call(http, url, "tasks/cancel", {"id": task["id"]}, request_id="c"), "c")
    assert finished["code"] == -32002 and finished["message"] == "Task cannot be canceled"
    assert "completed" in finished["data"]["detail"]

    # A streaming method answers on its event stream, an error known at once included.
    response, events = await stream_events(http, url, "tasks/resubscribe", {"id": task["id"]}, request_id="r")
    assert response.status_code == 200 and [name for name, _ in events] == ["error"], events
    data = events[0][1]
    assert data["id"] == "r"
    assert data["error"]["code"] == -32004 and data["error"]["data"]["state"] == "completed"
    assert data["error"]["message"] == "This operation is not supported"


async def test_errors_in_a2a_1_0_shape(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    url = f"{gateway.public_url}/a2a"

    unknown = error_of(await call(http, url, "GetTask", {"id": "no-such-task"}, request_id="g", headers=V1), "g")
    assert unknown["code"] == -32001 and error_info(unknown)["reason"] == "TASK_NOT_FOUND"
    assert unknown["message"] == "Task not found" and "no-such-task" in error_info(unknown)["metadata"]["detail"]

    no_parts = {"message": {"role": "ROLE_USER"}}
    invalid = error_of(await call(http, url, "SendMessage", no_parts, request_id="p", headers=V1), "p")
    assert invalid["code"] == -32602 and error_info(invalid)["reason"] == "INVALID_PARAMS"
    [bad_request] = [d for d in invalid["data"] if d["@type"].endswith("google.rpc.BadRequest")]
    assert bad_request["fieldViolations"][0]["field"].startswith("message.")

    nope = error_of(await call(http, url, "Explode", {}, request_id="m", headers=V1), "m")
    assert nope["code"] == -32601 and error_info(nope)["reason"] == "METHOD_NOT_FOUND"

    task = result_of(await call(http, url, "SendMessage", {"message": message_v1("x")}, headers=V1))["task"]
    finished = error_of(await call(http, url, "CancelTask", {"id": task["id"]}, request_id="c", headers=V1), "c")
    assert finished["code"] == -32002 and error_info(finished)["reason"] == "TASK_NOT_CANCELABLE"


# ---------------------------------------------------------------- SSE


async def test_a_0_3_stream_is_named_events_of_json_rpc_responses_in_order(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Streamer(steps=2))
    gateway = await start_gateway(wait_for=("streamer",))
    response, events = await stream_events(
        http,
        f"{gateway.public_url}/a2a/agents/streamer",
        "message/stream",
        {"message": message("go")},
        request_id="s-7",
    )
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    rate_limit_headers(response)
    names = [name for name, _ in events]
    assert names == [
        "task",
        "status-update",
        "artifact-update",
        "status-update",
        "artifact-update",
        "artifact-update",
        "artifact-update",
        "status-update",
    ]  # nothing after the final status-update
    assert all(data["jsonrpc"] == "2.0" and data["id"] == "s-7" and "result" in data for _, data in events)
    results = [data["result"] for _, data in events]
    assert all(r["kind"] == name for r, name in zip(results, names, strict=True))
    task_id = results[0]["id"]
    assert all(r.get("taskId", r.get("id")) == task_id for r in results)
    steps = [r["status"]["message"]["parts"][0]["text"] for r in results[1:4] if r["kind"] == "status-update"]
    assert steps == ["step 0", "step 1"]
    assert results[-1]["final"] is True and results[-1]["status"]["state"] == "completed"


async def test_a_1_0_stream_starts_with_the_task_and_ends_at_the_terminal_state(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Streamer(steps=1))
    gateway = await start_gateway(wait_for=("streamer",))
    _, events = await stream_events(
        http,
        f"{gateway.public_url}/a2a/agents/streamer",
        "SendStreamingMessage",
        {"message": message_v1("go")},
        request_id=42,
        headers=V1,
    )
    (first_name, first), (last_name, last) = events[0], events[-1]
    assert first_name == "task" and first["result"]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert last_name == "status-update" and last["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert all(data["id"] == 42 and "kind" not in data["result"] for _, data in events)
    assert {name for name, _ in events[1:-1]} == {"status-update", "artifact-update"}


async def test_a_failure_mid_stream_is_an_error_event(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    blocker = Blocker()
    service = await serve_agent(blocker)
    gateway = await start_gateway(wait_for=("blocker",))
    _, events = await stream_events(
        http,
        f"{gateway.public_url}/a2a/agents/blocker",
        "message/stream",
        {"message": message("wait")},
        request_id="t",
        headers={"X-A2A-Timeout": "300"},
    )
    *before, (name, data) = events
    assert [n for n, _ in before] in ([], ["task"])  # the Task, if the agent started within the 300 ms
    assert name == "error" and data["id"] == "t" and "result" not in data
    assert data["error"]["code"] == -32030 and data["error"]["data"]["errorType"] == "Timeout"
    record = service.tasks.get(data["error"]["data"]["taskId"])
    assert record is not None
    await asyncio.wait_for(record.settled.wait(), 5)
    assert record.state is TaskState.canceled  # the gateway canceled what nobody waits for


async def test_a_client_leaving_a_stream_does_not_cancel_the_task(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    streamer = Streamer(steps=1)
    streamer.gate = asyncio.Event()
    service = await serve_agent(streamer)
    gateway = await start_gateway(wait_for=("streamer",))
    released = _watch_mesh_calls(gateway, monkeypatch)
    url = f"{gateway.public_url}/a2a/agents/streamer"
    async with http.stream("POST", url, json=rpc("message/stream", {"message": message("go")})) as response:
        _, first = await anext(sse_events(response))
    task_id = first["result"]["id"]
    await asyncio.wait_for(released.wait(), 5)  # the gateway noticed and let the mesh call go

    streamer.gate.set()
    record = service.tasks.get(task_id)
    assert record is not None
    await asyncio.wait_for(record.settled.wait(), 5)
    assert record.state is TaskState.completed and not streamer.cancelled_seen.is_set()
    task = result_of(await call(http, url, "tasks/get", {"id": task_id}))
    assert task["status"]["state"] == "completed" and task["status"]["message"]["parts"][0]["text"] == "done"


def _watch_mesh_calls(gateway: HttpGateway, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """An event set when a call the gateway forwarded to the mesh is closed."""
    closed = asyncio.Event()
    forward = gateway.runtime.forward

    async def watched(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        try:
            async for frame in forward(*args, **kwargs):
                yield frame
        finally:
            closed.set()

    monkeypatch.setattr(gateway.runtime, "forward", watched)
    return closed


# ---------------------------------------------------------------- response log, ListTasks


async def test_the_response_log_has_one_line_per_frame_and_no_secret(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    await serve_agent(Echo())
    await serve_agent(Streamer(steps=1))
    token = "tok-do-not-log-9f3c2a"
    log = tmp_path / "e2a.ndjson"
    gateway = await start_gateway(
        wait_for=("echo", "streamer"), response_log=str(log), auth={"mode": "bearer", "tokens": [token]}
    )
    headers = {"Authorization": f"Bearer {token}"}
    echo_url = f"{gateway.public_url}/a2a/agents/echo"
    result_of(await call(http, echo_url, "message/send", {"message": message("a")}, headers=headers))
    _, events = await stream_events(
        http, f"{gateway.public_url}/a2a/agents/streamer", "message/stream", {"message": message("b")}, headers=headers
    )

    # The log's writer thread may still hold the last frames: the client can have its answer first.
    assert gateway.runtime.response_log is not None and gateway.runtime.response_log.flush(timeout=10)
    text = log.read_text()
    assert token not in text
    lines = [json.loads(line) for line in text.splitlines()]
    assert all(list(line)[: len(LOG_REQUIRED_KEYS)] == list(LOG_REQUIRED_KEYS) for line in lines)
    by_request: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        by_request.setdefault(line["request_id"], []).append(line)
    assert len(by_request) == 2
    for frames in by_request.values():
        assert [f["sequence"] for f in frames] == list(range(len(frames)))
        assert [f["is_final"] for f in frames] == [False] * (len(frames) - 1) + [True]
        assert len({f["response_id"] for f in frames}) == len(frames)
    # the stream's frames: each event the client got, plus the final Task
    assert max(len(frames) for frames in by_request.values()) >= len(events) - 1


async def test_list_tasks_shows_only_the_callers_tasks_by_context_and_page(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    tokens = [{"name": "alice", "secret": "alice-token-123"}, {"name": "bob", "secret": "bob-token-456"}]
    gateway = await start_gateway(default_agent="echo", auth={"mode": "bearer", "tokens": tokens})
    url = f"{gateway.public_url}/a2a"
    alice = {**V1, "Authorization": "Bearer alice-token-123"}
    bob = {**V1, "Authorization": "Bearer bob-token-456"}

    async def send(headers: dict[str, str], context: str) -> str:
        params = {"message": message_v1(contextId=context)}
        result = result_of(await call(http, url, "SendMessage", params, headers=headers))
        return str(result["task"]["id"])

    alices = [await send(alice, "c1"), await send(alice, "c1"), await send(alice, "c2")]
    bobs = [await send(bob, "c1")]

    async def list_tasks(headers: dict[str, str], **params: Any) -> dict[str, Any]:
        result: dict[str, Any] = result_of(await call(http, url, "ListTasks", params, headers=headers))
        return result

    everything = await list_tasks(alice)
    assert sorted(t["id"] for t in everything["tasks"]) == sorted(alices) and everything["totalSize"] == 3
    assert all(t["status"]["state"] == "TASK_STATE_COMPLETED" for t in everything["tasks"])
    assert [t["id"] for t in (await list_tasks(bob))["tasks"]] == bobs

    in_c1 = await list_tasks(alice, contextId="c1")
    assert sorted(t["id"] for t in in_c1["tasks"]) == sorted(alices[:2])
    assert all(t["contextId"] == "c1" for t in in_c1["tasks"])

    first = await list_tasks(alice, pageSize=2)
    assert len(first["tasks"]) == 2 and first["nextPageToken"] and first["totalSize"] == 3
    second = await list_tasks(alice, pageSize=2, pageToken=first["nextPageToken"])
    assert len(second["tasks"]) == 1 and second["nextPageToken"] == ""
    assert sorted(t["id"] for t in first["tasks"] + second["tasks"]) == sorted(alices)

    # and one principal cannot read another's task by id
    stolen = error_of(await call(http, url, "GetTask", {"id": alices[0]}, request_id="x", headers=bob), "x")
    assert stolen["code"] == -32001


async def test_list_tasks_shows_where_a_task_sent_without_blocking_now_stands(
    serve_agent: ServeAgent,
    start_gateway: StartGateway,
    http: httpx.AsyncClient,
    broker_settings: BrokerSettings,
    namespace: str,
) -> None:
    streamer = Streamer(steps=1)
    streamer.gate = asyncio.Event()
    await serve_agent(streamer)
    gateway = await start_gateway(default_agent="streamer")
    url = f"{gateway.public_url}/a2a"
    params = {"message": message_v1(), "configuration": {"returnImmediately": True}}
    sent = result_of(await call(http, url, "SendMessage", params, headers=V1))["task"]
    assert sent["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    streamer.gate.set()  # the task finishes on the mesh; the gateway is not listening to it
    async with MeshClient.connect(broker_settings, namespace) as client:
        task = await client.get_task("streamer", sent["id"])
        while task.status.state is not TaskState.completed:
            await asyncio.sleep(0.02)  # polling the agent, as a client would
            task = await client.get_task("streamer", sent["id"])
    listed = result_of(await call(http, url, "ListTasks", {}, headers=V1))["tasks"]
    assert [(t["id"], t["status"]["state"]) for t in listed] == [(sent["id"], "TASK_STATE_COMPLETED")]


async def test_the_a2a_version_may_come_as_a_query_parameter(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(wait_for=("echo",))
    url = f"{gateway.public_url}/a2a/agents/echo?A2A-Version=1.0"
    result = result_of(await call(http, url, "SendMessage", {"message": message_v1("by query")}))
    assert result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"  # answered in 1.0 shape


async def test_a_quiet_stream_gets_keep_alive_comments(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    agent = Blocker()
    await serve_agent(agent)
    gateway = await start_gateway(default_agent="blocker", sse_keep_alive_s=0.2)
    body = rpc("message/stream", {"message": message("wait")}, request_id="k")
    lines = []
    async with http.stream("POST", f"{gateway.public_url}/a2a", json=body) as response:
        async for line in response.aiter_lines():
            lines.append(line)
            if lines.count(": keep-alive") == 2:  # the agent stays silent: only comments come
                break
    events = [line for line in lines if line.startswith("event:")]
    assert events == ["event: task"], lines  # comments between events, never inside one
    assert lines[lines.index("event: task") + 1].startswith("data:")


async def test_a_subscription_that_times_out_leaves_the_waiting_task_alone(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Asker())
    gateway = await start_gateway(default_agent="asker", idle_timeout_s=0.5)
    url = f"{gateway.public_url}/a2a"
    task = result_of(await call(http, url, "message/send", {"message": message("hi")}))
    assert task["status"]["state"] == "input-required"
    _, events = await stream_events(http, url, "tasks/resubscribe", {"id": task["id"]}, request_id="w")
    assert [name for name, _ in events] == ["task", "error"]  # the snapshot, then the watcher's timeout
    assert events[1][1]["error"]["data"]["errorType"] == "Timeout"
    again = result_of(await call(http, url, "tasks/get", {"id": task["id"]}))
    assert again["status"]["state"] == "input-required"  # not canceled: someone may still answer it
