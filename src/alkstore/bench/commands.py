"""The ``alkstore bench`` commands: each measures, prints its tables and saves its results.

:func:`run` holds what every command shares: find or start the server, warn when it is not
durable, show progress, fingerprint the environment, write the JSON and draw the chart. Each
command function only says what to measure and which tables to show.
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs

from ..engines import engine_class
from . import enqueue as enqueue_bench
from . import event_loop
from . import latency as latency_bench
from . import pressure as pressure_bench
from . import rss as rss_bench
from . import scale as scale_bench
from .drain import TELEMETRY_LABEL, Backend, drain_alkstore
from .environment import fingerprint
from .isolation import run_isolated
from .peers import LATENCY_PEERS, PEERS, DrainSpec, peer_versions, run_peer
from .progress import Progress
from .report import (
    DRAIN_COLUMNS,
    BenchProgress,
    Column,
    default_json_path,
    err,
    plot_bars,
    plot_throughput,
    print_table,
    write_json,
)
from .results import Outcome, Unavailable
from .server import STEADY, VARIANTS, Server, bench_server

Row = dict[str, Any]
T = TypeVar("T")


@attrs.frozen
class Table:
    """A table to print: title, columns, rows and notes under it."""

    title: str
    columns: Sequence[Column]
    rows: Sequence[Row]
    notes: Sequence[str] = ()


@attrs.frozen
class Measured:
    """What a command measured: the JSON sections, the tables, and what to chart."""

    sections: Mapping[str, Any]
    """Top-level JSON keys -> values (``results`` at least)."""
    tables: Sequence[Table]
    plot: Callable[[Path, str], Path] | None = None
    environment: Mapping[str, Any] = attrs.field(factory=dict)
    """Extra fingerprint entries (peer versions)."""


@attrs.frozen(kw_only=True)
class Options:
    """What every command takes."""

    dsn: str | None = None
    json_path: Path | None = None
    plot_path: Path | None = None
    server_settings: Mapping[str, str] = attrs.field(factory=dict)
    timeout: float = 1800.0
    progress: bool = True
    emulate: bool = False
    """Run the engine behind its emulation guard on stock PostgreSQL (``--emulate``)."""
    pg_version: int | None = None
    """Major version of the throwaway server (``--pg-version``; None: the system's)."""
    pgbouncer: bool = False
    """Measured stores connect through a throwaway PgBouncer (``--pgbouncer``; drain only)."""
    event_loop: str = event_loop.DEFAULT
    """The loop async cells run on (``--event-loop``, :mod:`.event_loop`)."""


def run(
    command: str,
    options: Options,
    arguments: Mapping[str, Any],
    measure: Callable[[Server, BenchProgress], Measured],
) -> dict[str, Any]:
    """Run one command end to end; returns the JSON document it wrote."""
    started = dt.datetime.now(dt.UTC)
    event_loop.choose(options.event_loop)
    with bench_server(
        options.dsn, options.server_settings, options.pg_version, options.pgbouncer
    ) as server:
        label = server.durability.label
        if not server.durability.durable:
            err.print(
                f"[bold yellow]warning:[/bold yellow] the server is {label}: these figures "
                "are not comparable to durable ones and must not be used as headline figures"
            )
        with BenchProgress(options.progress) as progress:
            measured = measure(server, progress)
        environment = fingerprint(
            server, {"event_loop": event_loop.described(), "peers": dict(measured.environment)}
        )
    document: dict[str, Any] = {
        "command": command,
        "arguments": dict(arguments),
        "durability": label,
        "started_at": started.isoformat(),
        "finished_at": dt.datetime.now(dt.UTC).isoformat(),
        "environment": environment,
        **measured.sections,
    }
    for table in measured.tables:
        print_table(f"{table.title} [{label}]", table.columns, table.rows, table.notes)
    path = write_json(options.json_path or default_json_path(command), document)
    err.print(f"results written to {path}")
    if options.plot_path is not None and measured.plot is not None:
        chart = measured.plot(options.plot_path, f"alkstore bench {command} ({label})")
        err.print(f"chart written to {chart}")
    return document


def _arguments(**values: Any) -> dict[str, Any]:
    """The ``arguments`` section of a document: ``values`` with every sequence made a list."""
    return {
        key: list(value) if isinstance(value, Sequence) and not isinstance(value, str) else value
        for key, value in values.items()
    }


def cells(consumers: Sequence[int], batches: Sequence[int]) -> list[tuple[int, int]]:
    """Every (consumers, batch) pair, batch-major."""
    return [(c, b) for b in batches for c in consumers]


def _schema(kind: str) -> str:
    return f"{kind}_bench_{os.getpid()}"


def _drain_one(
    server: Server,
    progress: BenchProgress,
    backend: Backend,
    jobs: int,
    consumers: int,
    batch: int,
    timeout: float,
) -> Outcome:
    """One alkstore drain cell, in a process of its own."""
    return run_isolated(
        progress,
        backend.cell(consumers, batch).description,
        jobs,
        _alkstore_cell,
        server.dsn,
        backend,
        jobs,
        consumers,
        batch,
        timeout,
    )


def _alkstore_cell(
    progress: Progress,
    dsn: str,
    backend: Backend,
    jobs: int,
    consumers: int,
    batch: int,
    timeout: float,
) -> Outcome:
    """The body of :func:`_drain_one` (runs in the child process)."""
    try:
        return drain_alkstore(
            dsn,
            backend,
            jobs=jobs,
            consumers=consumers,
            batch=batch,
            schema=_schema("alkstore"),
            progress=progress,
            timeout=timeout,
        )
    except Exception as exc:
        # An engine that cannot be loaded (ImportError: e.g. its emulation guard) is "not
        # available"; any other error (e.g. serialization failures past the retry limit) is a
        # finding of the run: reported as "failed" in its cell, and the exit status is 1.
        failed = "" if isinstance(exc, ImportError) else "failed: "
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return Unavailable(
            cell=backend.cell(consumers, batch),
            reason=f"{failed}{type(exc).__name__}: {first_line}",
        )


def _peer_cell(progress: Progress, name: str, dsn: str, spec: DrainSpec) -> Outcome:
    """One peer drain cell (runs in the child process)."""
    return run_peer(name, dsn, spec, _schema("peer"), progress)


def _rows(results: Sequence[Outcome]) -> list[Row]:
    return [r.to_json() for r in results]


def _throughput_chart(rows: Sequence[Row]) -> Callable[[Path, str], Path]:
    return lambda path, title: plot_throughput(path, title, rows)


def _bar_chart(ylabel: str, values: Mapping[str, float]) -> Callable[[Path, str], Path]:
    return lambda path, title: plot_bars(path, title, ylabel, values)


def _each(
    progress: BenchProgress, description: str, items: Sequence[T], one: Callable[[T], Row]
) -> list[Row]:
    """``one(item)`` for every item in turn, counted on a progress bar."""
    rows: list[Row] = []
    with progress.track(description, len(items), lambda: len(rows)):
        for item in items:
            rows.append(one(item))
    return rows


# --- drain ---------------------------------------------------------------------------------


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
                    telemetry_sample=1.0 if telemetry_sample is None else telemetry_sample,
                ),
                jobs,
                c,
                b,
                options.timeout,
            ).to_json()
            for scenario in scenarios
            for d in drivers
            for index, (c, b) in enumerate(cells(consumers, batches))
            for measured in _telemetry_order(telemetry, index)
        ]
        tables = [Table(f"drain: {jobs:,} jobs", DRAIN_COLUMNS, rows)]
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


