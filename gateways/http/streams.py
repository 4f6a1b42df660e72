"""The SSE responses of the HTTP gateway: how a stream ends (its slot given back, a stopping
gateway) and stays alive (comments on a quiet stream)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Message, Receive, Scope, Send

from gateways.http.limits import Slot

__all__ = ["KEEP_ALIVE", "EventStream", "OpenStreams"]


class OpenStreams:
    """The SSE responses being sent, so that a stopping gateway can end them: uvicorn waits for
    every open response before it stops, and a stream may wait on the mesh for minutes."""

    def __init__(self) -> None:
        self._scopes: set[anyio.CancelScope] = set()
        self.closing = False

    def add(self, scope: anyio.CancelScope) -> None:
        self._scopes.add(scope)
        if self.closing:
            scope.cancel()

    def discard(self, scope: anyio.CancelScope) -> None:
        self._scopes.discard(scope)

    def close(self) -> None:
        """End every open stream (and any that starts from now on) at its next await."""
        self.closing = True
        for scope in list(self._scopes):
            scope.cancel()


#: An SSE comment: clients ignore it; proxies see traffic on a quiet stream and keep it open.
KEEP_ALIVE = b": keep-alive\n\n"


class EventStream(StreamingResponse):
    """An SSE response that gives its context ``slot`` back however it ends: at its last event
    (before the end of the body goes out, so a client that saw the end may send again at once),
    a client that left, even before the body was started, or a stopping gateway.

    A stream quiet for ``keep_alive_s`` gets a comment line. (sse-starlette's
    ``EventSourceResponse`` does the same, but patches uvicorn's ``Server.handle_exit`` when
    imported and ends streams its own way; the slot and stop handling here need this one.)
    """

    def __init__(
        self, chunks: AsyncIterator[bytes], streams: OpenStreams, slot: Slot | None, *, keep_alive_s: float
    ) -> None:
        super().__init__(
            self._releasing(chunks),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
        self.streams = streams
        self.slot = slot
        self.keep_alive_s = keep_alive_s

    def release(self) -> None:
        if self.slot is not None:
            self.slot.release()

    async def _releasing(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            self.release()
            await chunks.aclose()  # type: ignore[attr-defined]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        progress = {"started": False, "ended": False}
        sent_at = time.monotonic()
        lock = anyio.Lock()  # a comment never goes out in the middle of an event

        async def sending(message: Message) -> None:
            nonlocal sent_at
            async with lock:
                progress["started"] = progress["started"] or message["type"] == "http.response.start"
                progress["ended"] = message["type"] == "http.response.body" and not message.get("more_body", False)
                await send(message)
                sent_at = time.monotonic()

        async def keeping_alive() -> None:
            nonlocal sent_at
            while True:
                await anyio.sleep(max(sent_at + self.keep_alive_s - time.monotonic(), 0.01))
                async with lock:
                    quiet = time.monotonic() - sent_at >= self.keep_alive_s
                    if quiet and progress["started"] and not progress["ended"]:
                        try:
                            await send({"type": "http.response.body", "body": KEEP_ALIVE, "more_body": True})
                        except OSError:  # the client left: the response itself ends on its next send
                            return
                        sent_at = time.monotonic()

        try:
            with anyio.CancelScope() as cancel:
                self.streams.add(cancel)
                pinging = asyncio.get_running_loop().create_task(keeping_alive())
                try:
                    await super().__call__(scope, receive, sending)
                finally:
                    pinging.cancel()  # not awaited: it never holds anything beyond the lock
        finally:
            self.streams.discard(cancel)
            self.release()
            await self.body_iterator.aclose()  # type: ignore[attr-defined]  # a body left mid-way
        if cancel.cancelled_caught and not progress["ended"]:
            # The gateway is stopping: end the stream cleanly (the task goes on on the mesh).
            if not progress["started"]:
                await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
