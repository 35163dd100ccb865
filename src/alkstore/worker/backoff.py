"""How long the runtime waits before it tries a failed database call again: a short,
bounded, jittered exponential backoff (jitter, so that the workers a server restart cut off
do not all come back in the same millisecond)."""

from __future__ import annotations

import random

from ..core.errors import ConnectionFailed, ConnectionLost

RECONNECT_FIRST = 0.005
"""Seconds before the first retry of a failed fetch or listener connection."""
SETTLE_FIRST = 0.005
"""Seconds before the second retry of a settle (the first retry after a
:class:`~alkstore.ConnectionFailed` is at once): the first retries are cheap, as a server
restart leaves every pooled connection dead and each may cost one."""
SETTLE_PAUSE = 0.25
"""Seconds, at most, between two retries of a settle."""
SETTLE_RETRIES = 60
"""Retries of one settle (complete, fail, heartbeat) before its jobs are left to expire
(:data:`SETTLE_BUDGET` usually ends them first)."""
SETTLE_BUDGET = 10.0
"""Seconds (at most; and at most a quarter of the shortest ``expire_seconds`` of the jobs)
the retries of one settle may take: long enough for a server restart, and they end well
before the jobs expire and run again."""


def jittered(attempt: int, first: float, cap: float) -> float:
    """The pause before retry ``attempt`` (0-based): ``first`` doubled per attempt, at most
    ``cap``, scaled by a random factor in [0.5, 1]."""
    return min(cap, first * 2.0 ** min(attempt, 30)) * random.uniform(0.5, 1.0)


def settle_pause(exc: BaseException, attempt: int) -> float | None:
    """The pause before retry ``attempt`` of a settle that failed with ``exc``; None when
    ``exc`` is no connection fault or the retries are spent.

    :class:`~alkstore.ConnectionFailed`: nothing took effect, so the first retry is at once
    (on another connection). :class:`~alkstore.ConnectionLost` (and a deadline): the outcome
    is unknown, but a settle is fenced by its job's attempt, so a repeat after a commit
    changes nothing; it waits a little, for the server to come back."""
    if not isinstance(exc, ConnectionFailed | ConnectionLost) or attempt >= SETTLE_RETRIES:
        return None
    if attempt == 0 and isinstance(exc, ConnectionFailed):
        return 0.0
    return jittered(attempt, SETTLE_FIRST, SETTLE_PAUSE)


__all__ = ["jittered", "settle_pause"]
