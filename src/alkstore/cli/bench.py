"""``alkstore bench``: drain, contention, enqueue, latency, rss, scale, peers and pglite-start
benchmarks.

Every subcommand but ``pglite-start`` takes ``--dsn`` (default: a throwaway durable
PostgreSQL), ``--json FILE`` (default ``bench-results/<command>-<timestamp>.json``) and
``--plot FILE.png``; see ``docs/benchmarks.md``. The exit status is 1 when an alkstore drain
delivered a job twice or left one unfinished.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..bench import commands, event_loop
from ..bench.drain import DEFAULT_TIMEOUT, DRIVERS, HANDOFF, SYNC_DRIVERS, WORK
from ..bench.peers import DEFAULT_PEERS, LATENCY_PEERS, PEERS
from ..bench.pressure import HOLDS, SYSTEMS, PressureSpec
from ..bench.report import err
from ..bench.server import STEADY, VARIANTS
from .common import positive_int


def _connections_argument(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--connections", type=positive_int, default=None, help=help)


def int_list(text: str) -> list[int]:
    """``1,8,32`` -> ``[1, 8, 32]`` (each at least 1)."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a comma-separated list of integers: {text!r}"
        ) from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"every value must be an integer >= 1: {text!r}")
    return values


def name_list(choices: Sequence[str]) -> Any:
    """A parser of comma-separated names, each one of ``choices``."""

    def parse(text: str) -> list[str]:
        names = [part.strip() for part in text.split(",") if part.strip()]
        bad = [n for n in names if n not in choices]
        if bad or not names:
            raise argparse.ArgumentTypeError(
                f"unknown {', '.join(bad) or 'empty list'}: choose from {', '.join(choices)}"
            )
        return names

    return parse


def latency_peers(text: str) -> list[str]:
    """``bench latency --peers``: comma-separated latency peers, or ``none`` (alkstore alone)."""
    if text.strip().lower() == "none":
        return []
    names: list[str] = name_list(LATENCY_PEERS)(text)
    return names


def setting(text: str) -> tuple[str, str]:
    """``name=value`` of a server setting."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, not {text!r}")
    return name.strip(), value.strip()


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dsn", help="postgresql:// URI (default: start a throwaway durable PostgreSQL)"
    )
    parser.add_argument("--json", type=Path, help="results file (default bench-results/…)")
    parser.add_argument("--plot", type=Path, help="also draw a PNG chart here")
    parser.add_argument(
        "--pg-setting",
        type=setting,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra setting of the throwaway server (repeatable)",
    )
    parser.add_argument(
        "--pg-version",
        type=int,
        metavar="MAJOR",
        help="PostgreSQL major version of the throwaway server, 14 to 18 (default: the "
        "system's; others are installed into ~/.cache/alkstore once)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds one timed drain may take (default %(default)g)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument(
        "--event-loop",
        choices=event_loop.EVENT_LOOPS,
        default=event_loop.DEFAULT,
        help="the loop async drivers and async peers run on (default %(default)s)",
    )


def _backend(parser: argparse.ArgumentParser, engine: bool = True) -> None:
    if engine:
        parser.add_argument("--engine", default="postgres", help="alkstore engine")
        parser.add_argument(
            "--emulate",
            action="store_true",
            help="run the engine behind its emulation guard on stock PostgreSQL (never "
            "switched on by itself: without it the engine's SQL goes to the server as is)",
        )
    parser.add_argument(
        "--driver",
        type=name_list([*DRIVERS, *(d + s for d in DRIVERS for s in (HANDOFF, WORK))]),
        default=["psycopg"],
        help=f"comma-separated: {', '.join(DRIVERS)} (default psycopg); a name followed by "
        f"{HANDOFF} drains with complete_and_fetch, by {WORK} through store.work()",
    )


SCALING = [1, 8, 32, 64, 128, 256]
"""The consumer counts of ``drain`` and ``peers`` by default: a claim's scaling up to 256."""


def _drain_shape(
    parser: argparse.ArgumentParser, jobs: int = 50_000, consumers: Sequence[int] = (1, 8, 32, 64)
) -> None:
    parser.add_argument("--jobs", type=int, default=jobs, help="jobs per cell (%(default)s)")
    parser.add_argument(
        "--consumers",
        type=int_list,
        default=list(consumers),
        help=f"comma-separated consumer counts ({','.join(map(str, consumers))})",
    )
    parser.add_argument(
        "--batch",
        type=int_list,
        default=[1, 10, 100],
        help="comma-separated fetch batch sizes (1,10,100)",
    )


