"""``bench pressure``: a paced drain while the MVCC horizon is held.

A producer sends ``rate`` jobs a second and ``consumers`` loops fetch ``batch`` at a time and
complete them (sleeping ``poll`` seconds after an empty fetch), for ``before + hold + after``
seconds. During the ``hold`` another session pins the MVCC horizon, so no dead job version can
be vacuumed: ``idle`` is one session idle in a transaction that has an xid; ``readers`` is
four REPEATABLE READ sessions, each scanning the system's job table once a second in one long
transaction. Each system records when it sent, completed and fetched (seconds since its
clock started); a sampler reads the dead tuples and the size of the system's schema and the
server's CPU every window. :func:`phases` turns that into one row per phase.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import attrs
import psycopg

from ..engines.postgres.identifiers import quote_schema
from .drain import Backend, job_specs, numbered_batches
from .measure import local_postmaster, percentile, server_cpu_seconds
from .peers import pgboss
from .peers.rawsql import Connections, Statements
from .report import Column
from .server import create_schema, drop_schema, prepare_drain

HOLDS = ("idle", "readers")
"""What pins the horizon during the hold (see the module docstring)."""
SYSTEMS = ("alkstore", "raw-sql", "pg-boss")
"""The systems ``bench pressure`` drives."""
READERS = 4
"""Sessions of the ``readers`` hold."""
READER_PAUSE = 1.0
"""Seconds a reader waits between two scans of its long transaction."""
SEND_TICK = 0.05
"""Seconds between two sends of the paced producer."""
QUEUE = "bench"


@attrs.frozen(kw_only=True)
class PressureSpec:
    """The shape of one pressure cell."""

    rate: float
    consumers: int
    batch: int
    before: float
    hold: float
    after: float
    window: float
    poll: float
    timeout: float = 60.0
    """Seconds past its end a system may take to stop before it is abandoned."""
    history: int = 0
    """Jobs sent to the queue and completed before the clock starts, then ``VACUUM
    ANALYZE`` and ``CHECKPOINT``: a queue that has been running for a while, whose
    statistics know its size (the ``steady`` preparation of ``bench peers``)."""

    @property
    def seconds(self) -> float:
        """The whole run: before, hold and after."""
        return self.before + self.hold + self.after


@attrs.define
class Trace:
    """What one system's run recorded, in seconds since its clock started."""

    sent: list[tuple[float, int]] = attrs.field(factory=list)
    done: list[tuple[float, int]] = attrs.field(factory=list)
    fetches: list[tuple[float, float]] = attrs.field(factory=list)
    """(start, duration) of every fetch, empty ones included."""
    duplicates: int = 0
    reordered: int | None = 0
    """Jobs a consumer fetched after a job sent later than them (one priority: a consumer's
    fetches follow send order); None where not checked (pg-boss's ids are random)."""


@attrs.frozen
class Sample:
    """The server seen by the sampler at ``at`` seconds."""

    at: float
    dead_tuples: int
    table_bytes: int
    server_cpu_s: float | None


Started = Callable[[], None]
"""Called by a system when its clock starts (time 0 of its trace)."""


def paced_loops(
    spec: PressureSpec,
    send: Callable[[int, int], None],
    fetch: Callable[[int], Sequence[tuple[int, Any]]],
    complete: Callable[[Sequence[Any]], object],
    started: Started,
) -> Trace:
    """The producer and consumer threads of a Python system. ``send(first, count)`` sends
    jobs numbered from ``first``; ``fetch`` returns (number, handle) pairs; ``complete``
    takes the handles."""
    trace = Trace()
    seen: set[int] = set()
    lock = threading.Lock()
    began = time.perf_counter()
    end = began + spec.seconds

    def produce() -> None:
        sent = 0
        while (now := time.perf_counter()) < end:
            due = int(spec.rate * (now - began)) - sent
            if due > 0:
                send(sent, due)
                sent += due
                trace.sent.append((time.perf_counter() - began, due))
            time.sleep(SEND_TICK)

    def consume() -> None:
        last = -1
        while (t0 := time.perf_counter()) < end:
            jobs = fetch(spec.batch)
            trace.fetches.append((t0 - began, time.perf_counter() - t0))
            if not jobs:
                time.sleep(spec.poll)
                continue
            numbers = [n for n, _h in jobs]
            with lock:
                trace.duplicates += sum(1 for n in numbers if n in seen)
                seen.update(numbers)
            late = sum(1 for n in numbers if n < last)
            with lock:
                trace.reordered = (trace.reordered or 0) + late
            last = max(last, *numbers)
            complete([h for _n, h in jobs])
            trace.done.append((time.perf_counter() - began, len(jobs)))

    threads = [threading.Thread(target=produce)]
    threads += [threading.Thread(target=consume) for _ in range(spec.consumers)]
    started()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(spec.seconds + spec.timeout)
    return trace


