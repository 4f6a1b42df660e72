"""The HTTP edge against hostile input (issue 10, point 6): bodies that are not JSON, clients that
send their headers slowly, agents (or forgers on the reply topic) that answer garbage, and a
health route that tells strangers nothing."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import httpx
import pytest

from mesh.transport import InboundMessage, Transport
from tests.agents.service_agents import Echo
from tests.conftest import ServeAgent, TransportFactory
from tests.gateways.conftest import StartGateway
from tests.gateways.jsonrpc_http import V1, call, error_of, message, message_v1, result_of, rpc, stream_events
from tests.support import publish_stale_card, within
from topics import get_agent_request_topic

# ---------------------------------------------------------------- content type


@pytest.mark.parametrize(
    "content_type",
    [None, "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml"],
)
async def test_a_body_that_is_not_json_is_415_and_never_reaches_an_agent(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, content_type: str | None
) -> None:
    echo = await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    body = json.dumps(rpc("message/send", {"message": message()})).encode()
    headers = {"Content-Type": content_type} if content_type else {}
    for url in (f"{gateway.public_url}/a2a", f"{gateway.public_url}/a2a/agents/echo"):
        response = await http.post(url, content=body, headers=headers)
        assert response.status_code == 415, response.text
        error = error_of(response, None)
        assert error["code"] == -32005 and error["data"]["errorType"] == "UnsupportedMediaType"
        assert error["data"]["accepted"] == ["application/json", "application/a2a+json"]
        assert "application/json" in error["message"]
    assert len(echo.tasks) == 0


@pytest.mark.parametrize("content_type", ["application/json", "application/a2a+json", "Application/JSON;charset=UTF-8"])
async def test_json_bodies_are_served(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient, content_type: str
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo")
    body = json.dumps(rpc("message/send", {"message": message("json")})).encode()
    response = await http.post(f"{gateway.public_url}/a2a", content=body, headers={"Content-Type": content_type})
    assert result_of(response)["status"]["state"] == "completed"


# ---------------------------------------------------------------- slow clients


async def _closed_after(reader: asyncio.StreamReader, trickle: Callable[[], None], limit_s: float) -> float:
    """Seconds until the server closes the connection while ``trickle`` sends a byte every 0.2 s."""
    started = time.monotonic()
    async with asyncio.timeout(limit_s):
        while True:
            try:
                data = await asyncio.wait_for(reader.read(1024), 0.2)
            except TimeoutError:
                trickle()
                continue
            if not data:  # EOF: the server closed
                return time.monotonic() - started


async def test_a_client_that_sends_its_headers_slowly_is_closed(start_gateway: StartGateway) -> None:
    gateway = await start_gateway(read_timeout_s=1)
    head = b"POST /a2a HTTP/1.1\r\nHost: x\r\n" + b"X-Slow: " + b"a" * 200
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    sent = iter(head)
    try:
        # One byte every 0.2 s: a connection that is never silent, whose head never ends.
        elapsed = await _closed_after(reader, lambda: writer.write(bytes([next(sent)])), within(2))
    finally:
        writer.close()
    assert elapsed >= 0.9, elapsed  # by the read timeout, not before it

    # A connection that sends nothing at all is closed too.
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    try:
        elapsed = await _closed_after(reader, lambda: None, within(2))
    finally:
        writer.close()
    assert elapsed >= 0.9, elapsed


async def test_a_body_that_comes_slowly_is_408(start_gateway: StartGateway) -> None:
    gateway = await start_gateway(read_timeout_s=1, default_agent=None)
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    writer.write(b"POST /a2a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
    try:
        async with asyncio.timeout(5):
            answer = await reader.read()  # the server answers, then closes
    finally:
        writer.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408"), answer
    assert json.loads(body)["error"]["data"]["errorType"] == "RequestTimeout"


async def test_a_keep_alive_connection_that_stays_quiet_after_a_request_is_closed(start_gateway: StartGateway) -> None:
    gateway = await start_gateway(read_timeout_s=1, keep_alive_s=1)
    reader, writer = await asyncio.open_connection("127.0.0.1", gateway.port)
    writer.write(b"GET /a2a/health HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200")
        length = int(next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))[15:])
        await reader.readexactly(length)
        writer.write(b"GET /a2a/he")  # the next request's head starts, and never ends
        await _closed_after(reader, lambda: None, within(2))  # closed: else the wait runs out
    finally:
        writer.close()


# ---------------------------------------------------------------- hostile answers

DEEP = 100_000
HOSTILE_ANSWERS = {
    "not-json": b"\x00\xffnot json at all",
    "deep-json": b'{"jsonrpc":"2.0","id":"x","result":' + b"[" * DEEP + b"]" * DEEP + b"}",
    "deep-data-part": (
        b'{"jsonrpc":"2.0","id":"x","result":{"kind":"message","role":"agent","messageId":"m",'
        b'"parts":[{"kind":"data","data":{"a":' + b"[" * 900 + b"]" * 900 + b"}}]}}"
    ),
    "deep-task": (
        b'{"jsonrpc":"2.0","id":"x","result":{"kind":"task","id":"t","contextId":"c",'
        b'"status":{"state":"completed"},"metadata":{"a":' + b"[" * 900 + b"]" * 900 + b"}}}"
    ),
    "wrong-shape": b'{"jsonrpc":"2.0","id":"x","result":{"kind":"task","id":5,"status":"done"}}',
    "bare-string": b'{"jsonrpc":"2.0","id":"x","result":"hello"}',
    "bad-error": b'{"jsonrpc":"2.0","id":"x","error":{"code":"abc","message":5}}',
    "array": b"[1,2,3]",
}


async def hostile_agent(transport: Transport, namespace: str, answer: bytes) -> None:
    """An agent 'evil' (a card, and a subscriber on its request topic) that answers every request
    with ``answer``, on its status topic (streams) and its reply topic: what a forger who reads
    the request's reply topic and correlation data can publish too."""
    await publish_stale_card(transport, namespace, "evil")

    def reply(request: InboundMessage) -> None:
        props = request.properties
        for topic in (props.status_topic, props.reply_to):
            if topic:
                out = type(props)(correlation_data=props.correlation_data)
                asyncio.get_running_loop().create_task(transport.publish(topic, answer, properties=out))

    await transport.subscribe(get_agent_request_topic(namespace, "evil"), reply)


