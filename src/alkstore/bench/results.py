"""What a drain cell produced: one row of a benchmark table and of its JSON."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

import attrs

from .loops import LoopOutcome
from .measure import CpuUse, Latency, rate

MIB = 1024 * 1024


@attrs.frozen(kw_only=True)
class Cell:
    """Where a measurement was taken: which system, how many consumers, which batch size."""

    system: str
    """``alkstore``, ``raw-sql``, ``pg-boss``, ``pgqueuer`` or ``procrastinate``."""
    consumers: int
    batch: int
    engine: str | None = None
    driver: str | None = None
    variant: str | None = None
    """How the tables were prepared before the timed drain (``bench peers``: ``steady`` or
    ``burst``, see :func:`~alkstore.bench.server.prepare_drain`); None where not varied."""

    @property
    def label(self) -> str:
        """``system engine/driver [variant]``, e.g. ``alkstore postgres/psycopg [burst]``."""
        parts = [p for p in (self.engine, self.driver) if p]
        label = f"{self.system} {'/'.join(parts)}".strip()
        return f"{label} [{self.variant}]" if self.variant else label

    @property
    def description(self) -> str:
        """The progress-bar text of a drain in this cell: ``label c=<consumers> b=<batch>``."""
        return f"{self.label} c={self.consumers} b={self.batch}"

    def to_json(self) -> dict[str, Any]:
        """The identifying columns of a JSON row (``variant`` only where it was set)."""
        row: dict[str, Any] = {
            "system": self.system,
            "engine": self.engine,
            "driver": self.driver,
            "consumers": self.consumers,
            "batch": self.batch,
        }
        if self.variant is not None:
            row["variant"] = self.variant
        return row


@attrs.frozen(kw_only=True)
class DrainResult:
    """A drain of ``jobs`` pre-enqueued jobs by ``cell.consumers`` concurrent consumers."""

    cell: Cell
    jobs: int
    seconds: float
    fetch: Latency | None
    """Per fetch call (None where the system's worker loop hides its fetches)."""
    empty_fetches: int | None
    delivered: int
    duplicates: int
    completed: int
    """Jobs the database holds as completed (or gone, for systems that delete them) after."""
    peak_rss_bytes: int | None
    enqueue_seconds: float | None = None
    """How long the pre-enqueue (batches of 1,000) took."""
    timed_out: bool = False
    note: str = ""
    cpu: CpuUse | None = None
    """The CPU time the timed drain cost the measuring process and the server (None: not
    measured, e.g. a peer whose drain runs in a process of its own)."""

    @property
    def jobs_per_s(self) -> float:
        """Completed jobs per second of drain wall time."""
        return rate(self.completed, self.seconds)

    @property
    def enqueue_jobs_per_s(self) -> float | None:
        """Jobs per second of the pre-enqueue."""
        return None if self.enqueue_seconds is None else rate(self.jobs, self.enqueue_seconds)

    @classmethod
    def from_outcome(
        cls,
        cell: Cell,
        jobs: int,
        outcome: LoopOutcome,
        completed: int,
        peak_rss: int | None,
        enqueue_seconds: float | None,
        note: str = "",
        cpu: CpuUse | None = None,
    ) -> DrainResult:
        """A result from the harness's own fetch loops."""
        return cls(
            cell=cell,
            jobs=jobs,
            seconds=outcome.seconds,
            fetch=Latency.of(outcome.fetch_seconds),
            empty_fetches=outcome.empty_fetches,
            delivered=outcome.delivered,
            duplicates=outcome.duplicates,
            completed=completed,
            peak_rss_bytes=peak_rss,
            enqueue_seconds=enqueue_seconds,
            timed_out=outcome.timed_out,
            note=note,
            cpu=cpu,
        )

    @classmethod
    def from_worker_loop(
        cls,
        cell: Cell,
        jobs: int,
        *,
        seconds: float,
        ids: Sequence[Hashable],
        completed: int,
        peak_rss: int | None,
        enqueue_seconds: float | None,
        note: str,
        cpu: CpuUse | None = None,
    ) -> DrainResult:
        """A result from a peer's own worker loop, which hides its fetches from the harness."""
        return cls(
            cell=cell,
            jobs=jobs,
            seconds=seconds,
            fetch=None,
            empty_fetches=None,
            delivered=len(ids),
            duplicates=len(ids) - len(set(ids)),
            completed=completed,
            peak_rss_bytes=peak_rss,
            enqueue_seconds=enqueue_seconds,
            note=note,
            cpu=cpu,
        )

    def to_json(self) -> dict[str, Any]:
        """One flat JSON row."""
        fetch, cpu = self.fetch, self.cpu
        return {
            **self.cell.to_json(),
            "available": True,
            "jobs": self.jobs,
            "seconds": round(self.seconds, 4),
            "jobs_per_s": round(self.jobs_per_s, 1),
            "fetch_count": None if fetch is None else fetch.count,
            "fetch_p50_ms": None if fetch is None else _round(fetch.p50_ms),
            "fetch_p99_ms": None if fetch is None else _round(fetch.p99_ms),
            "empty_fetches": self.empty_fetches,
            "delivered": self.delivered,
            "duplicates": self.duplicates,
            "completed": self.completed,
            "peak_rss_mb": None
            if self.peak_rss_bytes is None
            else round(self.peak_rss_bytes / MIB, 1),
            "enqueue_jobs_per_s": _round(self.enqueue_jobs_per_s, 1),
            "client_cpu_us_per_job": self._per_job(None if cpu is None else cpu.client_seconds),
            "server_cpu_us_per_job": self._per_job(None if cpu is None else cpu.server_seconds),
            "timed_out": self.timed_out,
            "note": self.note,
        }

    def _per_job(self, seconds: float | None) -> float | None:
        """``seconds`` of CPU time as microseconds per completed job (None: not measured)."""
        if seconds is None or not self.completed:
            return None
        return round(seconds * 1e6 / self.completed, 1)


@attrs.frozen(kw_only=True)
class Unavailable:
    """A cell that could not be measured, and why."""

    cell: Cell
    reason: str

    def to_json(self) -> dict[str, Any]:
        """One JSON row: ``available`` false and the reason."""
        return {**self.cell.to_json(), "available": False, "reason": self.reason}


Outcome = DrainResult | Unavailable
"""Either a measured drain or a cell that could not be measured."""


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


__all__ = ["Cell", "DrainResult", "Outcome", "Unavailable"]
