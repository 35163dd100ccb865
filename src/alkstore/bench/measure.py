"""Samples to figures: percentiles, latency summaries, rates, the process's peak RSS and the
CPU time a measured window cost the client and the server."""

from __future__ import annotations

import contextlib
import math
import os
import resource
from collections.abc import Iterator, Sequence
from pathlib import Path

import attrs
import psycopg

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


_PROC = Path("/proc")
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def local_postmaster(dsn: str) -> int | None:
    """The process id of the PostgreSQL server at ``dsn`` when it runs on this machine (its
    processes readable in ``/proc``), else None."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
        # Read while the connection is open: its backend process ends with it.
        backend = None if row is None else _stat(int(row[0]))
    return None if backend is None else int(backend[1])


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        text = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def server_cpu_seconds(postmaster: int) -> float | None:
    """CPU seconds the server's processes have used so far: every live child of
    ``postmaster`` (backends, WAL writer, checkpointer, autovacuum …) plus the postmaster's
    own time and that of its children which have exited. None if the server is gone."""
    own = _stat(postmaster)
    if own is None:
        return None
    ticks = sum(int(f) for f in own[11:15])  # utime, stime, cutime, cstime
    parent = str(postmaster)
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat(int(entry.name))
        if fields is not None and fields[1] == parent:
            ticks += int(fields[11]) + int(fields[12])
    return ticks / _TICKS


def client_cpu_seconds() -> float:
    """CPU seconds this process (all its threads) has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@attrs.define
class CpuUse:
    """CPU seconds a measured window cost this process and the server (filled in when the
    window ends; ``server_seconds`` None where the server's processes cannot be read)."""

    client_seconds: float | None = None
    server_seconds: float | None = None


@contextlib.contextmanager
def cpu_window(postmaster: int | None) -> Iterator[CpuUse]:
    """Measure the client's and the server's (``postmaster``'s) CPU time over the block."""
    use = CpuUse()
    server_before = None if postmaster is None else server_cpu_seconds(postmaster)
    client_before = client_cpu_seconds()
    yield use
    use.client_seconds = client_cpu_seconds() - client_before
    server_after = None if postmaster is None else server_cpu_seconds(postmaster)
    if server_before is not None and server_after is not None:
        use.server_seconds = server_after - server_before


__all__ = [
    "CpuUse",
    "Latency",
    "client_cpu_seconds",
    "cpu_window",
    "local_postmaster",
    "peak_rss_bytes",
    "peak_rss_mb",
    "percentile",
    "rate",
    "reset_peak_rss",
    "server_cpu_seconds",
]
