"""SQL fragments every operation family of the postgres engine shares."""

from __future__ import annotations


def seconds_after(moment: str, seconds: str) -> str:
    """SQL for ``moment + seconds * interval '1 second'`` built from IMMUTABLE parts only.

    ``timestamptz + interval`` is STABLE (a day's length depends on the session's time zone),
    and sharded Citus refuses a STABLE function applied to column references in an UPDATE or
    DELETE ("STABLE functions used in UPDATE queries cannot be called with column
    references"): each worker would compute it with its own settings. In UTC every day is
    24 hours, so shifting the UTC wall-clock time is the same arithmetic, and IMMUTABLE.
    ``now()`` itself may appear as ``moment``: without column arguments Citus evaluates it
    once on the coordinator. A NULL ``seconds`` gives NULL, as the plain sum would.
    """
    return f"timezone('UTC', timezone('UTC', {moment}) + {seconds} * interval '1 second')"
