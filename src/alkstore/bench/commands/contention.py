"""``alkstore bench contention``: the SKIP LOCKED and the atomic-UPDATE claim side by side."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...engines import engine_class
from ..drain import Backend
from ..report import (
    DRAIN_COLUMNS,
    BenchProgress,
    Column,
)
from ..server import Server
from .common import (
    Measured,
    Options,
    Row,
    Table,
    _arguments,
    _drain_one,
    _ratio,
    _throughput_chart,
    cells,
    run,
)

CONTENTION_COLUMNS = (
    Column("driver", "driver", justify="left"),
    Column("consumers", "consumers"),
    Column("batch", "batch"),
    Column("skip_locked_jobs_per_s", "SKIP LOCKED jobs/s"),
    Column("atomic_update_jobs_per_s", "atomic UPDATE jobs/s"),
    Column("ratio", "atomic / SKIP LOCKED", 2),
    Column("skip_locked_empty", "empty fetches (SKIP LOCKED)"),
    Column("atomic_update_empty", "empty fetches (atomic)"),
    Column("atomic_update_p99_ms", "atomic fetch p99 ms", 2),
)


def contention(
    options: Options,
    *,
    lockfree_engine: str,
    drivers: Sequence[str],
    jobs: int,
    consumers: Sequence[int],
    batches: Sequence[int],
) -> dict[str, Any]:
    """``bench contention``: the SKIP LOCKED claim and the atomic-UPDATE claim side by side."""
    arguments = _arguments(
        lockfree_engine=lockfree_engine,
        drivers=drivers,
        jobs=jobs,
        consumers=consumers,
        batch=batches,
    )

    # Both claims run on one PostgreSQL server by design, so a lock-free engine of another
    # product always runs behind its emulation guard here (the option's help says so).
    emulated = engine_class(lockfree_engine).description.emulation_profile is not None

    def measure(server: Server, progress: BenchProgress) -> Measured:
        rows: list[Row] = []
        pairs: list[Row] = []
        for driver in drivers:
            for c, b in cells(consumers, batches):
                locked, lockfree = (
                    _drain_one(server, progress, backend, jobs, c, b, options.timeout).to_json()
                    for backend in (
                        Backend("postgres", driver),
                        Backend(lockfree_engine, driver, emulated),
                    )
                )
                rows += [locked, lockfree]
                pairs.append(_pair(driver, c, b, locked, lockfree))
        notes = [
            f"SKIP LOCKED: engine postgres. Atomic UPDATE: engine {lockfree_engine}"
            + (
                " behind its emulation guard on stock PostgreSQL (the guard checks every "
                "statement, which adds client CPU)"
                if emulated
                else ""
            )
            + "."
        ]
        tables = [
            Table(f"contention: {jobs:,} jobs", DRAIN_COLUMNS, rows),
            Table("contention side by side", CONTENTION_COLUMNS, pairs, notes),
        ]
        return Measured({"results": rows, "side_by_side": pairs}, tables, _throughput_chart(rows))

    return run("contention", options, arguments, measure)


def _pair(driver: str, consumers: int, batch: int, locked: Row, lockfree: Row) -> Row:
    def value(row: Row, key: str) -> Any:
        return row.get(key) if row.get("available", True) else None

    a, b = value(locked, "jobs_per_s"), value(lockfree, "jobs_per_s")
    return {
        "driver": driver,
        "consumers": consumers,
        "batch": batch,
        "skip_locked_jobs_per_s": a,
        "atomic_update_jobs_per_s": b
        if lockfree.get("available", True)
        else f"not available: {lockfree.get('reason')}",
        "ratio": _ratio(b, a),
        "skip_locked_empty": value(locked, "empty_fetches"),
        "atomic_update_empty": value(lockfree, "empty_fetches"),
        "atomic_update_p99_ms": value(lockfree, "fetch_p99_ms"),
    }


# --- enqueue -------------------------------------------------------------------------------
