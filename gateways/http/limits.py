"""How much a client may ask: rate, concurrency, size and time limits at the HTTP edge.

::

    decision = rate_limiter.check(principal.name)  # every request, allowed or not
    response_headers.update(decision.headers())
    decision.raise_if_refused()  # EdgeError -32003 / 429
    check_body_size(declared_or_read_length, edge.limits)  # EdgeError -32600 / 413
    with concurrency.requests.acquire(principal.name):  # EdgeError -32051 / 429 when full
        check_message_limits(params["message"], edge.limits)  # mesh.limits: InvalidParams naming the part
        timeout = request_timeout(request.headers, edge.timeouts, streaming=False)

Everything here is synchronous inside one event loop (no awaits between a check and its
update), so no locks are needed; nothing waits: a full limit refuses at once.
"""

from __future__ import annotations

import math
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from .protection import (
    ConcurrencyConfig,
    EdgeError,
    RateLimitConfig,
    TimeoutConfig,
    get_header,
    invalid_header,
    payload_too_large,
    rate_limited,
    resource_exhausted,
)

TIMEOUT_HEADER = "X-A2A-Timeout"

Clock = Callable[[], float]

# ---------------------------------------------------------------------------------- rate


@dataclass(frozen=True, slots=True)
class RateDecision:
    """The outcome of one :meth:`RateLimiter.check`; its headers go on every response."""

    allowed: bool
    limit: int  #: requests per window
    remaining: int  #: requests the client may send right now
    reset: int  #: epoch seconds when the client's allowance is whole again
    window: float  #: seconds
    retry_after: int | None  #: seconds until one more request is allowed (refused only)

    def headers(self) -> dict[str, str]:
        """The ``X-RateLimit-*`` headers, plus ``Retry-After`` when refused."""
        headers = {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset),
            "X-RateLimit-Window": f"{self.window:.0f}" if float(self.window).is_integer() else str(self.window),
        }
        if self.retry_after is not None:
            headers["Retry-After"] = str(self.retry_after)
        return headers

    def raise_if_refused(self) -> None:
        """Raise the rate-limited :class:`EdgeError` (-32003, HTTP 429, with headers) if refused."""
        if not self.allowed:
            raise rate_limited(self.limit, self.window, self.retry_after or 1, headers=self.headers())


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """A token bucket per client key: ``burst`` tokens (default ``requests``), refilled at
    ``requests / window_s`` per second; a request takes one token.

    A token bucket rather than a fixed window: no double burst at a window edge, and its
    state is two numbers per client, updated in O(1). Clients are kept in least-recently-seen
    order; each check first forgets the clients idle long enough to have a full bucket again
    (forgetting them changes nothing) and, past ``max_clients``, the least recently seen one
    (which then starts again with a full bucket: memory stays bounded at that price).

    ``clock`` measures intervals (monotonic); ``wall_clock`` dates ``reset`` (epoch seconds).
    """

    def __init__(
        self, config: RateLimitConfig, *, clock: Clock = time.monotonic, wall_clock: Clock = time.time
    ) -> None:
        self.config = config
        self.capacity = float(config.burst or config.requests)
        self.rate = config.requests / config.window_s  # tokens per second
        self._idle_after = self.capacity / self.rate  # an empty bucket is full again after this
        self._clock, self._wall_clock = clock, wall_clock
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    def __len__(self) -> int:
        """Clients tracked now."""
        return len(self._buckets)

    def check(self, client_key: str) -> RateDecision:
        """Take one request from ``client_key``'s allowance; the decision says whether it had one."""
        now = self._clock()
        self._forget_idle(now)
        bucket = self._buckets.pop(client_key, None)
        if bucket is None:
            tokens = self.capacity
        else:  # max(): a clock that steps back must not drain the bucket
            tokens = min(self.capacity, bucket.tokens + max(0.0, now - bucket.updated) * self.rate)
        allowed = tokens >= 1.0
        if allowed:
            tokens -= 1.0
        self._buckets[client_key] = _Bucket(tokens, now)
        if len(self._buckets) > self.config.max_clients:
            self._buckets.popitem(last=False)
        wall = self._wall_clock()
        return RateDecision(
            allowed=allowed,
            limit=self.config.requests,
            remaining=math.floor(tokens),
            reset=math.ceil(wall + (self.capacity - tokens) / self.rate),
            window=self.config.window_s,
            retry_after=None if allowed else max(1, math.ceil((1.0 - tokens) / self.rate)),
        )

    def _forget_idle(self, now: float) -> None:
        # Oldest first, and every bucket idle this long is full: amortized O(1) per check.
        while self._buckets:
            oldest = next(iter(self._buckets.values()))
            if now - oldest.updated < self._idle_after:
                return
            self._buckets.popitem(last=False)


