"""Reconnect delays: capped, jittered, bounded; computed without sleeping."""

from __future__ import annotations

import random

import pytest

from mesh.transport.backoff import Backoff


def test_delays_stay_between_the_minimum_and_a_doubling_capped_ceiling() -> None:
    backoff = Backoff(0.1, 10.0, rng=random.Random(7))
    delays = [backoff.next_delay() for _ in range(200)]
    for attempt, delay in enumerate(delays, start=1):
        assert 0.1 <= delay <= min(10.0, 0.1 * 2**attempt)
    assert max(delays) <= 10.0
    # The ceiling reaches the cap after log2(100) attempts, and the draws use the whole range.
    assert backoff.ceiling(7) == 10.0 and backoff.ceiling(6) == pytest.approx(6.4)
    assert max(delays[10:]) > 8.0 and min(delays[10:]) < 2.0


def test_components_restarting_together_do_not_retry_in_lockstep() -> None:
    components = [Backoff(0.1, 10.0, rng=random.Random(seed)) for seed in range(20)]
    first = [b.next_delay() for b in components]
    assert len({round(d, 6) for d in first}) == 20  # twenty components, twenty different first retries
    for _ in range(4):
        fifth = [b.next_delay() for b in components]
    assert max(fifth) - min(fifth) > 1.0  # spread over seconds once the ceiling has grown


def test_reset_starts_again_from_the_minimum() -> None:
    backoff = Backoff(0.5, 30.0, rng=random.Random(1))
    for _ in range(10):
        backoff.next_delay()
    backoff.reset()
    assert backoff.attempt == 0
    assert 0.5 <= backoff.next_delay() <= 1.0


def test_a_very_long_outage_stays_at_the_cap() -> None:
    backoff = Backoff(0.1, 10.0, rng=random.Random(3))
    for _ in range(5000):
        delay = backoff.next_delay()
    assert 0.1 <= delay <= 10.0 and backoff.ceiling(5000) == 10.0


@pytest.mark.parametrize(("low", "high"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_bad_bounds_are_refused_with_the_fix(low: float, high: float) -> None:
    with pytest.raises(ValueError, match="reconnect_min_delay_s / reconnect_max_delay_s"):
        Backoff(low, high)
