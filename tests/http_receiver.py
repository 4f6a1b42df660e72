"""A real HTTP server on loopback that records the requests it gets (push-notification tests)."""

from __future__ import annotations

import asyncio
import ssl
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from mesh.a2a import Task


@dataclass
class Received:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: bytes

    @property
    def task(self) -> Task:
        return Task.model_validate_json(self.body)


@dataclass
class Receiver:
    """Records every request; answers from ``responses`` (then 200); ``hook`` may block a request."""

    responses: deque[tuple[int, dict[str, str]]] = field(default_factory=deque)
    hook: Callable[[Received], None] | None = None
    requests: list[Received] = field(default_factory=list)
    port: int = 0
    scheme: str = "http"
    _changed: threading.Condition = field(default_factory=threading.Condition)

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"

    def answer(self, request: Received) -> tuple[int, dict[str, str]]:
        with self._changed:
            self.requests.append(request)
            response = self.responses.popleft() if self.responses else (200, {})
            self._changed.notify_all()
        if self.hook is not None:
            self.hook(request)
        return response

    async def wait_for(self, count: int) -> list[Received]:
        def wait() -> bool:
            with self._changed:
                return self._changed.wait_for(lambda: len(self.requests) >= count, timeout=30)

        assert await asyncio.to_thread(wait), f"got {len(self.requests)} of {count} requests"
        return list(self.requests)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        status, extra = self.server.receiver.answer(Received("POST", self.path, headers, body))
        self.send_response(status)
        for name, value in extra.items():
            self.send_header(name, value)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: Receiver


def serve(receiver: Receiver, tls: ssl.SSLContext | None = None) -> Iterator[Receiver]:
    server = _Server(("127.0.0.1", 0), _Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
        receiver.scheme = "https"
    server.receiver = receiver
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), name="push-receiver", daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