# ---------------------------------------------------------------------------------- concurrency


class Slots:
    """At most ``limit`` holders per key at once; a full key refuses at once with -32051."""

    def __init__(self, limit: int, *, resource: str, refusal: Callable[[str, int], str]) -> None:
        self.limit = limit
        self.resource = resource
        self._refusal = refusal
        self._held: dict[str, int] = {}  # only keys with a holder: memory follows the load

    def in_use(self, key: str) -> int:
        """Slots of ``key`` held now."""
        return self._held.get(key, 0)

    def __len__(self) -> int:
        """Keys holding at least one slot."""
        return len(self._held)

    def acquire(self, key: str) -> Slot:
        """Take a slot of ``key`` or raise :class:`EdgeError` (-32051, HTTP 429); release it once
        done, or use it as a context manager (``with slots.acquire(key):``)."""
        count = self._held.get(key, 0)
        if count >= self.limit:
            raise resource_exhausted(self._refusal(key, self.limit), resource=self.resource, limit=self.limit)
        self._held[key] = count + 1
        return Slot(self, key)

    def _release(self, key: str) -> None:
        count = self._held[key] - 1
        if count:
            self._held[key] = count
        else:
            del self._held[key]


class Slot:
    """One held slot; :meth:`release` is idempotent, so every path that ends its work may call it.
    As a context manager it is released when the block ends."""

    __slots__ = ("_held", "_owner", "key")

    def __init__(self, owner: Slots, key: str) -> None:
        self._owner, self.key, self._held = owner, key, True

    @property
    def held(self) -> bool:
        """Whether the slot is still held."""
        return self._held

    def release(self) -> None:
        """Give the slot back (again: nothing happens)."""
        if self._held:
            self._held = False
            self._owner._release(self.key)

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class ConcurrencyLimits:
    """JAF's concurrency limits: ``requests`` per client key, ``contexts`` per contextId.

    The HTTP layer holds ``requests`` for the whole HTTP exchange (an SSE stream included)
    and a ``contexts`` slot from sending a task to the mesh until the task is terminal or
    interrupted (input-required): a :class:`Slot` kept with the task, released on its last
    status. A request without a contextId starts a new context and needs no slot.
    """

    def __init__(self, config: ConcurrencyConfig) -> None:
        self.config = config
        self.requests = Slots(
            config.max_requests_per_client,
            resource="requestsPerClient",
            refusal=lambda key, limit: (
                f"client {key!r} already has {limit} requests in flight, the limit "
                "(concurrency.max_requests_per_client); wait for one to finish, then retry"
            ),
        )
        self.contexts = Slots(
            config.max_tasks_per_context,
            resource="tasksPerContext",
            refusal=lambda key, limit: (
                f"context {key!r} already has {limit} unfinished tasks, the limit "
                "(concurrency.max_tasks_per_context); wait for one to finish or cancel one, then retry"
            ),
        )


# ---------------------------------------------------------------------------------- size


class BodyLimits(Protocol):
    @property
    def max_message_bytes(self) -> int: ...


def check_body_size(size: int, limits: BodyLimits) -> None:
    """Refuse a body (declared Content-Length or bytes read so far) over ``max_message_bytes``."""
    if size > limits.max_message_bytes:
        raise payload_too_large(size, limits.max_message_bytes)


# ---------------------------------------------------------------------------------- time

_MILLISECONDS = re.compile(r"[0-9]+(?:\.[0-9]+)?")


def request_timeout(headers: Mapping[str, str], config: TimeoutConfig, *, streaming: bool = False) -> float:
    """Seconds to wait for the mesh: the client's ``X-A2A-Timeout`` (milliseconds) if sent,
    clamped to ``maximum_s`` (``streaming_s`` for a stream), else the configured default.

    A value that is not a positive number of milliseconds raises :class:`EdgeError` (HTTP 400).
    """
    default, ceiling = (config.streaming_s, config.streaming_s) if streaming else (config.default_s, config.maximum_s)
    raw = get_header(headers, TIMEOUT_HEADER)
    if raw is None:
        return default
    value = raw.strip()
    if not _MILLISECONDS.fullmatch(value) or float(value) <= 0:
        raise _bad_timeout(raw, ceiling)
    return min(float(value) / 1000.0, ceiling)


def _bad_timeout(raw: str, ceiling: float) -> EdgeError:
    expected = f"a positive number of milliseconds (e.g. 60000; at most {ceiling * 1000:.0f} is used)"
    return invalid_header(TIMEOUT_HEADER, raw, expected)