def _ratio(a: float | None, b: float | None) -> float | None:
    """``a / b``, or None when either is missing or zero."""
    return a / b if a and b else None


# --- contention ----------------------------------------------------------------------------

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


# --- latency -------------------------------------------------------------------------------


def latency(
    options: Options,
    *,
    engine: str,
    drivers: Sequence[str],
    rate: float,
    duration: float,
    poll_interval: float,
    batch: int,
    peers: Sequence[str] = LATENCY_PEERS,
) -> dict[str, Any]:
    """``bench latency``: send -> consumer latency of a polling consumer and of ``work()``,
    then of each of ``peers``' workers, in the same run."""
    arguments = _arguments(
        engine=engine,
        drivers=drivers,
        rate=rate,
        duration=duration,
        poll_interval=poll_interval,
        batch=batch,
        peers=peers,
    )
    unknown = [n for n in peers if n not in LATENCY_PEERS]
    if unknown:
        raise ValueError(f"unknown latency peers {unknown}: choose from {', '.join(LATENCY_PEERS)}")

    def measure(server: Server, progress: BenchProgress) -> Measured:
        def one(cell: tuple[str, str]) -> Row:
            driver, consumer = cell
            return latency_bench.latency_cell(
                server.dsn,
                Backend(engine, driver, options.emulate),
                rate=rate,
                duration=duration,
                poll_interval=poll_interval,
                batch=batch,
                schema=_schema("alkstore"),
                consumer=consumer,
            )

        consumers = latency_bench.CONSUMERS
        rows = _each(progress, "latency cells", [(d, c) for d in drivers for c in consumers], one)

        def peer(name: str) -> Row:
            return latency_bench.peer_latency_cell(
                name,
                server.dsn,
                rate=rate,
                duration=duration,
                concurrency=batch,
                schema=_schema("peer"),
            )

        rows += _each(progress, "peer latency cells", list(peers), peer)
        notes = [
            f"poll: a consumer fetches up to {batch} jobs and sleeps "
            f"{poll_interval * 1000:g} ms after any fetch that was not full (send start -> "
            "fetch returned). "
            f"work(): store.work(concurrency={batch}) woken by LISTEN/NOTIFY, sends from a "
            "second store (send start -> handler start; pg8000 cannot listen, so it polls). "
            f"Peers: their workers (concurrency {batch}) woken by NOTIFY, sends from a second "
            "connection (send start -> handler start). send call p50/p99: how long each send "
            "took (a durable commit waits for its WAL flush: the floor under every row). "
            "send returned->handler (work() and peers): from the send's return (its commit "
            "acknowledged) to the handler's start (negative when the handler started before "
            "the sender read its commit's answer)."
        ]
        table = Table(
            f"latency: {rate:g} jobs/s for {duration:g} s", latency_bench.COLUMNS, rows, notes
        )
        stage_rows = [r for r in rows if r.get("stamped") is not None]
        stage_notes = [
            "work() rows, ms: send = the send call; send start->listener = until the "
            "store's listener received the NOTIFY; listener->fetcher = until the woken fetch "
            "loop ran; claim = the claim statement; claimed->handler = until the handler "
            "started. Jobs stamped: those claimed by a woken fetch loop (the rest were "
            "claimed by a slot's complete_and_fetch)."
        ]
        stage_table = Table(
            "work() stage breakdown", latency_bench.STAGE_COLUMNS, stage_rows, stage_notes
        )
        chart = _bar_chart(
            "send -> fetch p50 / p99 ms",
            {
                f"{r['system']} {r['driver']} {r['consumer']} {q}": r[f"{q}_ms"] or 0.0
                for r in rows
                if r.get("available", True)
                for q in ("p50", "p99")
            },
        )
        tables = [table, stage_table] if stage_rows else [table]
        return Measured({"results": rows}, tables, chart)

    return run("latency", options, arguments, measure)