def _subcommand(
    sub: Any,
    name: str,
    summary: str,
    handler: Callable[[argparse.Namespace], int],
    *,
    engine: bool = True,
    grid: bool = False,
    consumers: Sequence[int] = SCALING,
) -> argparse.ArgumentParser:
    """Subcommand ``name`` with the options every command takes (and the drain grid's, of
    ``consumers`` by default)."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=summary)
    _common(parser)
    _backend(parser, engine=engine)
    if grid:
        _drain_shape(parser, consumers=consumers)
    parser.set_defaults(handler=handler)
    return parser


def register(subparsers: Any) -> None:
    """Add ``bench`` and its subcommands."""
    bench = subparsers.add_parser("bench", help="benchmarks (see docs/benchmarks.md)")
    sub = bench.add_subparsers(dest="bench_command", required=True)

    drain = _subcommand(
        sub, "drain", "N consumers fetch + complete pre-enqueued jobs", _drain, grid=True
    )
    drain.add_argument(
        "--scenario",
        type=lambda text: text.split(","),
        default=["standard"],
        help="comma-separated queue policies: standard, singleton, key_strict_fifo "
        "(100 keys each; default standard)",
    )
    drain.add_argument(
        "--pgbouncer",
        action="store_true",
        help="the measured stores connect through a throwaway PgBouncer in transaction "
        "pooling mode in front of the server (Debian's pgbouncer, installed when missing)",
    )
    _connections_argument(
        drain,
        "server connections for the consumers' statements: the store's pool size "
        "(consumers beyond it wait for one), or with --pgbouncer the pooler's server pool "
        "(default: one connection per consumer)",
    )
    drain.add_argument(
        "--telemetry",
        action="store_true",
        help="also run each cell with OpenTelemetry on (SDK providers, spans dropped; "
        "needs alkstore[otel] and opentelemetry-sdk)",
    )
    drain.add_argument(
        "--telemetry-sample",
        type=float,
        metavar="SHARE",
        help="with --telemetry, record the spans of this share of the traces (0 < SHARE <= 1; "
        "default: every one)",
    )

    contention = _subcommand(
        sub,
        "contention",
        "SKIP LOCKED claim vs the lock-free atomic-UPDATE claim",
        _contention,
        engine=False,
        grid=True,
        consumers=(1, 8, 32, 64),
    )
    contention.add_argument(
        "--lockfree-engine",
        default="cockroachdb",
        help="engine whose claim is the atomic UPDATE, emulated on PostgreSQL (cockroachdb)",
    )

    enqueue = _subcommand(sub, "enqueue", "send, send_many and concurrent senders", _enqueue)
    enqueue.add_argument("--jobs", type=int, default=50_000, help="jobs per send_many cell")
    enqueue.add_argument("--send-jobs", type=int, default=5_000, help="jobs per send cell")
    enqueue.add_argument(
        "--senders",
        type=int_list,
        default=[1, 8],
        help="comma-separated concurrent sender counts (1,8)",
    )
    enqueue.add_argument("--batch-size", type=int, default=1000, help="jobs per send_many")

    latency = _subcommand(sub, "latency", "send -> fetch latency with a polling consumer", _latency)
    latency.add_argument("--rate", type=float, default=100.0, help="jobs sent per second")
    latency.add_argument("--duration", type=float, default=10.0, help="seconds of sending")
    latency.add_argument(
        "--poll-interval",
        type=float,
        default=0.05,
        help="seconds the consumer sleeps after a short fetch (0.05)",
    )
    latency.add_argument("--batch", type=int, default=10, help="consumer fetch batch size")
    latency.add_argument(
        "--peers",
        type=latency_peers,
        default=list(LATENCY_PEERS),
        help=f"comma-separated peers whose workers are measured too: {', '.join(LATENCY_PEERS)} "
        "(all), or none",
    )

    rss = _subcommand(sub, "rss", "worker RSS sampled through a drain through work()", _rss)
    rss.add_argument("--jobs", type=int, default=1_000_000, help="jobs drained (%(default)s)")
    rss.add_argument("--concurrency", type=int, default=8, help="worker concurrency (8)")
    rss.add_argument("--batch", type=int, default=100, help="worker batch_size (100)")
    rss.add_argument("--every", type=float, default=1.0, help="seconds between samples (1)")

    scale = _subcommand(sub, "scale", "fetch latency and drain rate vs queue depth", _scale)
    scale.add_argument(
        "--depths",
        type=int_list,
        default=[10_000, 100_000, 1_000_000, 10_000_000],
        help="comma-separated queued-job counts (10000,100000,1000000,10000000)",
    )
    scale.add_argument(
        "--finished",
        type=int,
        default=1_000_000,
        help="finished jobs retained beside the smallest depth (%(default)s; 0: no such scenario)",
    )
    scale.add_argument(
        "--burst",
        type=int,
        default=1_000_000,
        help="queued jobs of the scenario before any ANALYZE (%(default)s; 0: none)",
    )
    scale.add_argument("--samples", type=int, default=500, help="fetch-latency samples")
    scale.add_argument("--drain-jobs", type=int, default=10_000, help="jobs drained per scenario")
    scale.add_argument("--consumers", type=int, default=8, help="drain consumers")
    scale.add_argument("--batch", type=int, default=10, help="drain batch size")

    wal = sub.add_parser("wal", help="WAL bytes per job, alkstore beside raw SQL")
    _common(wal)
    wal.set_defaults(handler=_wal)
    wal.add_argument("--jobs", type=int, default=20_000, help="jobs per cell (%(default)s)")
    wal.add_argument(
        "--batch", type=int_list, default=[1, 100], help="comma-separated fetch batch sizes"
    )

    start = sub.add_parser("pglite-start", help="alkstore.connect('pglite://…') start time")
    start.add_argument("--runs", type=int, default=5, help="starts of each kind (5)")
    start.add_argument(
        "--no-uncached",
        action="store_true",
        help="leave out the fresh start without the cached database (initdb + migration)",
    )
    start.add_argument("--json", type=Path, help="results file (default bench-results/…)")
    start.set_defaults(handler=_pglite_start)

    pressure = _subcommand(
        sub, "pressure", "a paced drain while a transaction holds the MVCC horizon", _pressure
    )
    pressure.add_argument(
        "--systems",
        type=name_list(SYSTEMS),
        default=list(SYSTEMS),
        help=f"comma-separated: {', '.join(SYSTEMS)} (all)",
    )
    pressure.add_argument(
        "--hold",
        type=name_list(HOLDS),
        default=list(HOLDS),
        help="comma-separated: idle (a session idle in transaction), readers (four "
        "REPEATABLE READ sessions scanning) (both)",
    )
    pressure.add_argument("--rate", type=float, default=800.0, help="jobs sent a second (800)")
    pressure.add_argument("--consumers", type=int, default=32, help="fetch loops (32)")
    pressure.add_argument("--batch", type=int, default=8, help="fetch batch size (8)")
    pressure.add_argument("--before", type=float, default=30.0, help="seconds before the hold")
    pressure.add_argument("--hold-seconds", type=float, default=120.0, help="seconds held (120)")
    pressure.add_argument("--after", type=float, default=60.0, help="seconds after the hold (60)")
    pressure.add_argument("--window", type=float, default=10.0, help="window seconds (10)")
    pressure.add_argument(
        "--poll", type=float, default=0.1, help="seconds a consumer sleeps after an empty fetch"
    )
    pressure.add_argument(
        "--history",
        type=int,
        default=20_000,
        help="jobs sent and completed before the clock starts, then VACUUM ANALYZE (%(default)s)",
    )

    peers = _subcommand(
        sub, "peers", "alkstore, raw SQL, pg-boss, pgqueuer, procrastinate", _peers, grid=True
    )
    peers.add_argument(
        "--peers",
        type=name_list(tuple(PEERS)),
        default=list(DEFAULT_PEERS),
        help=f"comma-separated: {', '.join(PEERS)} (all but the raw-sql-* variants: lanes, gates)",
    )
    _connections_argument(
        peers,
        "server connections each system's consumers share, consumers beyond them waiting "
        "for one: alkstore's pool size, raw SQL's and pg-boss's (default: one connection "
        "per consumer)",
    )
    peers.add_argument(
        "--variant",
        type=name_list(VARIANTS),
        default=[STEADY],
        help="comma-separated: steady (VACUUM ANALYZE + CHECKPOINT after every system's "
        "prefill: the headline figures), burst (CHECKPOINT only, no statistics) (steady)",
    )


def _options(args: argparse.Namespace) -> commands.Options:
    if args.dsn and args.pg_version is not None:
        err.print("[red]--pg-version picks the throwaway server's version: not with --dsn[/red]")
        raise SystemExit(2)
    return commands.Options(
        dsn=args.dsn,
        json_path=args.json,
        plot_path=args.plot,
        server_settings=dict(args.pg_setting),
        timeout=args.timeout,
        progress=not args.no_progress,
        emulate=getattr(args, "emulate", False),
        pg_version=args.pg_version,
        pgbouncer=getattr(args, "pgbouncer", False),
        connections=getattr(args, "connections", None),
        event_loop=args.event_loop,
    )


def _status(document: Mapping[str, Any]) -> int:
    """1 when an alkstore drain failed, delivered a job twice or left jobs unfinished."""
    bad = [
        row
        for row in document.get("results", [])
        if row.get("system") == "alkstore"
        and (
            str(row.get("reason", "")).startswith("failed")
            or (
                row.get("available", True)
                and "duplicates" in row
                and (row["duplicates"] or row["completed"] != row["jobs"])
            )
        )
    ]
    for row in bad:
        err.print(f"[red]alkstore drain failed its checks:[/red] {row}")
    return 1 if bad else 0


def _grid(args: argparse.Namespace) -> dict[str, Any]:
    """The drain grid's keyword arguments: drivers, jobs, consumer counts and batch sizes."""
    return {
        "drivers": args.driver,
        "jobs": args.jobs,
        "consumers": args.consumers,
        "batches": args.batch,
    }


