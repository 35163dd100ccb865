"""``alkstore bench pressure``: a paced drain around a held MVCC horizon."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from .. import pressure as pressure_bench
from ..drain import Backend
from ..report import (
    BenchProgress,
)
from ..server import Server
from .common import (
    Measured,
    Options,
    Table,
    _arguments,
    _schema,
    run,
)


def pressure(
    options: Options,
    *,
    engine: str,
    driver: str,
    systems: Sequence[str],
    holds: Sequence[str],
    spec: pressure_bench.PressureSpec,
) -> dict[str, Any]:
    """``bench pressure``: a paced drain before, during and after a held MVCC horizon."""
    arguments = _arguments(
        engine=engine, driver=driver, systems=systems, holds=holds, **attrs.asdict(spec)
    )

    def measure(server: Server, progress: BenchProgress) -> Measured:
        backend = Backend(engine, driver, options.emulate)
        rows, timelines = pressure_bench.measure(
            server.dsn, systems, holds, spec, backend, _schema("pressure")
        )
        notes = [
            f"{spec.rate:g} jobs/s sent; {spec.consumers} consumers fetch {spec.batch} at a "
            f"time (sleeping {spec.poll:g} s after an empty fetch); {spec.before:g} s before, "
            f"{spec.hold:g} s held, {spec.after:g} s after; windows of {spec.window:g} s. "
            "idle: one session idle in a transaction with an xid; readers: "
            f"{pressure_bench.READERS} REPEATABLE READ sessions scanning the job table."
        ]
        table = Table("horizon pressure", pressure_bench.COLUMNS, rows, notes)
        return Measured({"results": rows, "timelines": timelines}, [table])

    return run("pressure", options, arguments, measure)
