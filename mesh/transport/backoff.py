"""Reconnect delays: capped exponential backoff with full jitter.

After a broker restart every component of a mesh loses its connection at the same instant;
with plain doubling delays they would all knock again at the same instants too. Each delay is
instead drawn uniformly between the minimum and a ceiling that doubles per attempt up to the
cap ("full jitter", as in the AWS Architecture Blog's "Exponential Backoff And Jitter"), kept
above the minimum so a refused broker is never retried in a hot loop. Full rather than
decorrelated jitter: its bounds depend only on the attempt number, so they are easy to state
and to test.
"""

from __future__ import annotations

import random

__all__ = ["Backoff"]


class Backoff:
    """The delays before successive reconnect attempts; :meth:`reset` after a success."""

    def __init__(self, min_delay_s: float, max_delay_s: float, *, rng: random.Random | None = None) -> None:
        if min_delay_s <= 0 or max_delay_s < min_delay_s:
            raise ValueError(
                f"reconnect delays must satisfy 0 < min <= max, got min={min_delay_s!r} max={max_delay_s!r}; "
                "fix reconnect_min_delay_s / reconnect_max_delay_s in the broker settings"
            )
        self.min_delay_s = min_delay_s
        self.max_delay_s = max_delay_s
        self._rng = rng or random.Random()  # noqa: S311 - jitter, not a secret
        self.attempt = 0

    def ceiling(self, attempt: int) -> float:
        """The largest delay before attempt ``attempt`` (1-based): min * 2**attempt, capped."""
        # The exponent is bounded so a long outage cannot overflow the float.
        return min(self.max_delay_s, self.min_delay_s * 2.0 ** min(attempt, 64))

    def next_delay(self) -> float:
        """The delay before the next attempt, uniform in [min, ceiling(attempt)]."""
        self.attempt += 1
        return self._rng.uniform(self.min_delay_s, self.ceiling(self.attempt))

    def reset(self) -> None:
        self.attempt = 0
