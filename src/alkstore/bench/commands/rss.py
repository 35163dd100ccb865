"""``alkstore bench rss``: a worker's RSS through a drain."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import rss as rss_bench
from ..drain import Backend
from ..isolation import run_isolated
from ..report import (
    BenchProgress,
)
from ..server import Server
from .common import (
    Measured,
    Options,
    Row,
    Table,
    _arguments,
    _schema,
    run,
)


def rss(
    options: Options,
    *,
    engine: str,
    drivers: Sequence[str],
    jobs: int,
    concurrency: int,
    batch: int,
    every: float,
) -> dict[str, Any]:
    """``bench rss``: the worker process's RSS sampled through a drain through ``work()``."""
    arguments = _arguments(
        engine=engine,
        drivers=drivers,
        jobs=jobs,
        concurrency=concurrency,
        batch=batch,
        every=every,
    )

    def measure(server: Server, progress: BenchProgress) -> Measured:
        rows: list[Row] = [
            run_isolated(
                progress,
                f"rss {driver}",
                jobs,
                rss_bench.rss_cell,
                server.dsn,
                Backend(engine, driver, options.emulate),
                jobs,
                concurrency,
                batch,
                _schema("alkstore"),
                every,
                options.timeout,
            )
            for driver in drivers
        ]
        notes = [
            f"store.work(concurrency={concurrency}, batch=True, batch_size={batch}), no-op "
            f"handler, in a process of its own; VmRSS sampled every {every:g} s (all samples "
            "in the JSON). Growth: the largest sample minus the first once 10% were handled."
        ]
        table = Table(f"worker RSS: {jobs:,} jobs", rss_bench.COLUMNS, rows, notes)
        return Measured({"results": rows}, [table])

    return run("rss", options, arguments, measure)
