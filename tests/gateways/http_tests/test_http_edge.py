"""The HTTP gateway's edge protections over real HTTP: auth, rate, size, time and concurrency
limits, CORS, and how open streams end when the gateway stops."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from gateways.http.server import HttpGateway
from gateways.http.settings import HttpGatewaySettings
from mesh.a2a import TaskState
from mesh.broker import BrokerSettings
from mesh.client import MeshClient
from tests.agents.service_agents import Blocker, Echo, Whoami
from tests.conftest import ServeAgent
from tests.gateways.conftest import StartGateway
from tests.gateways.jsonrpc_http import (
    RATE_LIMIT_HEADERS,
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
)

SECRET = "s3cret-never-shown-7d1e"
JSON_BODY = {"Content-Type": "application/json"}


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# ---------------------------------------------------------------- authentication

AUTH_MODES = {
    "bearer": (
        {"mode": "bearer", "tokens": [{"name": "ada", "secret": SECRET}]},
        {"Authorization": f"Bearer {SECRET}"},
        "Bearer realm=",
    ),
    "api_key": (
        {"mode": "api_key", "keys": [{"name": "ada", "secret": SECRET}]},
        {"X-API-Key": SECRET},
        "ApiKey realm=",
    ),
    "basic": ({"mode": "basic", "users": {"ada": SECRET}}, {"Authorization": basic("ada", SECRET)}, "Basic realm="),
}


@pytest.mark.parametrize("mode", list(AUTH_MODES))
async def test_each_auth_mode_refuses_strangers_and_passes_the_principal_as_user_id(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, mode: str
) -> None:
    auth, good, challenge = AUTH_MODES[mode]
    service = await serve_agent(Whoami())
    gateway = await start_gateway(default_agent="whoami", auth=auth)
    url = f"{gateway.public_url}/a2a"

    refused = await call(http, url, "message/send", {"message": message()})
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith(challenge)
    error = error_of(refused, None)  # refused before the body is read
    assert error["code"] == -32004 and error["data"]["errorType"] == "AuthenticationRequired"
    assert (await http.get(f"{gateway.public_url}/a2a/agents")).status_code == 401

    response = await call(http, url, "message/send", {"message": message()}, headers=good)
    who = result_of(response)["status"]["message"]["parts"][0]["data"]
    assert who["user"] == "ada"
    assert SECRET not in response.text
    record = service.tasks.get(result_of(response)["id"])
    assert record is not None and SECRET not in record.task.model_dump_json()  # the agent never saw it

    # discovery stays public, and the cards say how to authenticate
    for path in ("/.well-known/agent-card.json", "/a2a/agents/whoami/card", "/a2a/health"):
        assert (await http.get(gateway.public_url + path)).status_code == 200, path
    card = (await http.get(f"{gateway.public_url}/a2a/agents/whoami/card")).json()  # 1.0
    assert (
        card["securityRequirements"] == [{"schemes": {"gateway": {"list": []}}}]
        and "gateway" in card["securitySchemes"]
    )
    assert SECRET not in json.dumps(card)
    card = (await http.get(f"{gateway.public_url}/a2a/agents/whoami/card", headers={"A2A-Version": "0.3"})).json()
    assert card["security"] == [{"gateway": []}] and "gateway" in card["securitySchemes"]
    assert SECRET not in json.dumps(card)


@pytest.mark.parametrize(
    ("mode", "headers", "challenge", "hint"),
    [
        ("bearer", {"Authorization": "Bearer wrong-token"}, 'Bearer realm="a2a", error="invalid_token"', "not valid"),
        ("bearer", {"Authorization": "Token abc"}, 'Bearer realm="a2a"', "scheme 'Token'"),
        ("api_key", {"X-API-Key": "wrong-key"}, 'ApiKey realm="a2a"', "not valid"),
        ("api_key", {"Authorization": "Bearer wrong-key"}, 'ApiKey realm="a2a"', "not valid"),
        ("basic", {"Authorization": basic("ada", "wrong")}, 'Basic realm="a2a"', "wrong user name or password"),
        ("basic", {"Authorization": basic("eve", SECRET)}, 'Basic realm="a2a"', "wrong user name or password"),
        ("basic", {"Authorization": "Basic !!not-base64!!"}, 'Basic realm="a2a"', "malformed"),
    ],
    ids=[
        "bearer-wrong",
        "bearer-other-scheme",
        "key-wrong",
        "key-in-authorization",
        "basic-wrong-password",
        "basic-unknown-user",
        "basic-malformed",
    ],
)
async def test_wrong_credentials_are_401(
    serve_agent: ServeAgent,
    start_gateway: StartGateway,
    http: httpx.AsyncClient,
    mode: str,
    headers: dict[str, str],
    challenge: str,
    hint: str,
) -> None:
    service = await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo", auth=AUTH_MODES[mode][0])
    response = await call(http, f"{gateway.public_url}/a2a", "message/send", {"message": message()}, headers=headers)
    assert response.status_code == 401 and response.headers["WWW-Authenticate"].startswith(challenge)
    error = error_of(response, None)
    assert error["code"] == -32004 and hint in error["message"] and SECRET not in response.text
    rate_limit_headers(response)
    assert len(service.tasks) == 0
    # a wrong credential does not keep a caller from the public routes
    for path in ("/a2a/health", "/a2a/agents/echo/card"):
        assert (await http.get(gateway.public_url + path, headers=headers)).status_code == 200, path


async def test_principals_are_names_never_secrets(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Whoami())
    gateway = await start_gateway(default_agent="whoami", auth={"mode": "bearer", "tokens": [SECRET]})
    response = await call(
        http,
        f"{gateway.public_url}/a2a",
        "message/send",
        {"message": message()},
        headers={"Authorization": f"Bearer {SECRET}"},
    )
    user = result_of(response)["status"]["message"]["parts"][0]["data"]["user"]
    assert user.startswith("token-") and len(user) == len("token-") + 12 and SECRET not in user

    open_gateway = await start_gateway(id="open", default_agent="whoami")
    anonymous = await call(http, f"{open_gateway.public_url}/a2a", "message/send", {"message": message()})
    assert result_of(anonymous)["status"]["message"]["parts"][0]["data"]["user"] == "anonymous"


# ---------------------------------------------------------------- rate limiting


async def test_every_answer_carries_the_rate_limit_headers(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(
        default_agent="echo", rate_limit={"requests": 50, "window_s": 3600}, limits={"max_message_bytes": 2000}
    )
    base = gateway.public_url
    answers = [
        await http.get(f"{base}/a2a/health"),
        await http.get(f"{base}/a2a/agents/echo/card"),
        await http.get(f"{base}/a2a/agents/ghost/card"),
        await http.get(f"{base}/a2a/agents"),
        await http.get(f"{base}/a2a/agents/ghost"),
        await call(http, f"{base}/a2a", "message/send", {"message": message()}),
        await call(http, f"{base}/a2a", "tasks/get", {"id": "nope"}),
        await http.post(f"{base}/a2a", content=b"{", headers=JSON_BODY),
        await http.post(f"{base}/a2a", content=b"x" * 3000, headers=JSON_BODY),
        await call(http, f"{base}/a2a", "message/send", {"message": message()}, headers={"X-A2A-Timeout": "soon"}),
    ]
    async with http.stream("POST", f"{base}/a2a", json=rpc("message/stream", {"message": message()})) as stream:
        [_ async for _ in sse_events(stream)]
    answers.append(stream)
    assert [a.status_code for a in answers] == [200, 200, 404, 200, 404, 200, 200, 200, 413, 400, 200]
    remaining = [int(rate_limit_headers(a)["X-RateLimit-Remaining"]) for a in answers]
    assert remaining == list(range(49, 49 - len(answers), -1))  # one bucket: the caller's address
    headers = rate_limit_headers(answers[-1])
    assert headers["X-RateLimit-Limit"] == "50" and headers["X-RateLimit-Window"] == "3600"
    assert int(headers["X-RateLimit-Reset"]) >= int(time.time())


@pytest.mark.parametrize("headers", [{}, V1], ids=["0.3", "1.0"])
async def test_too_many_requests_are_429_with_retry_after(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    service = await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo", rate_limit={"requests": 3, "window_s": 60})
    url = f"{gateway.public_url}/a2a"
    method, msg = ("SendMessage", message_v1) if headers else ("message/send", message)
    for remaining in ("2", "1", "0"):
        response = await call(http, url, method, {"message": msg()}, headers=headers)
        assert response.status_code == 200 and response.headers["X-RateLimit-Remaining"] == remaining
    refused = await call(http, url, method, {"message": msg()}, headers=headers)
    assert refused.status_code == 429
    retry_after = int(refused.headers["Retry-After"])
    assert 0 < retry_after <= 20  # one more request every 60/3 s
    assert rate_limit_headers(refused)["X-RateLimit-Remaining"] == "0"
    error = error_of(refused, None)
    assert error["code"] == -32003
    if headers:
        info = error_info(error)
        assert info["reason"] == "RATE_LIMITED" and info["metadata"]["errorType"] == "RateLimited"
    else:
        assert error["data"]["errorType"] == "RateLimited" and error["data"]["retryAfter"] == retry_after
    assert (await http.get(f"{gateway.public_url}/a2a/health")).status_code == 429  # the same caller
    assert len(service.tasks) == 3


async def test_rate_limits_are_per_principal_and_count_failed_logins(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    tokens = [{"name": "ada", "secret": "ada-token-1"}, {"name": "bob", "secret": "bob-token-2"}]
    gateway = await start_gateway(
        default_agent="echo", auth={"mode": "bearer", "tokens": tokens}, rate_limit={"requests": 2, "window_s": 60}
    )
    url = f"{gateway.public_url}/a2a/agents"
    ada, bob = {"Authorization": "Bearer ada-token-1"}, {"Authorization": "Bearer bob-token-2"}
    assert [(await http.get(url, headers=ada)).status_code for _ in range(3)] == [200, 200, 429]
    assert (await http.get(url, headers=bob)).status_code == 200  # bob has his own allowance

    guesses = [await http.get(url, headers={"Authorization": f"Bearer guess-{i}"}) for i in range(3)]
    assert [g.status_code for g in guesses] == [401, 401, 429]  # guessing tokens is rate limited too
    assert [g.headers["X-RateLimit-Remaining"] for g in guesses] == ["1", "0", "0"]
    assert 0 < int(guesses[-1].headers["Retry-After"]) <= 30


# ---------------------------------------------------------------- size limits

LIMITS = {"max_message_bytes": 2000, "max_parts": 2, "max_text_part_bytes": 50}


async def test_a_body_over_the_limit_is_413_with_or_without_content_length(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    service = await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo", limits=LIMITS)
    body = json.dumps(rpc("message/send", {"message": message("x" * 40, metadata={"pad": "y" * 3000})})).encode()

    async def chunked() -> AsyncIterator[bytes]:
        for start in range(0, len(body), 500):
            yield body[start : start + 500]

    for content, declared in ((body, True), (chunked(), False)):
        response = await http.post(f"{gateway.public_url}/a2a", content=content, headers=JSON_BODY)
        assert ("content-length" in response.request.headers) is declared
        assert response.status_code == 413
        error = error_of(response, None)
        assert error["code"] == -32600 and error["data"]["errorType"] == "PayloadTooLarge"
        assert error["data"]["limit"] == 2000 and error["data"]["size"] > 2000
        rate_limit_headers(response)
    assert len(service.tasks) == 0


@pytest.mark.parametrize(
    ("parts", "path"),
    [
        (["a", "b", "c"], "params.message.parts"),
        (["short", "x" * 51], "params.message.parts.1.text"),
    ],
    ids=["too-many-parts", "text-part-too-large"],
)
async def test_oversize_parts_are_invalid_params_naming_the_part(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, parts: list[str], path: str
) -> None:
    service = await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo", limits=LIMITS)
    msg = message(parts=[{"kind": "text", "text": text} for text in parts])
    response = await call(http, f"{gateway.public_url}/a2a", "message/send", {"message": msg}, request_id="big")
    assert response.status_code == 200
    error = error_of(response, "big")
    assert error["code"] == -32602 and error["message"].startswith(path)
    assert [e["path"] for e in error["data"]["errors"]] == [path]

    msg_v1 = message_v1(parts=[{"text": text} for text in parts])
    response = await call(
        http, f"{gateway.public_url}/a2a", "SendMessage", {"message": msg_v1}, request_id="big", headers=V1
    )
    error = error_of(response, "big")
    assert error["code"] == -32602 and error_info(error)["reason"] == "INVALID_PARAMS"
    assert len(service.tasks) == 0  # refused before reaching the agent


# ---------------------------------------------------------------- timeouts


@pytest.mark.parametrize("headers", [{}, V1], ids=["0.3", "1.0"])
async def test_x_a2a_timeout_answers_the_timeout_error_and_cancels_the_task(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    service = await serve_agent(Blocker())
    gateway = await start_gateway(wait_for=("blocker",))
    method, msg = ("SendMessage", message_v1("wait")) if headers else ("message/send", message("wait"))
    response = await call(
        http,
        f"{gateway.public_url}/a2a/agents/blocker",
        method,
        {"message": msg},
        request_id="t",
        headers={**headers, "X-A2A-Timeout": "300"},
    )
    assert response.status_code == 200
    error = error_of(response, "t")
    assert error["code"] == -32030
    if headers:
        info = error_info(error)
        assert info["reason"] == "TIMEOUT" and info["metadata"]["errorType"] == "Timeout"
        task_id = info["metadata"]["taskId"]
    else:
        assert error["data"]["errorType"] == "Timeout"
        task_id = error["data"]["taskId"]
    record = service.tasks.get(task_id)
    assert record is not None
    await asyncio.wait_for(record.settled.wait(), 5)
    assert record.state is TaskState.canceled


@pytest.mark.parametrize("value", ["soon", "-5", "0", "1e3", ""])
async def test_a_bad_x_a2a_timeout_is_400(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, value: str
) -> None:
    service = await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    response = await call(
        http,
        f"{gateway.public_url}/a2a",
        "message/send",
        {"message": message()},
        request_id="h",
        headers={"X-A2A-Timeout": value},
    )
    assert response.status_code == 400
    error = error_of(response, "h")
    assert error["code"] == -32600 and "milliseconds" in error["message"]
    assert error["data"]["errorType"] == "InvalidHeader" and error["data"]["header"] == "X-A2A-Timeout"
    assert len(service.tasks) == 0


# ---------------------------------------------------------------- concurrency


@contextlib.asynccontextmanager
async def held_streams(
    http: httpx.AsyncClient, url: str, contexts: list[str | None], headers: dict[str, str] | None = None
) -> AsyncIterator[list[tuple[str, AsyncIterator[tuple[str, dict[str, Any]]]]]]:
    """Open one message/stream per context and read its first event: the requests are in flight."""
    async with contextlib.AsyncExitStack() as stack:
        held = []
        for i, context in enumerate(contexts):
            fields = {"contextId": context} if context else {}
            body = rpc("message/stream", {"message": message("hold", **fields)}, request_id=f"h{i}")
            response = await stack.enter_async_context(http.stream("POST", url, json=body, headers=headers or {}))
            assert response.status_code == 200
            events = sse_events(response)
            _, first = await anext(events)
            held.append((first["result"]["id"], events))
        yield held


async def cancel_and_drain(broker: BrokerSettings, namespace: str, held: list[tuple[str, Any]]) -> None:
    """Cancel the held tasks on the mesh (not through the full gateway) and read their streams to the end."""
    async with MeshClient.connect(broker, namespace) as mesh:
        for task_id, _ in held:
            await mesh.cancel_task("blocker", task_id)
    for _, events in held:
        rest = [data async for _, data in events]
        assert rest[-1]["result"]["status"]["state"] == "canceled"


async def test_a_client_has_at_most_n_requests_in_flight(
    serve_agent: ServeAgent,
    start_gateway: StartGateway,
    http: httpx.AsyncClient,
    broker_settings: BrokerSettings,
    namespace: str,
) -> None:
    await serve_agent(Blocker())
    gateway = await start_gateway(wait_for=("blocker",), concurrency={"max_requests_per_client": 2})
    url = f"{gateway.public_url}/a2a/agents/blocker"
    async with held_streams(http, url, [None, None]) as held:
        refused = await call(http, url, "tasks/get", {"id": held[0][0]}, request_id="third")
        assert refused.status_code == 429
        error = error_of(refused, None)
        assert error["code"] == -32051 and error["data"]["errorType"] == "ResourceExhausted"
        assert error["data"]["resource"] == "requestsPerClient" and error["data"]["limit"] == 2
        rate_limit_headers(refused)
        assert (await http.get(f"{gateway.public_url}/a2a/health")).status_code == 200  # public: not counted
        await cancel_and_drain(broker_settings, namespace, held)
    task = result_of(await call(http, url, "tasks/get", {"id": held[0][0]}))
    assert task["status"]["state"] == "canceled"
    assert (await http.get(f"{gateway.public_url}/a2a/agents")).status_code == 200


async def test_a_context_has_at_most_n_tasks_in_flight(
    serve_agent: ServeAgent,
    start_gateway: StartGateway,
    http: httpx.AsyncClient,
    broker_settings: BrokerSettings,
    namespace: str,
) -> None:
    await serve_agent(Blocker())
    echo = await serve_agent(Echo())
    gateway = await start_gateway(wait_for=("blocker", "echo"), concurrency={"max_tasks_per_context": 1})
    echo_url = f"{gateway.public_url}/a2a/agents/echo"
    async with held_streams(http, f"{gateway.public_url}/a2a/agents/blocker", ["ctx-1"]) as held:
        refused = await call(
            http, echo_url, "message/send", {"message": message(contextId="ctx-1")}, request_id="second"
        )
        assert refused.status_code == 429
        error = error_of(refused, "second")
        assert error["code"] == -32051 and error["data"]["resource"] == "tasksPerContext"
        assert "ctx-1" in error["message"]
        assert len(echo.tasks) == 0
        other = await call(http, echo_url, "message/send", {"message": message(contextId="ctx-2")})
        assert result_of(other)["status"]["state"] == "completed"
        await cancel_and_drain(broker_settings, namespace, held)
    again = await call(http, echo_url, "message/send", {"message": message(contextId="ctx-1")})
    assert result_of(again)["contextId"] == "ctx-1"


async def test_slots_are_given_back_when_a_stream_is_never_sent(
    serve_agent: ServeAgent, start_gateway: StartGateway
) -> None:
    """A client gone before its SSE response starts: the ASGI call ends without iterating the body."""
    echo = await serve_agent(Echo())
    gateway = await start_gateway(
        default_agent="echo", concurrency={"max_requests_per_client": 1, "max_tasks_per_context": 1}
    )
    body = json.dumps(rpc("message/stream", {"message": message(contextId="ctx-gone")})).encode()
    incoming = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> dict[str, Any]:
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(_: Any) -> None:
        await asyncio.sleep(0)  # a socket that is not writable at once: the client's disconnect wins

    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/a2a",
        "raw_path": b"/a2a",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 40000),
        "server": ("127.0.0.1", gateway.port),
    }
    await gateway.app(scope, receive, send)
    limits = gateway.app.state.concurrency
    assert limits.requests.in_use("127.0.0.1") == 0 and limits.contexts.in_use("ctx-gone") == 0
    assert len(echo.tasks) == 0  # nothing was sent to the mesh either


# ---------------------------------------------------------------- CORS

ORIGIN = "https://app.example"


async def test_cors_for_the_allowed_origin_only(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo", cors={"allow_origins": [ORIGIN]})
    url = f"{gateway.public_url}/a2a"
    wanted = "authorization, content-type, a2a-version, x-a2a-timeout"
    preflight = await http.options(
        url,
        headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": wanted},
    )
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["Access-Control-Allow-Origin"] == ORIGIN
    assert "POST" in preflight.headers["Access-Control-Allow-Methods"]
    allowed = {h.strip().lower() for h in preflight.headers["Access-Control-Allow-Headers"].split(",")}
    assert {"authorization", "content-type", "a2a-version", "x-a2a-timeout"} <= allowed

    response = await call(http, url, "SendMessage", {"message": message_v1()}, headers={"Origin": ORIGIN, **V1})
    assert response.status_code == 200 and response.headers["Access-Control-Allow-Origin"] == ORIGIN
    exposed = {h.strip() for h in response.headers["Access-Control-Expose-Headers"].split(",")}
    assert {*RATE_LIMIT_HEADERS, "Retry-After"} <= exposed

    other = "https://evil.example"
    denied = await http.options(url, headers={"Origin": other, "Access-Control-Request-Method": "POST"})
    assert denied.status_code == 400 and "Access-Control-Allow-Origin" not in denied.headers
    response = await call(http, url, "message/send", {"message": message()}, headers={"Origin": other})
    assert response.status_code == 200 and "Access-Control-Allow-Origin" not in response.headers


async def test_without_cors_settings_no_origin_is_allowed(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    response = await http.get(f"{gateway.public_url}/a2a/health", headers={"Origin": ORIGIN})
    assert response.status_code == 200
    assert not [name for name in response.headers if name.lower().startswith("access-control-")]


# ---------------------------------------------------------------- stopping


async def test_stopping_the_gateway_ends_open_streams_and_leaves_the_tasks(
    serve_agent: ServeAgent, http: httpx.AsyncClient, broker_settings: BrokerSettings, namespace: str
) -> None:
    blocker = Blocker()
    service = await serve_agent(blocker)
    gateway = HttpGateway(HttpGatewaySettings(port=0), broker=broker_settings, namespace=namespace)
    await gateway.start()
    stopped = False
    try:
        await gateway.runtime.registry.wait_for("blocker", 5)
        url = f"{gateway.public_url}/a2a/agents/blocker"
        async with held_streams(http, url, [None]) as [(task_id, events)]:
            await asyncio.wait_for(gateway.stop(), 10)  # uvicorn would wait for the stream to end
            stopped = True
            assert [e async for e in events] == []  # the stream ended cleanly, with nothing more
    finally:
        if not stopped:
            await gateway.stop()
    record = service.tasks.get(task_id)
    assert record is not None and record.state is TaskState.working  # only the HTTP side went away
    assert blocker.cancellations == 0
