"""Reconnect delays: capped, jittered, bounded, short while an outage is young; computed without sleeping."""

from __future__ import annotations

import random

import pytest

from mesh.transport.backoff import FAST_CAP_S, FAST_PHASE_S, Backoff


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_young_outage_is_retried_within_the_fast_cap_then_the_ceiling_doubles_to_the_cap() -> None:
    clock = Clock()
    backoff = Backoff(0.1, 10.0, rng=random.Random(7), clock=clock)
    young = [backoff.next_delay() for _ in range(200)]
    assert all(0.1 <= delay <= FAST_CAP_S for delay in young)  # back within a second of the broker
    assert min(young) < 0.2 and max(young) > 0.9  # the whole range is used: spread, not in step
    clock.now += FAST_PHASE_S  # the broker stays away: ask less often
    old = [backoff.next_delay() for _ in range(200)]
    assert all(0.1 <= delay <= 10.0 for delay in old)
    assert backoff.ceiling(backoff.attempt) == 10.0 and max(old) > 8.0 and min(old) < 2.0


def test_the_ceiling_doubles_per_attempt_below_either_cap() -> None:
    clock = Clock()
    backoff = Backoff(0.1, 10.0, clock=clock)
    assert [backoff.ceiling(n) for n in (1, 2, 3)] == pytest.approx([0.2, 0.4, 0.8])
    assert backoff.ceiling(4) == FAST_CAP_S  # 1.6, capped while young
    backoff.next_delay()
    clock.now += FAST_PHASE_S
    assert backoff.ceiling(4) == pytest.approx(1.6) and backoff.ceiling(6) == pytest.approx(6.4)
    assert backoff.ceiling(7) == 10.0


def test_a_thousand_components_restarting_together_arrive_spread_over_the_second() -> None:
    """The thundering herd: each component's first retries after a restart are drawn
    independently, so the broker sees them spread, not a thousand in one instant."""
    components = [Backoff(0.1, 10.0, rng=random.Random(seed)) for seed in range(1000)]
    # The broker is back 0.5 s into the outage: each component arrives at its first retry after that.
    arrivals = []
    for backoff in components:
        at = 0.0
        while at < 0.5:
            at += backoff.next_delay()
        arrivals.append(at)
    assert max(arrivals) <= 0.5 + FAST_CAP_S
    buckets: dict[int, int] = {}
    for at in arrivals:
        buckets[int(at * 10)] = buckets.get(int(at * 10), 0) + 1
    # Those retrying often (their early, short delays) come first, the others over the second:
    # never a third of the herd in one 100 ms, and a tenth still arriving 0.5 s later.
    assert max(buckets.values()) < 350
    assert sorted(arrivals)[900] > 0.5 + 0.5


def test_reset_starts_again_from_the_minimum_and_a_young_outage() -> None:
    clock = Clock()
    backoff = Backoff(0.5, 30.0, rng=random.Random(1), clock=clock)
    backoff.next_delay()
    clock.now += FAST_PHASE_S
    for _ in range(10):
        backoff.next_delay()
    backoff.reset()
    assert backoff.attempt == 0
    assert 0.5 <= backoff.next_delay() <= 1.0
    assert all(backoff.next_delay() <= FAST_CAP_S for _ in range(20))  # young again


def test_a_very_long_outage_stays_at_the_cap() -> None:
    clock = Clock()
    backoff = Backoff(0.1, 10.0, rng=random.Random(3), clock=clock)
    for _ in range(5000):
        delay = backoff.next_delay()
        clock.now += delay
    assert 0.1 <= delay <= 10.0 and backoff.ceiling(5000) == 10.0


def test_the_fast_cap_stays_within_the_configured_bounds() -> None:
    assert Backoff(0.1, 0.5).fast_cap_s == 0.5  # a cap below a second is kept
    assert Backoff(2.0, 10.0).fast_cap_s == 2.0  # never below the minimum


@pytest.mark.parametrize(("low", "high"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_bad_bounds_are_refused_with_the_fix(low: float, high: float) -> None:
    with pytest.raises(ValueError, match="reconnect_min_delay_s / reconnect_max_delay_s"):
        Backoff(low, high)
