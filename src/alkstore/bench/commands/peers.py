"""``alkstore bench peers``: alkstore and its peers drain the same jobs on one server."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..drain import Backend, cell_jobs, cell_jobs_rule
from ..isolation import run_isolated
from ..peers import PEERS, SHARED_CONNECTIONS, DrainSpec, peer_versions, run_peer
from ..progress import Progress
from ..report import (
    DRAIN_COLUMNS,
    BenchProgress,
    Column,
)
from ..results import Outcome
from ..server import STEADY, VARIANTS, Server
from .common import (
    Measured,
    Options,
    Row,
    Table,
    _arguments,
    _drain_one,
    _ratio,
    _rows,
    _schema,
    _throughput_chart,
    cells,
    run,
)


def _peer_cell(progress: Progress, name: str, dsn: str, spec: DrainSpec) -> Outcome:
    """One peer drain cell (runs in the child process)."""
    return run_peer(name, dsn, spec, _schema("peer"), progress)


ENQUEUE_COLUMNS = (
    Column("system", "system", justify="left"),
    Column("driver", "fastest driver", justify="left"),
    Column("enqueue_jobs_per_s", "batch insert jobs/s (1,000 a batch)"),
    Column("ratio", "alkstore / peer", 2),
)


def peers(
    options: Options,
    *,
    engine: str,
    drivers: Sequence[str],
    names: Sequence[str],
    jobs: int,
    consumers: Sequence[int],
    batches: Sequence[int],
    variants: Sequence[str] = (STEADY,),
) -> dict[str, Any]:
    """``bench peers``: alkstore and its peers drain the same jobs on the same server, each
    prepared the same way after its prefill, per variant (``steady``, ``burst``: see
    :func:`.server.prepare_drain`)."""
    arguments = _arguments(
        engine=engine,
        drivers=drivers,
        peers=names,
        jobs=jobs,
        consumers=consumers,
        batch=batches,
        variants=variants,
    )
    unknown = [n for n in names if n not in PEERS]
    if unknown:
        raise ValueError(f"unknown peers {unknown}: choose from {', '.join(PEERS)}")
    if options.connections is not None:
        arguments["connections"] = options.connections
        alone = [n for n in names if n not in SHARED_CONNECTIONS]
        if alone:
            raise ValueError(
                f"--connections {options.connections}: peers {alone} cannot share fewer "
                f"connections than consumers; choose from {', '.join(sorted(SHARED_CONNECTIONS))}"
            )
    strange = [v for v in variants if v not in VARIANTS]
    if strange or not variants:
        raise ValueError(f"unknown variants {strange}: choose from {', '.join(VARIANTS)}")

    def measure(server: Server, progress: BenchProgress) -> Measured:
        results: list[Outcome] = []
        for variant in variants:
            for c, b in cells(consumers, batches):
                count = cell_jobs(jobs, c, b)
                for driver in drivers:
                    backend = Backend(
                        engine,
                        driver,
                        options.emulate,
                        variant=variant,
                        connections=options.connections,
                    )
                    results.append(
                        _drain_one(server, progress, backend, count, c, b, options.timeout)
                    )
                spec = DrainSpec(
                    jobs=count,
                    consumers=c,
                    batch=b,
                    timeout=options.timeout,
                    variant=variant,
                    connections=options.connections,
                )
                for name in names:
                    label = f"{name} c={c} b={b} [{variant}]"
                    results.append(
                        run_isolated(progress, label, count, _peer_cell, name, server.dsn, spec)
                    )
        rows = _rows(results)
        ratios = _ratios(rows, names)
        enqueue_rows = _enqueue_ratios(rows, names)
        ratio_columns = [
            Column("variant", "variant", justify="left"),
            Column("consumers", "consumers"),
            Column("batch", "batch"),
            Column("alkstore", "alkstore jobs/s"),
            *(Column(name, f"{name} jobs/s") for name in names),
            *(Column(f"{name} ratio", f"alkstore / {name}", 2) for name in names),
        ]
        tables = [
            Table(f"peers: {cell_jobs_rule(jobs)}", PEER_COLUMNS, rows, [VARIANT_NOTE]),
            Table("alkstore / peer (jobs/s of the best alkstore driver)", ratio_columns, ratios),
            Table(
                "batch insert",
                ENQUEUE_COLUMNS,
                enqueue_rows,
                [
                    "each system's fastest driver; a driver's rate: the median over its cells "
                    "of the pre-enqueue rate"
                ],
            ),
        ]
        return Measured(
            {"results": rows, "ratios": ratios, "enqueue": enqueue_rows},
            tables,
            _throughput_chart(rows),
            environment=peer_versions(list(names)),
        )

    return run("peers", options, arguments, measure)


PEER_COLUMNS = (DRAIN_COLUMNS[0], Column("variant", "variant", justify="left"), *DRAIN_COLUMNS[1:])
"""The drain columns with the variant after the system."""

VARIANT_NOTE = (
    "steady: each system's tables VACUUM ANALYZEd and a CHECKPOINT after its prefill (the "
    "headline figures); burst: a CHECKPOINT only, the drain plans without the prefill's "
    "statistics"
)


def _ratios(rows: Sequence[Row], names: Sequence[str]) -> list[Row]:
    out: list[Row] = []
    variants = list(dict.fromkeys(r.get("variant") for r in rows))
    keys = sorted({(r["consumers"], r["batch"]) for r in rows}, key=lambda k: (k[1], k[0]))
    for variant, (c, b) in ((v, k) for v in variants for k in keys):
        here = [
            r
            for r in rows
            if r["consumers"] == c and r["batch"] == b and r.get("variant") == variant
        ]
        ours = [r["jobs_per_s"] for r in here if r["system"] == "alkstore" and r["available"]]
        best = max(ours) if ours else None
        row: Row = {"variant": variant, "consumers": c, "batch": b, "alkstore": best}
        for name in names:
            peer = next((r for r in here if r["system"] == name), None)
            if peer is None or not peer["available"]:
                reason = peer.get("reason") if peer else "not run"
                row[name] = f"not available: {reason}"
                row[f"{name} ratio"] = None
            else:
                row[name] = peer["jobs_per_s"]
                row[f"{name} ratio"] = _ratio(best, peer["jobs_per_s"])
        out.append(row)
    return out


def _median(values: Sequence[float]) -> float | None:
    ordered = sorted(values)
    return ordered[len(ordered) // 2] if ordered else None


def _enqueue_ratios(rows: Sequence[Row], names: Sequence[str]) -> list[Row]:
    """Each system's batch-insert rate: that of its fastest driver, each driver's rate the
    median of its cells (the same rule for alkstore and for every peer: a system is not
    judged by a driver its users would not pick for sending)."""

    def best_of(system: str) -> tuple[str | None, float | None]:
        by_driver: dict[str, list[float]] = {}
        for r in rows:
            if r["system"] == system and r["available"] and r.get("enqueue_jobs_per_s"):
                by_driver.setdefault(r["driver"], []).append(r["enqueue_jobs_per_s"])
        rates = {driver: _median(values) or 0.0 for driver, values in by_driver.items()}
        if not rates:
            return None, None
        driver = max(rates, key=rates.__getitem__)
        return driver, rates[driver]

    driver, ours = best_of("alkstore")
    result: list[Row] = [
        {"system": "alkstore", "driver": driver, "enqueue_jobs_per_s": ours, "ratio": None}
    ]
    for name in names:
        their_driver, theirs = best_of(name)
        result.append(
            {
                "system": name,
                "driver": their_driver,
                "enqueue_jobs_per_s": theirs,
                "ratio": ours / theirs if ours and theirs else None,
            }
        )
    return result
