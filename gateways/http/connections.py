"""Slow clients at the socket: a deadline for the request head, which uvicorn does not have.

uvicorn closes a connection idle *between* requests after ``timeout_keep_alive``, but that
timer starts only once a response is complete and any byte received cancels it: a client
that opens a connection, or sends its headers one byte at a time, holds it for ever (the
slow-header attack). :func:`protocol_with_head_deadline` makes uvicorn's h11 protocol close a
connection whose request line and headers are not all there ``timeout_s`` after it opened
or after its previous response ended. The body has its own deadline in the endpoint
(:func:`gateways.http.serving.read_body`), since only there is an answer (408) still possible.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["protocol_with_head_deadline"]


class _HeadDeadlineProtocol(H11Protocol):
    head_timeout_s = 10.0  # set per gateway by protocol_with_head_deadline
    _head_deadline: asyncio.TimerHandle | None = None
    _head_due = 0.0  # loop time by which the pending request head must be complete

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_deadline()  # the next request's head is due in time too

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_head_deadline()
        super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        # One timer per connection, moved lazily: a response only pushes the due time back, and
        # the timer, when it fires early, sleeps on until then. A timer armed and cancelled per
        # request costs two operations on the loop's heap, which holds one per connection.
        if self.transport.is_closing():
            self._disarm_head_deadline()
            return
        self._head_due = self.loop.time() + self.head_timeout_s
        if self._head_deadline is None:
            self._head_deadline = self.loop.call_at(self._head_due, self._head_too_slow)

    def _disarm_head_deadline(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _head_too_slow(self) -> None:
        self._head_deadline = None
        if self._head_due > self.loop.time() + _EARLY_S:  # re-armed since: not due yet
            self._head_deadline = self.loop.call_at(self._head_due, self._head_too_slow)
            return
        # IDLE: the client has not completed a request head since the deadline was armed (a
        # request being read or answered has moved on to SEND_BODY or DONE).
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


# The loop runs a timer up to its clock resolution early: that is on time.
_EARLY_S = 0.001


def protocol_with_head_deadline(timeout_s: float) -> type[Any]:
    """uvicorn's h11 protocol class (``uvicorn.Config(http=...)``) with a head deadline of ``timeout_s``."""
    return type("HeadDeadlineProtocol", (_HeadDeadlineProtocol,), {"head_timeout_s": timeout_s})