def alkstore_run(
    dsn: str, spec: PressureSpec, schema: str, started: Started, backend: Backend
) -> Trace:
    """alkstore through a sync driver: ``send_many`` and ``fetch`` + ``complete`` loops."""
    store = backend.open_sync(dsn, schema, spec.consumers + 1)
    try:
        store.create_queue(QUEUE)
        for numbers in numbered_batches(spec.history):
            sent = store.send_many(QUEUE, job_specs(-spec.history, len(numbers)))
            store.complete(QUEUE, [i for i in sent if i is not None], include_queued=True)
        if spec.history:
            prepare_drain(dsn)

        def send(first: int, count: int) -> None:
            store.send_many(QUEUE, job_specs(first, count))

        def fetch(n: int) -> list[tuple[int, Any]]:
            return [(int(j.data["n"]), j) for j in store.fetch(QUEUE, batch_size=n)]

        return paced_loops(spec, send, fetch, lambda done: store.complete(QUEUE, done), started)
    finally:
        store.close()


def raw_sql_run(dsn: str, spec: PressureSpec, schema: str, started: Started) -> Trace:
    """The raw-SQL ceiling of ``bench peers``: its table and its two statements."""
    sql = Statements(schema)
    create_schema(dsn, schema)
    pool = Connections(dsn, spec.consumers + 1)
    try:
        with pool.cursor() as cur:
            for ddl in sql.create:
                cur.execute(ddl)

        def send(first: int, count: int) -> None:
            data = [json.dumps({"n": n}) for n in range(first, first + count)]
            with pool.cursor() as cur:
                cur.execute(sql.insert, (data,), prepare=True)

        for numbers in numbered_batches(spec.history):
            send(-spec.history, len(numbers))
        if spec.history:
            with pool.cursor() as cur:
                cur.execute(sql.complete_all)
            prepare_drain(dsn)

        def fetch(n: int) -> list[tuple[int, Any]]:
            with pool.cursor() as cur:
                cur.execute(sql.claim, (n,), prepare=True)
                return [(int(data["n"]), job) for job, data in cur.fetchall()]

        def complete(ids: Sequence[Any]) -> None:
            with pool.cursor() as cur:
                cur.execute(sql.complete, (list(ids),), prepare=True)

        return paced_loops(spec, send, fetch, complete, started)
    finally:
        pool.close()


def _stats(dsn: str, schema: str) -> Callable[[], tuple[int, int]]:
    """A reader of the dead tuples and bytes (tables, indexes, TOAST) of ``schema``."""
    conn = psycopg.connect(dsn, autocommit=True)

    def read() -> tuple[int, int]:
        if conn.closed:
            return 0, 0
        row = conn.execute(
            """SELECT coalesce(sum(n_dead_tup), 0), coalesce(sum(pg_total_relation_size(relid)), 0)
            FROM pg_stat_user_tables WHERE schemaname = %s""",
            (schema,),
        ).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    read.close = conn.close  # type: ignore[attr-defined]
    return read


@contextmanager
def held(dsn: str, hold: str, table: str, until: threading.Event) -> Iterator[None]:
    """Pin the horizon until the block ends (``hold``: see :data:`HOLDS`)."""
    if hold == "idle":
        with psycopg.connect(dsn) as conn:
            conn.execute("SELECT txid_current()")  # an xid: the horizon stops here
            yield
            conn.rollback()
        return

    # ``table`` is the schema's job table, its schema quoted by quote_schema.
    scan = f"SELECT count(*), max(length(data::text)) FROM {table}"

    def read(index: int) -> None:
        with psycopg.connect(dsn) as conn:
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            until.wait(index * READER_PAUSE / READERS)
            while not until.is_set():
                conn.execute(scan)
                until.wait(READER_PAUSE)
            conn.rollback()

    readers = [threading.Thread(target=read, args=(i,)) for i in range(READERS)]
    for reader in readers:
        reader.start()
    try:
        yield
    finally:
        until.set()
        for reader in readers:
            reader.join(60.0)