@pytest.mark.parametrize("case", list(HOSTILE_ANSWERS))
async def test_hostile_answers_become_json_rpc_errors_never_500(
    make_transport: TransportFactory,
    start_gateway: StartGateway,
    http: httpx.AsyncClient,
    namespace: str,
    case: str,
) -> None:
    await hostile_agent(await make_transport(), namespace, HOSTILE_ANSWERS[case])
    gateway = await start_gateway(default_agent="evil")
    url = f"{gateway.public_url}/a2a"
    versions = [
        ({}, "message/send", "message/stream", message),
        (V1, "SendMessage", "SendStreamingMessage", message_v1),
    ]
    for headers, send, stream, msg in versions:
        # 0.3 relays well-formed JSON-RPC results unvalidated (the gateway's speed); 1.0 translates them.
        relayed = not headers and case in ("bare-string", "wrong-shape")
        response = await call(http, url, send, {"message": msg()}, headers=headers)
        assert response.status_code == 200, (case, send, response.text[:300])
        body = response.json()
        assert ("result" in body) is relayed, body
        if not relayed:
            assert body["error"]["code"] in (-32006, -32603), body

        response, events = await stream_events(http, url, stream, {"message": msg()}, headers=headers)
        assert response.status_code == 200, (case, stream)
        assert events, (case, stream)
        if not relayed:
            assert events[-1][0] == "error", (case, stream, events)
            assert events[-1][1]["error"]["code"] in (-32006, -32603), events[-1]

    # HTTP+JSON: a google.rpc.Status with 502 (the agent failed, not the gateway), never 500
    rest = f"{gateway.public_url}/a2a/rest"
    response = await http.post(f"{rest}/message:send", json={"message": message_v1()}, headers=V1)
    assert response.status_code == 502, (case, response.text[:300])
    assert response.json()["error"]["status"] == "INTERNAL"
    async with http.stream("POST", f"{rest}/message:stream", json={"message": message_v1()}, headers=V1) as streamed:
        lines = [line async for line in streamed.aiter_lines()]
    assert streamed.status_code == 200 and "event: error" in lines, (case, lines)


# ---------------------------------------------------------------- health


async def test_health_tells_strangers_only_up_or_down(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    token = {"Authorization": "Bearer health-token-1"}
    auth = {"mode": "bearer", "tokens": ["health-token-1"]}
    closed = await start_gateway(id="closed", default_agent="echo", auth=auth)
    assert (await http.get(f"{closed.public_url}/a2a/health")).json() == {"status": "ok"}
    assert (await http.get(f"{closed.public_url}/a2a/health", headers={"Authorization": "Bearer wrong"})).json() == {
        "status": "ok"
    }
    detailed = (await http.get(f"{closed.public_url}/a2a/health", headers=token)).json()
    assert detailed["namespace"] and detailed["broker"]["connected"] is True and detailed["agents"] == 1

    open_gateway = await start_gateway(id="open", default_agent="echo")
    assert (await http.get(f"{open_gateway.public_url}/a2a/health")).json() == {"status": "ok"}
    shown = await start_gateway(id="shown", default_agent="echo", health_details=True)
    assert "broker" in (await http.get(f"{shown.public_url}/a2a/health")).json()


async def test_rest_refusals_are_google_rpc_status_bodies(
    serve_agent: ServeAgent, start_gateway: StartGateway, http: httpx.AsyncClient
) -> None:
    await serve_agent(Echo())
    gateway = await start_gateway(default_agent="echo", auth={"mode": "bearer", "tokens": ["rest-token-1"]})
    url = f"{gateway.public_url}/a2a/agents/echo/rest/message:send"
    body = {"message": message_v1("rest")}
    refused = await http.post(url, json=body)
    assert refused.status_code == 401 and refused.headers["WWW-Authenticate"].startswith("Bearer")
    error = refused.json()["error"]
    assert error["code"] == 401 and error["status"] == "UNAUTHENTICATED"
    assert error["details"][0]["reason"] == "AUTHENTICATION_REQUIRED"
    token = {"Authorization": "Bearer rest-token-1"}
    form = await http.post(url, content=b"message=hi", headers={**token, "Content-Type": "text/plain"})
    assert form.status_code == 415 and form.json()["error"]["status"] == "INVALID_ARGUMENT"
    missing = await http.get(f"{gateway.public_url}/a2a/agents/echo/rest/tasks/nope", headers=token)
    assert missing.status_code == 404 and missing.json()["error"]["message"] == "Task not found"
    sent = await http.post(url, json=body, headers=token)
    assert sent.status_code == 200 and sent.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
