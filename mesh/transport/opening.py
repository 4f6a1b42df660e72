"""Opening a plain TCP connection to the broker on the asyncio loop, without a thread.

paho's connect is blocking (``socket.create_connection``), so it ran in the default executor:
at the start of 1,000 agents, 1,000 connects queued on a handful of threads that fought the
loop for the GIL (a third of the start's CPU samples). On plain TCP the connect is the only
step that blocks: :func:`open_tcp` makes it on the loop (``loop.sock_connect``), and paho gets
the connected socket (:attr:`~mesh.transport.pahoclient.FastClient.preconnected`) and writes
its CONNECT at once. TLS keeps the thread: its handshake blocks inside paho.

The broker's address is looked up once for the agents that start together (one lookup in a
thread, kept :data:`_ADDRESS_TTL_S`), not once per connection; a later reconnect looks it up
again, so a broker that moved is found.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from typing import Any

__all__ = ["open_tcp"]

_ADDRESS_TTL_S = 10.0
_Address = tuple[int, int, int, Any]  # family, type, protocol, the address sock_connect takes
_addresses: dict[tuple[str, int], tuple[float, list[_Address]]] = {}


async def _resolve(loop: asyncio.AbstractEventLoop, host: str, port: int) -> list[_Address]:
    key = (host, port)
    cached = _addresses.get(key)
    now = time.monotonic()
    if cached is not None and cached[0] > now:
        return cached[1]
    try:  # an IP address needs no lookup (and no thread)
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
    except socket.gaierror:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[_Address] = [(family, kind, proto, address) for family, kind, proto, _name, address in infos]
    _addresses[key] = (now + _ADDRESS_TTL_S, found)
    return found


async def open_tcp(host: str, port: int, timeout_s: float) -> socket.socket:
    """A non-blocking TCP socket connected to ``host:port`` (TCP_NODELAY set), trying each address
    as ``socket.create_connection`` does; the last address's error if none answers."""
    loop = asyncio.get_running_loop()
    error: OSError | None = None
    for family, kind, proto, address in await _resolve(loop, host, port):
        sock = socket.socket(family, kind, proto)
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            async with asyncio.timeout(timeout_s):
                await loop.sock_connect(sock, address)
        except OSError as exc:  # TimeoutError included
            sock.close()
            # asyncio says "Connect call failed (address)"; the caller explains the plain reason.
            error = OSError(exc.errno, os.strerror(exc.errno)) if exc.errno else exc
            continue
        except BaseException:  # cancelled: the socket is ours to close
            sock.close()
            raise
        return sock
    raise error if error is not None else OSError(f"no address found for {host}:{port}")
