"""Raw A2A JSON-RPC over HTTP for the gateway tests: request bodies, calls and SSE reading."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx

RATE_LIMIT_HEADERS = ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "X-RateLimit-Window")
V1 = {"A2A-Version": "1.0"}


def message(text: str = "hi", **fields: Any) -> dict[str, Any]:
    """An A2A 0.3 user message."""
    return {
        "kind": "message",
        "role": "user",
        "messageId": uuid.uuid4().hex,
        "parts": [{"kind": "text", "text": text}],
        **fields,
    }


def message_v1(text: str = "hi", **fields: Any) -> dict[str, Any]:
    """An A2A 1.0 user message."""
    return {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}], **fields}


def rpc(method: str, params: Any = None, *, request_id: str | int | None = 1) -> dict[str, Any]:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


async def call(
    http: httpx.AsyncClient,
    url: str,
    method: str,
    params: Any = None,
    *,
    request_id: str | int | None = 1,
    headers: Mapping[str, str] | None = None,
) -> httpx.Response:
    """POST one JSON-RPC request; the response is returned whatever its status."""
    return await http.post(url, json=rpc(method, params, request_id=request_id), headers=dict(headers or {}))


def error_of(response: httpx.Response, request_id: str | int | None = 1) -> dict[str, Any]:
    """The JSON-RPC error object of a response, checking the envelope and the echoed id."""
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body, body
    assert body["id"] == request_id, body
    error: dict[str, Any] = body["error"]
    return error


def result_of(response: httpx.Response, request_id: str | int | None = 1) -> Any:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["id"] == request_id and "error" not in body, body
    return body["result"]


def error_info(error: dict[str, Any]) -> dict[str, Any]:
    """The ``google.rpc.ErrorInfo`` of an A2A 1.0 error (its ``data`` is an array of details)."""
    assert isinstance(error["data"], list), error
    [info] = [d for d in error["data"] if d["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"]
    assert info["domain"] == "a2a-protocol.org"
    return info


def rate_limit_headers(response: httpx.Response) -> dict[str, str]:
    """The X-RateLimit-* headers, asserting all four are there."""
    missing = [name for name in RATE_LIMIT_HEADERS if name not in response.headers]
    assert not missing, f"{response.status_code} {response.request.url} lacks {missing}"
    return {name: response.headers[name] for name in RATE_LIMIT_HEADERS}


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """``(event name, decoded data)`` for each server-sent event of a streaming response."""
    assert response.headers["content-type"].startswith("text/event-stream"), response.headers
    name, data = "message", []
    async for line in response.aiter_lines():
        if line.startswith("event:"):
            name = line.removeprefix("event:").strip()
        elif line.startswith("data:"):
            data.append(line.removeprefix("data:").strip())
        elif not line and data:
            yield name, json.loads("\n".join(data))
            name, data = "message", []


async def stream_events(
    http: httpx.AsyncClient,
    url: str,
    method: str,
    params: Any,
    *,
    request_id: str | int = "s1",
    headers: Mapping[str, str] | None = None,
) -> tuple[httpx.Response, list[tuple[str, dict[str, Any]]]]:
    """POST a streaming request and read every event until the server ends the stream."""
    async with http.stream(
        "POST", url, json=rpc(method, params, request_id=request_id), headers=dict(headers or {})
    ) as response:
        events = [event async for event in sse_events(response)]
    return response, events
