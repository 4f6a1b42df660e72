"""A minimal keep-alive HTTP/1.1 JSON client, so benchmarks measure servers, not client libraries."""

from __future__ import annotations

import asyncio
import json
from types import TracebackType
from typing import Any


class HttpPool:
    """``size`` persistent connections; each request borrows one (requests need Content-Length)."""

    def __init__(self, host: str, port: int, *, size: int) -> None:
        self.host, self.port, self.size = host, port, size
        self._idle: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
        self._all: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> HttpPool:
        for _ in range(self.size):
            reader, writer = await asyncio.open_connection(self.host, self.port)
            self._all.append(writer)
            self._idle.put_nowait((reader, writer))
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        for writer in self._all:
            writer.close()

    async def post_json(self, path: str, body: Any, headers: dict[str, str] | None = None) -> tuple[int, Any]:
        payload = json.dumps(body).encode()
        head = [
            f"POST {path} HTTP/1.1",
            f"Host: {self.host}:{self.port}",
            "Content-Type: application/json",
            f"Content-Length: {len(payload)}",
        ]
        head += [f"{name}: {value}" for name, value in (headers or {}).items()]
        reader, writer = await self._idle.get()
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
            status = int((await reader.readline()).split()[1])
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            data = await reader.readexactly(length)
        finally:
            self._idle.put_nowait((reader, writer))
        return status, json.loads(data) if data else None