def _drain(args: argparse.Namespace) -> int:
    return _status(
        commands.drain(
            _options(args),
            engine=args.engine,
            scenarios=args.scenario,
            telemetry=args.telemetry,
            telemetry_sample=args.telemetry_sample,
            **_grid(args),
        )
    )


def _contention(args: argparse.Namespace) -> int:
    return _status(
        commands.contention(_options(args), lockfree_engine=args.lockfree_engine, **_grid(args))
    )


def _enqueue(args: argparse.Namespace) -> int:
    commands.enqueue(
        _options(args),
        engine=args.engine,
        drivers=args.driver,
        jobs=args.jobs,
        send_jobs=args.send_jobs,
        senders=args.senders,
        batch=args.batch_size,
    )
    return 0


def _latency(args: argparse.Namespace) -> int:
    commands.latency(
        _options(args),
        engine=args.engine,
        drivers=args.driver,
        rate=args.rate,
        duration=args.duration,
        poll_interval=args.poll_interval,
        batch=args.batch,
        peers=args.peers,
    )
    return 0


def _rss(args: argparse.Namespace) -> int:
    commands.rss(
        _options(args),
        engine=args.engine,
        drivers=args.driver,
        jobs=args.jobs,
        concurrency=args.concurrency,
        batch=args.batch,
        every=args.every,
    )
    return 0


