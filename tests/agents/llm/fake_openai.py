"""A fake OpenAI-compatible chat completions server on loopback, scripted by the test.

Each ``POST /v1/chat/completions`` takes the next turn of the script: a text answer, or tool
calls. It answers as the request asks: one JSON body, or server-sent chunks (``stream: true``).
A turn may also be an HTTP error status. The requests are kept for the test to inspect.
Plain asyncio: the test's own loop serves it, no web framework.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Turn:
    """One answer: ``text``, or ``tool_calls`` as ``[(name, arguments), ...]``, or an ``error`` status."""

    text: str = ""
    tool_calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    error: int | None = None
    chunk_size: int = 4
    #: What the server reports it used: prompt, completion and cached prompt tokens.
    usage: tuple[int, int, int] = (10, 5, 0)

    def usage_json(self) -> dict[str, Any]:
        prompt, completion, cached = self.usage
        return {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached},
        }


Script = Callable[[dict[str, Any]], Turn]


class FakeOpenAI:
    """``async with FakeOpenAI(script) as server:`` then point ``base_url`` at ``server.base_url``."""

    def __init__(self, script: list[Turn] | Script) -> None:
        self.script = script
        self.requests: list[dict[str, Any]] = []
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> FakeOpenAI:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def _turn(self, body: dict[str, Any]) -> Turn:
        self.requests.append(body)
        if callable(self.script):
            return self.script(body)
        return self.script[min(len(self.requests), len(self.script)) - 1]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value.strip())
                body = json.loads(await reader.readexactly(length)) if length else {}
                await self._answer(writer, body)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client went away, or the test ended (closing the server)
        finally:
            writer.close()

    async def _answer(self, writer: asyncio.StreamWriter, body: dict[str, Any]) -> None:
        turn = self._turn(body)
        model = body.get("model", "fake")
        if turn.error is not None:
            payload = json.dumps({"error": {"message": f"scripted error {turn.error}", "type": "fake"}}).encode()
            writer.write(_head(turn.error, "application/json", len(payload)) + payload)
            await writer.drain()
            return
        calls = [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(turn.tool_calls)
        ]
        finish = "tool_calls" if calls else "stop"
        if not body.get("stream"):
            message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
            if calls:
                message["tool_calls"] = calls
            payload = json.dumps(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "created": 0,
                    "model": model,
                    "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                    "usage": turn.usage_json(),
                }
            ).encode()
            writer.write(_head(200, "application/json", len(payload)) + payload)
            await writer.drain()
            return
        writer.write(_head(200, "text/event-stream", None))
        pieces = [turn.text[i : i + turn.chunk_size] for i in range(0, len(turn.text), turn.chunk_size)]
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": p} for p in pieces]
        deltas += [{"tool_calls": [{"index": i, **c}]} for i, c in enumerate(calls)]
        for delta in deltas:
            await _event(writer, _chunk(model, delta, None))
        await _event(writer, {**_chunk(model, {}, finish), "usage": turn.usage_json()})
        writer.write(b"data: [DONE]\n\n")
        await writer.drain()
        writer.close()


def _chunk(model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


async def _event(writer: asyncio.StreamWriter, data: dict[str, Any]) -> None:
    writer.write(b"data: " + json.dumps(data).encode() + b"\n\n")
    await writer.drain()


def _head(status: int, content_type: str, length: int | None) -> bytes:
    lines = [f"HTTP/1.1 {status} X", f"Content-Type: {content_type}"]
    lines.append(f"Content-Length: {length}" if length is not None else "Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()
