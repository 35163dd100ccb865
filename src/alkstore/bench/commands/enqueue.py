"""``alkstore bench enqueue``: ``send`` and ``send_many`` by concurrent senders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import enqueue as enqueue_bench
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
    _each,
    _schema,
    _throughput_chart,
    run,
)


def enqueue(
    options: Options,
    *,
    engine: str,
    drivers: Sequence[str],
    jobs: int,
    send_jobs: int,
    senders: Sequence[int],
    batch: int,
) -> dict[str, Any]:
    """``bench enqueue``: single ``send`` and ``send_many`` by 1..N concurrent senders."""
    arguments = _arguments(
        engine=engine,
        drivers=drivers,
        jobs=jobs,
        send_jobs=send_jobs,
        senders=senders,
        batch=batch,
    )

    def measure(server: Server, progress: BenchProgress) -> Measured:
        def one(cell: tuple[str, str, int]) -> Row:
            driver, mode, count = cell
            return enqueue_bench.enqueue_cell(
                server.dsn,
                Backend(engine, driver, options.emulate),
                mode=mode,
                senders=count,
                jobs=send_jobs if mode == "send" else jobs,
                batch=batch,
                schema=_schema("alkstore"),
            )

        plan = [(d, m, s) for d in drivers for m in enqueue_bench.MODES for s in senders]
        rows = _each(progress, "enqueue cells", plan, one)
        chart_rows = [
            {
                "system": r["mode"],
                "engine": r["engine"],
                "driver": r["driver"],
                "consumers": r["senders"],
                "batch": r["batch"],
                "jobs_per_s": r["jobs_per_s"],
            }
            for r in rows
        ]
        table = Table(
            "enqueue", enqueue_bench.COLUMNS, rows, ["x-axis of the chart: concurrent senders"]
        )
        return Measured({"results": rows}, [table], _throughput_chart(chart_rows))

    return run("enqueue", options, arguments, measure)
