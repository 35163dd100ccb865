"""Samples to figures: percentiles, latency summaries, rates and the process's peak RSS."""

from __future__ import annotations

import math
import resource
from collections.abc import Sequence
from pathlib import Path

import attrs

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def percentile(samples: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) by nearest rank; None without samples."""
    if not samples:
        return None
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def rate(count: int, seconds: float) -> float:
    """``count`` per second (0 when no time passed)."""
    return count / seconds if seconds > 0 else 0.0


@attrs.frozen
class Latency:
    """Percentiles of a set of durations, in milliseconds."""

    count: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Latency:
        """Summarise durations given in seconds."""

        def ms(q: float) -> float | None:
            value = percentile(seconds, q)
            return None if value is None else value * 1000.0

        return cls(len(seconds), ms(50), ms(95), ms(99))


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark of this process (Linux ``clear_refs``); whether it did.

    After a reset, :func:`peak_rss_bytes` reports the peak since the reset, so each
    benchmark cell gets its own figure instead of the whole run's high-water mark.
    """
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def peak_rss_bytes() -> int:
    """Peak resident set size of this process (since the last reset where supported)."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def peak_rss_mb() -> float:
    """:func:`peak_rss_bytes` in MiB, rounded to 0.1 (the ``peak_rss_mb`` of a JSON row)."""
    return round(peak_rss_bytes() / 2**20, 1)


__all__ = ["Latency", "peak_rss_bytes", "peak_rss_mb", "percentile", "rate", "reset_peak_rss"]
