"""Running a paho client's socket from the asyncio loop instead of paho's network thread.

The socket is registered with the loop: readable -> ``loop_read``; writable (only while paho
holds bytes it could not send) -> ``loop_write``; a 1 s timer -> ``loop_misc`` (keepalive).
Everything runs on the loop thread, so paho's callbacks never race the rest of the transport.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

import paho.mqtt.client as paho

__all__ = ["SocketDriver"]

# Linux only; elsewhere every publish is sent at once.
_TCP_CORK: int | None = getattr(socket, "TCP_CORK", None)


class SocketDriver:
    """Feeds one paho client's socket events from an asyncio loop."""

    def __init__(self, client: paho.Client, loop: asyncio.AbstractEventLoop) -> None:
        self._client = client
        self._loop = loop
        self.sock: Any = None
        # The loop watches the socket's descriptor, not the object: asyncio formats the repr of an
        # object it has not seen yet (two syscalls), for every connection a start of 1,000 opens.
        self._fd = -1
        self._writer_registered = False
        self._corked = False
        # Inside loop_read: what paho's callbacks publish stays queued (paho writes nothing
        # while it runs a callback); _on_readable sends it when the read is done.
        self._reading = False
        self._misc_timer: asyncio.TimerHandle | None = None
        # Why reading is paused (handlers saturated, the owner's backlog...): none, it reads.
        self._paused_for: set[str] = set()

    def attach(self, sock: Any) -> None:
        """Start driving ``sock`` (paho's socket of a new connection)."""
        self.sock = sock
        self._fd = sock.fileno()
        if not self._paused_for:
            self._loop.add_reader(self._fd, self._on_readable)
        self.sync_writer()
        self._misc_timer = self._loop.call_later(1.0, self._on_misc)

    def detach(self) -> None:
        """Stop watching the socket (closed, or about to be)."""
        if self.sock is not None:
            self._loop.remove_reader(self._fd)
            self._loop.remove_writer(self._fd)
            self.sock = None
        self._writer_registered = False
        if self._misc_timer is not None:
            self._misc_timer.cancel()
            self._misc_timer = None

    def pause_reading(self, reason: str) -> None:
        """Stop reading the socket (writes and keepalive go on) until every reason is lifted."""
        if not self._paused_for:
            self._paused_for.add(reason)
            self._set_read_paused(True)
            if self.sock is not None:
                self._loop.remove_reader(self._fd)
        self._paused_for.add(reason)

    def resume_reading(self, reason: str) -> None:
        """Lift ``reason``; reading resumes once no reason is left."""
        if reason in self._paused_for:
            self._paused_for.discard(reason)
            if not self._paused_for:
                self._set_read_paused(False)
                if self.sock is not None:
                    self._loop.add_reader(self._fd, self._on_readable)
                    # A read stopped midway may have left packets in paho's or TLS's buffers.
                    self._loop.call_soon(self._read_if_attached)

    def _set_read_paused(self, paused: bool) -> None:
        # FastClient stops its read loop between packets (pahoclient); stock paho has no such flag.
        if hasattr(self._client, "read_paused"):
            self._client.read_paused = paused

    def _read_if_attached(self) -> None:
        if self.sock is not None and not self._paused_for:
            self._on_readable()

    def cork(self) -> None:
        """Hold back small writes until the end of this loop iteration (Linux TCP_CORK).

        paho writes every packet with its own send(); with TCP_NODELAY each becomes a
        segment whose loopback delivery the sender pays for. Corked, everything written in
        one pass of the event loop leaves as one segment when the cork is pulled.
        """
        sock = self._cork_until_next_pass()
        if sock is not None:
            self._loop.call_soon(self._uncork, sock)

    def _cork_until_next_pass(self) -> Any:
        """Cork now; the caller pulls the cork (``_uncork``) with the socket returned, or None
        when it was already corked (its pull is scheduled) or corking is unavailable."""
        sock = self.sock
        if self._corked or sock is None or _TCP_CORK is None:
            return None
        sock.setsockopt(socket.IPPROTO_TCP, _TCP_CORK, 1)
        self._corked = True
        return sock

    def sync_writer(self) -> None:
        """Watch the socket for writability only while paho has bytes it could not send."""
        sock = self.sock
        if sock is None:
            return
        wants = self._client.want_write()
        if wants and not self._writer_registered and not self._reading:
            self._loop.add_writer(self._fd, self._on_writable)
            self._writer_registered = True
        elif not wants and self._writer_registered:
            self._loop.remove_writer(self._fd)
            self._writer_registered = False

    def _uncork(self, sock: Any) -> None:
        self._corked = False
        if sock is self.sock:
            sock.setsockopt(socket.IPPROTO_TCP, _TCP_CORK, 0)

    def _on_readable(self) -> None:
        # PUBACKs paho writes while reading go out together, and only after the callbacks this
        # read makes ready (a caller's answer, a handler's first step) have run: a woken caller
        # does not wait behind the acknowledgement's transmission, and what a handler sends in
        # its first step leaves in the same segment as the PUBACK.
        pull_after = self._cork_until_next_pass()
        try:
            self._read()
        finally:  # whatever the read raised, the cork is pulled (or later writes would wait 200 ms)
            if pull_after is not None:
                self._loop.call_soon(self._uncork, pull_after)

    def _read(self) -> None:
        client = self._client
        self._reading = True
        try:
            client.loop_read()
        finally:
            self._reading = False
        # What the handlers published during the read (an answer sent from on_message) goes
        # now, in the same corked segment as the PUBACKs, rather than after a wait for
        # writability (two epoll_ctl calls and one more loop pass per message).
        if self.sock is not None and client.want_write():
            client.loop_write()
        sock = self.sock
        # TLS may hold decrypted bytes that select() cannot see.
        if sock is not None and isinstance(sock, ssl.SSLSocket) and sock.pending():
            self._loop.call_soon(self._on_readable)
        self.sync_writer()

    def _on_writable(self) -> None:
        self._client.loop_write()
        self.sync_writer()

    def _on_misc(self) -> None:
        # Keepalive: paho sends PINGREQ and notices a silent broker here.
        if self._client.loop_misc() == paho.MQTT_ERR_SUCCESS and self.sock is not None:
            self.sync_writer()
            self._misc_timer = self._loop.call_later(1.0, self._on_misc)
