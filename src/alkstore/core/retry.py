"""The retry-delay formula (spec §4) as a pure function, plus its bounds for checking engines."""

from __future__ import annotations

import random

MAX_EXPONENT = 16


def retry_delay_seconds(
    *,
    retry_delay: int,
    retry_count: int,
    retry_backoff: bool,
    retry_delay_max: int | None,
    jitter: float | None = None,
) -> float:
    """Seconds from now until a failed job may run again.

    Without backoff: ``retry_delay``. With backoff:
    ``min(retry_delay_max, max(retry_delay, 1) * 2**min(16, retry_count) * (1 + U))`` with
    ``U`` uniform in [0, 1) (``jitter`` fixes ``U`` for tests); ``retry_delay_max`` None is
    uncapped.
    """
    if not retry_backoff:
        return float(retry_delay)
    u = random.random() if jitter is None else jitter
    if not 0.0 <= u < 1.0:
        raise ValueError(f"jitter must be in [0, 1), got {u!r}")
    delay: float = max(retry_delay, 1) * 2.0 ** min(MAX_EXPONENT, retry_count) * (1.0 + u)
    return delay if retry_delay_max is None else min(float(retry_delay_max), delay)


def retry_delay_bounds(
    *, retry_delay: int, retry_count: int, retry_backoff: bool, retry_delay_max: int | None
) -> tuple[float, float]:
    """The closed interval every engine's computed delay must fall into."""
    if not retry_backoff:
        return float(retry_delay), float(retry_delay)
    base = max(retry_delay, 1) * 2 ** min(MAX_EXPONENT, retry_count)
    low, high = float(base), 2.0 * base
    if retry_delay_max is not None:
        low, high = min(low, retry_delay_max), min(high, retry_delay_max)
    return low, high