def pressure_cell(
    dsn: str,
    system: str,
    hold: str,
    spec: PressureSpec,
    schema: str,
    run: Callable[[str, PressureSpec, str, Started], Trace],
) -> tuple[Trace, list[Sample]]:
    """One system under one hold: its trace and the sampler's readings."""
    drop_schema(dsn, schema)
    postmaster = local_postmaster(dsn)
    samples: list[Sample] = []
    clock = threading.Event()
    stop = threading.Event()
    zero = [0.0]

    def started() -> None:
        zero[0] = time.perf_counter()
        clock.set()

    def timeline() -> None:
        if not clock.wait(spec.timeout + 600):
            return
        stats = _stats(dsn, schema)
        table = f"{quote_schema(schema)}.job"
        try:
            release = threading.Event()

            def sample_until(t: float) -> None:
                while not stop.is_set() and (now := time.perf_counter() - zero[0]) < t:
                    dead, size = stats()
                    cpu = None if postmaster is None else server_cpu_seconds(postmaster)
                    samples.append(Sample(now, dead, size, cpu))
                    stop.wait(min(spec.window, max(0.0, t - now)))

            sample_until(spec.before)
            with held(dsn, hold, table, release):
                sample_until(spec.before + spec.hold)
            sample_until(spec.seconds + spec.window / 2)
        finally:
            stats.close()  # type: ignore[attr-defined]

    sampler = threading.Thread(target=timeline)
    sampler.start()
    try:
        trace = run(dsn, spec, schema, started)
    finally:
        stop.set()
        clock.set()
        sampler.join(120.0)
        drop_schema(dsn, schema)
    return trace, samples


def alkstore_runner(backend: Backend) -> Callable[[str, PressureSpec, str, Started], Trace]:
    """:func:`alkstore_run` on ``backend``."""

    def run(dsn: str, spec: PressureSpec, schema: str, started: Started) -> Trace:
        return alkstore_run(dsn, spec, schema, started, backend)

    return run


PHASES = ("before", "during", "after")


def _bounds(spec: PressureSpec) -> dict[str, tuple[float, float]]:
    during = spec.before + spec.hold
    return {
        "before": (0.0, spec.before),
        "during": (spec.before, during),
        "after": (during, spec.seconds),
    }


def _depth_at(trace: Trace, t: float) -> int:
    sent = sum(n for at, n in trace.sent if at <= t)
    return sent - sum(n for at, n in trace.done if at <= t)


def windows(trace: Trace, spec: PressureSpec) -> list[dict[str, Any]]:
    """Per window of ``spec.window`` seconds: completions a second, the depth at its end and
    the claim's median and 99th percentile."""
    rows = []
    start = 0.0
    while start + spec.window <= spec.seconds + 1e-9:
        end = start + spec.window
        done = sum(n for at, n in trace.done if start <= at < end)
        durations = [d for at, d in trace.fetches if start <= at < end]
        rows.append(
            {
                "start_s": round(start, 3),
                "jobs_per_s": round(done / spec.window, 1),
                "depth": _depth_at(trace, end),
                "claim_p50_ms": _ms(percentile(durations, 50)),
                "claim_p99_ms": _ms(percentile(durations, 99)),
            }
        )
        start = end
    return rows


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def phases(
    system: str, hold: str, spec: PressureSpec, trace: Trace, samples: Sequence[Sample]
) -> list[dict[str, Any]]:
    """One row per phase: throughput, its worst window, depth, claim latency, dead tuples,
    size and server CPU per job."""
    rows = []
    per_window = windows(trace, spec)
    for phase, (start, end) in _bounds(spec).items():
        done = sum(n for at, n in trace.done if start <= at < end)
        durations = [d for at, d in trace.fetches if start <= at < end]
        inside = [w for w in per_window if start <= w["start_s"] < end]
        seen = [s for s in samples if start <= s.at < end + spec.window]
        # Not past the phase's end: the connections closing then move their CPU time to the
        # postmaster's children total only once reaped.
        cpu = [s.server_cpu_s for s in seen if s.server_cpu_s is not None and s.at <= end]
        rows.append(
            {
                "system": system,
                "hold": hold,
                "phase": phase,
                "seconds": end - start,
                "jobs_per_s": round(done / (end - start), 1) if end > start else None,
                "worst_window_share": (
                    round(min(w["jobs_per_s"] for w in inside) / spec.rate, 3) if inside else None
                ),
                "max_depth": max((w["depth"] for w in inside), default=None),
                "claim_p50_ms": _ms(percentile(durations, 50)),
                "claim_p99_ms": _ms(percentile(durations, 99)),
                "fetches": len(durations),
                "dead_tuples": max((s.dead_tuples for s in seen), default=None),
                "table_mb": round(seen[-1].table_bytes / 2**20, 1) if seen else None,
                "server_cpu_us_per_job": (
                    round((cpu[-1] - cpu[0]) * 1e6 / done, 1) if len(cpu) > 1 and done else None
                ),
                "duplicates": trace.duplicates,
                "reordered": trace.reordered,
            }
        )
    return rows