# --- rss -----------------------------------------------------------------------------------


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


# --- scale ---------------------------------------------------------------------------------


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


# --- pressure ------------------------------------------------------------------------------


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


# --- peers ---------------------------------------------------------------------------------

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
    strange = [v for v in variants if v not in VARIANTS]
    if strange or not variants:
        raise ValueError(f"unknown variants {strange}: choose from {', '.join(VARIANTS)}")

    def measure(server: Server, progress: BenchProgress) -> Measured:
        results: list[Outcome] = []
        for variant in variants:
            for c, b in cells(consumers, batches):
                for driver in drivers:
                    backend = Backend(engine, driver, options.emulate, variant=variant)
                    results.append(
                        _drain_one(server, progress, backend, jobs, c, b, options.timeout)
                    )
                spec = DrainSpec(
                    jobs=jobs, consumers=c, batch=b, timeout=options.timeout, variant=variant
                )
                for name in names:
                    label = f"{name} c={c} b={b} [{variant}]"
                    results.append(
                        run_isolated(progress, label, jobs, _peer_cell, name, server.dsn, spec)
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
            Table(f"peers: {jobs:,} jobs", PEER_COLUMNS, rows, [VARIANT_NOTE]),
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


__all__ = [
    "Measured",
    "Options",
    "Table",
    "cells",
    "contention",
    "drain",
    "enqueue",
    "latency",
    "peers",
    "rss",
    "run",
    "scale",
]
