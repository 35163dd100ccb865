"""``alkstore bench scale``: fetch latency and drain rate at growing queue depths."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import scale as scale_bench
from ..drain import Backend
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
    _bar_chart,
    _schema,
    run,
)


def scale(
    options: Options,
    *,
    engine: str,
    drivers: Sequence[str],
    depths: Sequence[int],
    finished: int,
    burst: int | None = None,
    samples: int,
    drain_jobs: int,
    consumers: int,
    batch: int,
) -> dict[str, Any]:
    """``bench scale``: fetch latency and drain rate at growing queue depths."""
    arguments = _arguments(
        engine=engine,
        drivers=drivers,
        depths=depths,
        finished=finished,
        burst=burst,
        samples=samples,
        drain_jobs=drain_jobs,
        consumers=consumers,
        batch=batch,
    )

    def measure(server: Server, progress: BenchProgress) -> Measured:
        rows: list[Row] = []
        for driver in drivers:
            for scenario in scale_bench.scenarios(list(depths), finished, burst):
                rows.append(
                    scale_bench.scale_cell(
                        server.dsn,
                        Backend(engine, driver, options.emulate),
                        scenario,
                        samples=samples,
                        drain_jobs=drain_jobs,
                        consumers=consumers,
                        batch=batch,
                        schema=_schema("alkstore"),
                        progress=progress,
                        timeout=options.timeout,
                    )
                )
        notes = [
            f"fetch latency: {samples} fetches of 1 job by 1 consumer, each completed; "
            f"drain: up to {drain_jobs:,} jobs by {consumers} consumers, batch {batch}."
        ]
        table = Table("scale", scale_bench.COLUMNS, rows, notes)
        chart = _bar_chart(
            "fetch p50 ms",
            {f"{r['driver']}: {r['scenario']}": r["fetch_p50_ms"] or 0.0 for r in rows},
        )
        return Measured({"results": rows}, [table], chart)

    return run("scale", options, arguments, measure)
