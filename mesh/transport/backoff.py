"""Reconnect delays: capped exponential backoff with full jitter, short while an outage is young.

After a broker restart every component of a mesh loses its connection at the same instant;
with plain doubling delays they would all knock again at the same instants too. Each delay is
instead drawn uniformly between the minimum and a ceiling that doubles per attempt up to the
cap ("full jitter", as in the AWS Architecture Blog's "Exponential Backoff And Jitter"), kept
above the minimum so a refused broker is never retried in a hot loop. Full rather than
decorrelated jitter: its bounds depend only on the attempt number, so they are easy to state
and to test.

Most outages of a broker that was working are restarts of seconds, and callers wait on
deadlines of seconds (DESIGN, "Transport rules": back within about a second of the broker's
return). So for the first :data:`FAST_PHASE_S` of an outage the ceiling stops at
:data:`FAST_CAP_S`: a component is back at most that long after the broker, and a thousand
of them still arrive spread over that second, not at once (bench/restart.py measures both).
A longer outage grows the ceiling to the configured cap, so a broker that stays away is asked
about once per ``reconnect_max_delay_s`` per component, not every second.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

__all__ = ["FAST_CAP_S", "FAST_PHASE_S", "Backoff"]

#: The ceiling of the delays while an outage is young, and how long it stays young.
FAST_CAP_S = 1.0
FAST_PHASE_S = 60.0


class Backoff:
    """The delays before successive reconnect attempts; :meth:`reset` after a success."""

    def __init__(
        self,
        min_delay_s: float,
        max_delay_s: float,
        *,
        fast_cap_s: float = FAST_CAP_S,
        fast_phase_s: float = FAST_PHASE_S,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if min_delay_s <= 0 or max_delay_s < min_delay_s:
            raise ValueError(
                f"reconnect delays must satisfy 0 < min <= max, got min={min_delay_s!r} max={max_delay_s!r}; "
                "fix reconnect_min_delay_s / reconnect_max_delay_s in the broker settings"
            )
        self.min_delay_s = min_delay_s
        self.max_delay_s = max_delay_s
        self.fast_cap_s = min(max(fast_cap_s, min_delay_s), max_delay_s)
        self.fast_phase_s = fast_phase_s
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not a secret
        self._clock = clock
        self._since: float | None = None  # when the first delay of this outage was asked for
        self.attempt = 0

    def ceiling(self, attempt: int) -> float:
        """The largest delay before attempt ``attempt`` (1-based): min * 2**attempt, capped (the
        fast cap while the outage is young)."""
        young = self._since is None or self._clock() - self._since < self.fast_phase_s
        # The exponent is bounded so a long outage cannot overflow the float.
        return min(self.fast_cap_s if young else self.max_delay_s, self.min_delay_s * 2.0 ** min(attempt, 64))

    def next_delay(self) -> float:
        """The delay before the next attempt, uniform in [min, ceiling(attempt)]."""
        if self._since is None:
            self._since = self._clock()
        self.attempt += 1
        return self._rng.uniform(self.min_delay_s, self.ceiling(self.attempt))

    def reset(self) -> None:
        self.attempt = 0
        self._since = None
