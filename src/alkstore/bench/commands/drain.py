"""``alkstore bench drain``, and the OpenTelemetry overhead it reports with ``--telemetry``."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any

from ..drain import TELEMETRY_LABEL, Backend, cell_jobs, cell_jobs_rule
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


def drain(
    options: Options,
    *,
    engine: str,
    drivers: Sequence[str],
    jobs: int,
    consumers: Sequence[int],
    batches: Sequence[int],
    scenarios: Sequence[str] = ("standard",),
    telemetry: bool = False,
    telemetry_sample: float | None = None,
) -> dict[str, Any]:
    """``bench drain``: jobs/s, fetch latency, empty fetches, duplicates, peak RSS per cell
    (per queue policy scenario: ``standard``, ``singleton``, ``key_strict_fifo``); with
    ``telemetry``, each cell runs again with OpenTelemetry on (docs/observability.md),
    recording the spans of ``telemetry_sample`` of the traces (None: every one)."""
    if telemetry_sample is not None and not telemetry:
        raise ValueError("telemetry_sample samples the traces of a drain with telemetry on")
    arguments = _arguments(
        engine=engine, drivers=drivers, jobs=jobs, consumers=consumers, batch=batches
    )
    if tuple(scenarios) != ("standard",):
        arguments["scenario"] = list(scenarios)
    if telemetry:
        arguments["telemetry"] = True
    if telemetry_sample is not None:
        arguments["telemetry_sample"] = telemetry_sample
    if options.pgbouncer:
        arguments["pgbouncer"] = True
    if options.connections is not None:
        arguments["connections"] = options.connections

    def measure(server: Server, progress: BenchProgress) -> Measured:
        rows = [
            _drain_one(
                server,
                progress,
                Backend(
                    engine,
                    d,
                    options.emulate,
                    scenario,
                    measured,
                    pooled_dsn=server.pooled_dsn,
                    connections=options.connections,
                    telemetry_sample=1.0 if telemetry_sample is None else telemetry_sample,
                ),
                cell_jobs(jobs, c, b),
                c,
                b,
                options.timeout,
            ).to_json()
            for scenario in scenarios
            for d in drivers
            for index, (c, b) in enumerate(cells(consumers, batches))
            for measured in _telemetry_order(telemetry, index)
        ]
        tables = [Table(f"drain: {cell_jobs_rule(jobs)}", DRAIN_COLUMNS, rows)]
        sections: dict[str, Any] = {"results": rows}
        if telemetry:
            overhead = telemetry_overhead(rows)
            sections["telemetry_overhead"] = overhead
            tables.append(
                Table("OpenTelemetry overhead", OVERHEAD_COLUMNS, overhead, OVERHEAD_NOTES)
            )
        return Measured(sections, tables, _throughput_chart(rows))

    return run("drain", options, arguments, measure)


def _telemetry_order(telemetry: bool, index: int) -> tuple[bool, ...]:
    """Whether each drain of cell ``index`` runs with telemetry: off only, or both, the order
    turned round from one cell to the next (off-on, on-off, …), so that a drift of the
    machine or the server over a run does not always favour the same side."""
    if not telemetry:
        return (False,)
    return (False, True) if index % 2 == 0 else (True, False)


OVERHEAD_COLUMNS = (
    Column("engine", "engine", justify="left"),
    Column("driver", "driver", justify="left"),
    Column("consumers", "consumers"),
    Column("batch", "batch"),
    Column("rounds", "rounds"),
    Column("off_jobs_per_s", "jobs/s off"),
    Column("on_jobs_per_s", "jobs/s on"),
    Column("ratio", "on / off", 3),
    Column("paired_ratio", "on / off, paired", 3),
    Column("off_cpu_us_per_job", "CPU µs/job off", 1),
    Column("on_cpu_us_per_job", "CPU µs/job on", 1),
    Column("cpu_ratio", "CPU on / off", 3),
    Column("paired_cpu_ratio", "CPU on / off, paired", 3),
)
OVERHEAD_NOTES = (
    "Medians over the rounds (each round: the cell without telemetry and with it, in turns "
    "off-on and on-off). CPU is "
    "the client's and the server's together, per job, where the server's processes can be "
    "read (a server on this machine); else the client's alone. Paired: the median of each "
    "round's own ratio, which a drift of the machine from round to round does not move; the "
    "ratio of the two medians can.",
)


def telemetry_overhead(rows: Sequence[Row]) -> list[Row]:
    """Per drained cell, the medians of the rounds without and with telemetry and their
    ratios: throughput, and CPU time per job (client plus server); and the median of each
    round's own ratios (a round is the cell's two drains, run one after the other)."""
    groups: dict[tuple[Any, ...], list[tuple[bool, Row]]] = {}
    for row in rows:
        if not row.get("available", True):
            continue
        measured = row["engine"].endswith(TELEMETRY_LABEL)
        key = (
            row["engine"].removesuffix(TELEMETRY_LABEL),
            row["driver"],
            row["consumers"],
            row["batch"],
        )
        groups.setdefault(key, []).append((measured, row))
    summary: list[Row] = []
    for (engine, driver, consumers, batch), drained in groups.items():
        off, on = (_medians([r for m, r in drained if m is side]) for side in (False, True))
        rounds = [
            dict(pair)
            for pair in zip(drained[0::2], drained[1::2], strict=False)
            if pair[0][0] is not pair[1][0]
        ]
        summary.append(
            {
                "engine": engine,
                "driver": driver,
                "consumers": consumers,
                "batch": batch,
                "rounds": len(rounds),
                "off_jobs_per_s": off[0],
                "on_jobs_per_s": on[0],
                "ratio": _ratio(on[0], off[0]),
                "paired_ratio": _median_ratio(rounds, _rate),
                "off_cpu_us_per_job": off[1],
                "on_cpu_us_per_job": on[1],
                "cpu_ratio": _ratio(on[1], off[1]),
                "paired_cpu_ratio": _median_ratio(rounds, _cpu_per_job),
            }
        )
    return summary


def _rate(row: Row) -> float | None:
    """Jobs per second of a drained cell."""
    rate: float | None = row["jobs_per_s"]
    return rate


def _cpu_per_job(row: Row) -> float | None:
    """CPU µs per job, client plus server (the client's alone where the server's is unknown)."""
    client = row.get("client_cpu_us_per_job")
    return None if client is None else client + (row.get("server_cpu_us_per_job") or 0.0)


def _median_ratio(
    rounds: Sequence[dict[bool, Row]], value: Callable[[Row], float | None]
) -> float | None:
    """The median over ``rounds`` of ``value`` with telemetry on over ``value`` off."""
    ratios = [r for r in (_ratio(value(pair[True]), value(pair[False])) for pair in rounds) if r]
    return statistics.median(ratios) if ratios else None


def _medians(rows: Sequence[Row]) -> tuple[float | None, float | None]:
    """The median jobs/s and the median CPU µs per job (client + server) of ``rows``."""
    rates = [r["jobs_per_s"] for r in rows]
    cpu = [c for c in map(_cpu_per_job, rows) if c is not None]
    return (
        statistics.median(rates) if rates else None,
        round(statistics.median(cpu), 1) if cpu else None,
    )
