"""Backpressure at the concurrency bound: requests wait in the broker's queue, not refused.

An agent runs at most ``max_concurrent_tasks`` tasks. A request that would start one more is
*held*: neither answered nor acknowledged. Once ``max_unacked_requests`` (the Receive Maximum
the agent announces) are held, the agent stops reading its connection, so the rest of a burst
waits in the broker's queue (``max_queued_messages``). Reading is paused too, and not left to
Receive Maximum alone, because Mosquitto 2.0.11 sends up to a Receive Maximum's worth of new
messages for *every* PUBACK (measured: 5 held with Receive Maximum 5, then 5 more per ack).
When a task ends, the oldest held request is dispatched again (and acknowledged once stored, as
usual); reading resumes below the bound. While paused, reading resumes briefly every
:data:`PEEK_S` so that keepalive answers (PINGRESP) are read and the connection stays up.

"Busy" (-32050) is answered only to a request that cannot wait:

- its Message Expiry (the caller's timeout) runs out while it is held (the error's data says
  ``"expired": true``: a profile requester gets the EMQX profile's -32003 ``request_expired``,
  :func:`mesh.profile.emqx.profile_error`);
- twice the bound is held already (what one read brought in beyond it);
- the agent delegates (calls of its own are open) and the bound is held: its reading is not
  paused then, since the answers to its calls come on the same connection and are what frees
  places; half the Receive Maximum is its bound, so those answers keep quota to arrive.

Callers retry "busy" with jittered backoff within their deadline (:mod:`mesh.calls`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable

from mesh.a2a import AgentBusy
from mesh.transport import InboundMessage

__all__ = ["PEEK_S", "SWEEP_INTERVAL_S", "Admission", "AtCapacity"]

log = logging.getLogger(__name__)

#: How often held requests are checked for expiry (and a paused agent for delegation).
SWEEP_INTERVAL_S = 0.25
#: While paused, reading resumes this often for one read (keepalive answers must get through).
PEEK_S = 2.0
_PAUSE_REASON = "at max_concurrent_tasks"
# A held request is answered busy this long before its expiry, so the answer still finds its caller.
_EXPIRY_MARGIN_S = 0.25


class AtCapacity(Exception):  # a signal, not an error: the request waits
    """Raised by a method that would start a task while the agent runs as many as it may."""


class Admission:
    """The requests one agent holds while at its bound, oldest first (see the module doc).

    ``dispatch(message)`` runs a request and returns True if it was deferred again;
    ``refuse(message, error)`` answers it with an error; ``acknowledge(message)`` lets the
    broker forget it once stored; ``at_capacity()`` and ``delegating()`` read the agent's state.
    """

    def __init__(
        self,
        agent_name: str,
        *,
        max_concurrent: int,
        receive_maximum: int,
        dispatch: Callable[[InboundMessage], bool],
        refuse: Callable[[InboundMessage, AgentBusy], object],
        acknowledge: Callable[[InboundMessage], None],
        at_capacity: Callable[[], bool],
        delegating: Callable[[], bool] = lambda: False,
        pause: Callable[[str], None] = lambda _reason: None,
        resume: Callable[[str], None] = lambda _reason: None,
    ) -> None:
        self.agent_name = agent_name
        self.max_concurrent = max_concurrent
        self.receive_maximum = receive_maximum
        self._dispatch = dispatch
        self._refuse = refuse
        self._acknowledge = acknowledge
        self._at_capacity = at_capacity
        self._delegating = delegating
        self._pause = pause
        self._resume = resume
        self._paused_at: float | None = None
        # (message, monotonic deadline or None), oldest first.
        self._held: deque[tuple[InboundMessage, float | None]] = deque()
        self._sweep: asyncio.TimerHandle | None = None
        self._releasing = False
        #: Requests held so far, and answered busy because they could not wait.
        self.held_total = 0
        self.refused_total = 0

    @property
    def held(self) -> int:
        """How many requests wait for a place now."""
        return len(self._held)

    @property
    def limit(self) -> int:
        """How many requests are held before reading pauses (or, delegating, before "busy")."""
        if self._delegating():
            return max(1, self.receive_maximum // 2)
        return self.receive_maximum

    @property
    def paused(self) -> bool:
        """Whether the agent stopped reading its connection."""
        return self._paused_at is not None

    def hold(self, message: InboundMessage) -> None:
        """Keep ``message`` (unacknowledged) until a place frees, or answer busy if it cannot wait."""
        limit = self.limit
        held = len(self._held)
        if held >= 2 * limit or (held >= limit and self._delegating()):
            self._busy(message, "holds as many waiting requests as it may")
            return
        expiry = message.properties.message_expiry_s
        deadline = time.monotonic() + expiry - _EXPIRY_MARGIN_S if expiry is not None else None
        self._held.append((message, deadline))
        self.held_total += 1
        if len(self._held) >= limit and self._paused_at is None and not self._delegating():
            self._paused_at = time.monotonic()
            self._pause(_PAUSE_REASON)
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(SWEEP_INTERVAL_S, self._tick)

    def _resume_reading(self) -> None:
        if self._paused_at is not None:
            self._paused_at = None
            self._resume(_PAUSE_REASON)

    def release(self) -> None:
        """A place freed: dispatch the oldest held requests while places are free."""
        if self._releasing:
            return  # a dispatch that ended a task at once: the loop below goes on
        self._releasing = True
        try:
            while self._held and not self._at_capacity():
                message, deadline = self._held.popleft()
                if deadline is not None and time.monotonic() >= deadline:
                    self._busy(message, "held it until its Message Expiry", expired=True)
                    continue
                if self._dispatch(message):
                    self._held.appendleft((message, deadline))
                    break
                self._acknowledge(message)
        finally:
            self._releasing = False
        if len(self._held) < self.limit:
            self._resume_reading()

    def forget_redelivered(self) -> int:
        """The session came back (``session_present``): the broker redelivers every unacknowledged
        QoS 1 request, so drop the held copies; QoS 0 ones stay. Returns how many were dropped."""
        kept = deque(entry for entry in self._held if entry[0].qos == 0)
        dropped = len(self._held) - len(kept)
        self._held = kept
        if len(kept) < self.limit:
            self._resume_reading()
        return dropped

    def refuse_all(self, why: str) -> None:
        """Answer every held request busy (a replica stopping: another one takes the retry)."""
        while self._held:
            message, _deadline = self._held.popleft()
            self._busy(message, why)

    def close(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        self._resume_reading()

    def _tick(self) -> None:
        """Answer busy what expired; let a paused agent read (delegating, or to peek)."""
        self._sweep = None
        now = time.monotonic()
        kept: deque[tuple[InboundMessage, float | None]] = deque()
        for message, deadline in self._held:
            if deadline is not None and now >= deadline:
                self._busy(message, "held it until its Message Expiry", expired=True)
            else:
                kept.append((message, deadline))
        self._held = kept
        paused_at = self._paused_at
        if paused_at is not None and (len(kept) < self.limit or self._delegating() or now - paused_at >= PEEK_S):
            self._resume_reading()  # hold() pauses again at the next request if still full
        if kept:
            self._sweep = asyncio.get_running_loop().call_later(SWEEP_INTERVAL_S, self._tick)

    def _busy(self, message: InboundMessage, why: str, *, expired: bool = False) -> None:
        self.refused_total += 1
        limit = self.max_concurrent
        data: dict[str, object] = {"maxConcurrentTasks": limit}
        if expired:
            data["expired"] = True
        error = AgentBusy(
            f"agent {self.agent_name!r} runs {limit} tasks, its maximum (max_concurrent_tasks), and {why}; "
            "send the request again later",
            data=data,
        )
        self._refuse(message, error)
        self._acknowledge(message)
