"""The retry-delay formula of spec §4 and the bounds engines are checked against."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alkstore.core.retry import MAX_EXPONENT, retry_delay_bounds, retry_delay_seconds

SETTINGS = settings(max_examples=300, deadline=None)

DELAYS = st.integers(0, 10_000)
COUNTS = st.integers(0, 40)
DELAY_MAX = st.none() | st.integers(0, 10_000)
JITTER = st.floats(0.0, 1.0, exclude_max=True)


def spec_delay(delay: int, count: int, delay_max: int | None, u: float) -> float:
    """Spec §4, written out independently: min(max, max(delay, 1) * 2^min(16, count) * (1+U))."""
    value = max(delay, 1) * math.pow(2, min(16, count)) * (1 + u)
    return value if delay_max is None else min(delay_max, value)


def test_exponent_cap_is_sixteen() -> None:
    assert MAX_EXPONENT == 16


@SETTINGS
@given(delay=DELAYS, count=COUNTS, delay_max=DELAY_MAX, jitter=st.none() | JITTER)
def test_without_backoff_the_delay_is_retry_delay(
    delay: int, count: int, delay_max: int | None, jitter: float | None
) -> None:
    got = retry_delay_seconds(
        retry_delay=delay,
        retry_count=count,
        retry_backoff=False,
        retry_delay_max=delay_max,
        jitter=jitter,
    )
    assert type(got) is float
    assert got == delay
    bounds = retry_delay_bounds(
        retry_delay=delay, retry_count=count, retry_backoff=False, retry_delay_max=delay_max
    )
    assert bounds == (delay, delay)


@SETTINGS
@given(delay=DELAYS, count=COUNTS, delay_max=DELAY_MAX, jitter=JITTER)
def test_with_backoff_the_delay_lies_within_the_bounds(
    delay: int, count: int, delay_max: int | None, jitter: float
) -> None:
    got = retry_delay_seconds(
        retry_delay=delay,
        retry_count=count,
        retry_backoff=True,
        retry_delay_max=delay_max,
        jitter=jitter,
    )
    low, high = retry_delay_bounds(
        retry_delay=delay, retry_count=count, retry_backoff=True, retry_delay_max=delay_max
    )
    assert low <= got <= high
    assert low <= high
    assert got == pytest.approx(spec_delay(delay, count, delay_max, jitter), rel=1e-12)
    if delay_max is not None:
        assert got <= delay_max
        assert high <= delay_max


@SETTINGS
@given(delay=DELAYS, count=COUNTS, delay_max=DELAY_MAX)
def test_bounds_are_the_extremes_of_the_jitter(
    delay: int, count: int, delay_max: int | None
) -> None:
    low, high = retry_delay_bounds(
        retry_delay=delay, retry_count=count, retry_backoff=True, retry_delay_max=delay_max
    )
    base = max(delay, 1) * 2 ** min(16, count)
    assert low == (base if delay_max is None else min(base, delay_max))
    assert high == (2 * base if delay_max is None else min(2 * base, delay_max))
    at_zero = retry_delay_seconds(
        retry_delay=delay,
        retry_count=count,
        retry_backoff=True,
        retry_delay_max=delay_max,
        jitter=0.0,
    )
    assert at_zero == low


@pytest.mark.parametrize(
    ("delay", "count", "delay_max", "jitter", "expected"),
    [
        (0, 0, None, 0.0, 1.0),  # retry_delay 0 counts as 1 second
        (0, 3, None, 0.0, 8.0),
        (1, 0, None, 0.5, 1.5),
        (10, 2, None, 0.5, 60.0),
        (10, 2, 50, 0.5, 50.0),  # capped
        (10, 10, 60, 0.0, 60.0),
        (10, 10, 0, 0.9, 0.0),  # a cap of 0 retries at once
        (3, 16, None, 0.0, 3.0 * 65_536),
        (3, 17, None, 0.0, 3.0 * 65_536),  # exponent stops at 16
        (3, 40, None, 0.25, 3.0 * 65_536 * 1.25),
    ],
)
def test_backoff_examples(
    delay: int, count: int, delay_max: int | None, jitter: float, expected: float
) -> None:
    got = retry_delay_seconds(
        retry_delay=delay,
        retry_count=count,
        retry_backoff=True,
        retry_delay_max=delay_max,
        jitter=jitter,
    )
    assert got == expected


@SETTINGS
@given(delay=DELAYS, count=st.integers(MAX_EXPONENT, 200), jitter=JITTER)
def test_exponent_is_capped_at_sixteen(delay: int, count: int, jitter: float) -> None:
    def at(n: int) -> float:
        return retry_delay_seconds(
            retry_delay=delay,
            retry_count=n,
            retry_backoff=True,
            retry_delay_max=None,
            jitter=jitter,
        )

    assert at(count) == at(MAX_EXPONENT)
    assert at(MAX_EXPONENT) == 2 * at(MAX_EXPONENT - 1)


@SETTINGS
@given(delay=DELAYS, count=st.integers(0, MAX_EXPONENT - 1), jitter=JITTER)
def test_each_retry_doubles_the_delay_below_the_cap(delay: int, count: int, jitter: float) -> None:
    def at(n: int) -> float:
        return retry_delay_seconds(
            retry_delay=delay,
            retry_count=n,
            retry_backoff=True,
            retry_delay_max=None,
            jitter=jitter,
        )

    assert at(count + 1) == 2 * at(count)


@pytest.mark.parametrize("jitter", [-0.01, -1.0, 1.0, 1.5, math.nan, math.inf, -math.inf])
def test_jitter_out_of_range_raises(jitter: float) -> None:
    with pytest.raises(ValueError, match="jitter"):
        retry_delay_seconds(
            retry_delay=5, retry_count=1, retry_backoff=True, retry_delay_max=None, jitter=jitter
        )


def test_without_jitter_argument_the_random_draw_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(random, "random", lambda: 0.75)
    got = retry_delay_seconds(
        retry_delay=4, retry_count=1, retry_backoff=True, retry_delay_max=None
    )
    assert got == 4 * 2 * 1.75


def test_random_jitter_varies_and_stays_within_bounds() -> None:
    rng_state = random.getstate()
    try:
        random.seed(1234)
        draws = {
            retry_delay_seconds(
                retry_delay=7, retry_count=3, retry_backoff=True, retry_delay_max=None
            )
            for _ in range(200)
        }
    finally:
        random.setstate(rng_state)
    low, high = retry_delay_bounds(
        retry_delay=7, retry_count=3, retry_backoff=True, retry_delay_max=None
    )
    assert all(low <= d < high for d in draws)
    assert len(draws) > 100