def sent_total(trace: Trace) -> int:
    """Jobs the system sent."""
    return sum(n for _at, n in trace.sent)


def settled_total(trace: Trace) -> int:
    """Jobs the system completed."""
    return sum(n for _at, n in trace.done)


def pgboss_run(dsn: str, spec: PressureSpec, schema: str, started: Started) -> Trace:
    """pg-boss's fetch/complete loops in Node (``benchmarks/peers/pgboss/pressure.mjs``)."""
    shape = {
        "rate": spec.rate,
        "consumers": spec.consumers,
        "batch": spec.batch,
        "seconds": spec.seconds,
        "poll": spec.poll,
        "history": spec.history,
    }
    data = pgboss.pressure(dsn, schema, shape, started, spec.seconds + spec.timeout + 120)
    return Trace(
        sent=[(float(t), int(n)) for t, n in data["sent"]],
        done=[(float(t), int(n)) for t, n in data["done"]],
        fetches=[(float(t), float(d)) for t, d in data["fetches"]],
        duplicates=int(data["duplicates"]),
        reordered=None,
    )


COLUMNS = (
    Column("system", "system", justify="left"),
    Column("hold", "hold", justify="left"),
    Column("phase", "phase", justify="left"),
    Column("jobs_per_s", "jobs/s", 1),
    Column("worst_window_share", "worst window / rate", 2),
    Column("max_depth", "max depth"),
    Column("claim_p50_ms", "claim p50 ms", 2),
    Column("claim_p99_ms", "claim p99 ms", 2),
    Column("dead_tuples", "dead tuples"),
    Column("table_mb", "tables MiB", 1),
    Column("server_cpu_us_per_job", "server CPU µs/job", 1),
    Column("duplicates", "duplicates"),
)
"""The columns of the pressure table (one row per system, hold and phase)."""


def _runner(system: str, backend: Backend) -> Callable[[str, PressureSpec, str, Started], Trace]:
    if system == "alkstore":
        return alkstore_runner(backend)
    return raw_sql_run if system == "raw-sql" else pgboss_run


def measure(
    dsn: str,
    systems: Sequence[str],
    holds: Sequence[str],
    spec: PressureSpec,
    backend: Backend,
    schema: str,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Every system under every hold, systems interleaved within a hold: the phase rows,
    and the windows (per system and hold) for the JSON."""
    rows: list[dict[str, Any]] = []
    timelines: list[dict[str, Any]] = []
    for hold in holds:
        for system in systems:
            reason = pgboss.unavailable() if system == "pg-boss" else None
            if reason is not None:
                rows.append({"system": system, "hold": hold, "available": False, "reason": reason})
                continue
            trace, samples = pressure_cell(
                dsn, system, hold, spec, schema, _runner(system, backend)
            )
            rows += phases(system, hold, spec, trace, samples)
            timelines.append(
                {
                    "system": system,
                    "hold": hold,
                    "sent": sent_total(trace),
                    "completed": settled_total(trace),
                    "windows": windows(trace, spec),
                    "samples": [attrs.asdict(s) for s in samples],
                }
            )
    return rows, timelines