def _scale(args: argparse.Namespace) -> int:
    for flag, value in (("--finished", args.finished), ("--burst", args.burst)):
        if value < 0:
            err.print(f"[red]{flag} must be 0 or more, not {value}[/red]")
            return 2
    commands.scale(
        _options(args),
        engine=args.engine,
        drivers=args.driver,
        depths=args.depths,
        finished=args.finished,
        burst=args.burst,
        samples=args.samples,
        drain_jobs=args.drain_jobs,
        consumers=args.consumers,
        batch=args.batch,
    )
    return 0


def _wal(args: argparse.Namespace) -> int:
    from ..bench.wal import wal

    wal(_options(args), jobs=args.jobs, batches=args.batch)
    return 0


def _pglite_start(args: argparse.Namespace) -> int:
    from ..bench.pglite_start import pglite_start

    if args.runs < 1:
        err.print(f"[red]--runs must be at least 1, not {args.runs}[/red]")
        return 2
    pglite_start(args.runs, uncached=not args.no_uncached, json_path=args.json)
    return 0


def _pressure(args: argparse.Namespace) -> int:
    drivers = [d for d in args.driver if d not in SYNC_DRIVERS]
    if drivers or len(args.driver) != 1:
        err.print(f"[red]--driver: one of {', '.join(SYNC_DRIVERS)}, not {args.driver}[/red]")
        return 2
    if args.history < 0:
        err.print(f"[red]--history must be 0 or more, not {args.history}[/red]")
        return 2
    times = {"--rate": args.rate, "--hold-seconds": args.hold_seconds, "--window": args.window}
    for flag, value in times.items():
        if value <= 0:
            err.print(f"[red]{flag} must be above 0, not {value}[/red]")
            return 2
    commands.pressure(
        _options(args),
        engine=args.engine,
        driver=args.driver[0],
        systems=args.systems,
        holds=args.hold,
        spec=PressureSpec(
            rate=args.rate,
            consumers=args.consumers,
            batch=args.batch,
            before=args.before,
            hold=args.hold_seconds,
            after=args.after,
            window=args.window,
            poll=args.poll,
            timeout=min(args.timeout, 600.0),
            history=args.history,
        ),
    )
    return 0


def _peers(args: argparse.Namespace) -> int:
    return _status(
        commands.peers(
            _options(args),
            engine=args.engine,
            names=args.peers,
            variants=args.variant,
            **_grid(args),
        )
    )


__all__ = ["int_list", "latency_peers", "name_list", "register", "setting"]
