"""One drain cell of alkstore: pre-enqueue, warm up, then time N consumers fetching + completing.

Sync drivers (``psycopg``, ``pg8000``) drain with threads, async ones (``psycopg-async``,
``asyncpg``) with asyncio tasks on one event loop. Each cell runs in a schema of its own,
dropped afterwards, so every cell starts from an empty job table. The store's pool holds one
connection per consumer; an untimed warm-up drain opens them (and lets the driver prepare its
statements) before the clock starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from typing import Any

import attrs

import alkstore

from ..core.records import Job
from ..core.states import JobState
from . import event_loop
from .loops import LoopOutcome, Tally, run_tasks, run_threads, tracked
from .measure import (
    CpuUse,
    cpu_window,
    local_postmaster,
    peak_rss_bytes,
    peak_rss_mb,
    reset_peak_rss,
)
from .progress import Progress
from .results import Cell, DrainResult
from .server import STEADY, drop_schema, prepare_drain
from .telemetry_bench import instrument_for_bench
from .work_drain import work_tasks, work_threads

SYNC_DRIVERS = ("psycopg", "pg8000")
"""Driver names that drain with threads."""
ASYNC_DRIVERS = {"psycopg-async": "psycopg", "asyncpg": "asyncpg"}
"""Driver names that drain with asyncio tasks -> the driver ``connect_async`` is given."""
DRIVERS = (*SYNC_DRIVERS, *ASYNC_DRIVERS)
"""Every driver name the benchmarks accept (each also with :data:`HANDOFF` appended)."""
HANDOFF = "+handoff"
"""Driver-name suffix: consumers complete and fetch in one ``complete_and_fetch`` call."""
WORK = "+work"
"""Driver-name suffix: the drain runs through ``store.work()`` (see :mod:`.work_drain`)."""
GATED = "+gate"
"""Engine-name suffix: the store gates its claims (``engine_options={"claim_gate": True}``,
docs/benchmarks.md "Claim scaling")."""
GATED_AUTO = "+gate-auto"
"""Engine-name suffix: the store gates each queue's claims while the gate pays
(``engine_options={"claim_gate": "auto"}``)."""

SEND_BATCH = 1000
"""Jobs per ``send_many`` when pre-enqueueing."""
QUEUE = "bench"
"""The queue every cell drains."""
WARMUP_QUEUE = "bench_warmup"
WARMUP_MAX_JOBS = 5000
SCENARIOS = ("standard", "singleton", "key_strict_fifo")
TELEMETRY_LABEL = " [otel]"
"""Appended to the engine of a cell drained with OpenTelemetry on."""
"""Drain scenarios: the queue policy; a policy queue's jobs spread over :data:`SCENARIO_KEYS`."""
SCENARIO_KEYS = 100
"""How many ``singleton_key`` values the jobs of a policy scenario use."""
DEFAULT_TIMEOUT = 1800.0
"""Seconds one timed drain may take before it is stopped (and reported as timed out)."""


@attrs.frozen
class Backend:
    """An alkstore engine reached through one driver."""

    engine: str = "postgres"
    driver: str = "psycopg"
    emulate: bool = False
    """Run behind the engine's emulation guard on stock PostgreSQL: only when asked for
    (``--emulate``), never because of the engine's name: a DSN may reach the real server."""
    scenario: str = "standard"
    """The drained queue's policy (:data:`SCENARIOS`)."""
    telemetry: bool = False
    """Instrument the store with OpenTelemetry (:func:`.telemetry_bench.instrument_for_bench`)."""
    telemetry_sample: float = 1.0
    """With ``telemetry``, the share of traces whose spans are recorded (1: every one)."""
    pooled_dsn: str | None = None
    """Connect the stores here, through PgBouncer (``pooler="pgbouncer"``), instead of to the
    DSN the drain is given (which setup and checks keep using)."""
    connections: int | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.ge(1))
    )
    """Server connections for the consumers' statements (``--connections``): the store's pool
    holds that many, and consumers beyond it wait in the pool for one -- the many-fetcher
    cells measured with the statements in flight capped (docs/benchmarks.md, "Many fetchers,
    few connections"). None: one connection per consumer. Through PgBouncer the cap is the
    pooler's server pool instead (:func:`.server.bench_server`), and each consumer keeps a
    client connection of its own, as a process of its own would."""
    variant: str | None = None
    """How the tables are prepared after the prefill (:func:`.server.prepare_drain`; None:
    the ``steady`` preparation, unlabelled -- ``bench peers`` labels both)."""

    def __attrs_post_init__(self) -> None:
        if self.scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {self.scenario!r}: use one of {SCENARIOS}")
        if not 0.0 < self.telemetry_sample <= 1.0:
            raise ValueError(
                f"telemetry sample {self.telemetry_sample!r}: a share of the traces, "
                "above 0 and at most 1"
            )
        if self.base_driver not in DRIVERS:
            raise ValueError(
                f"unknown driver {self.driver!r}: use one of {', '.join(DRIVERS)}"
                f" (each optionally followed by {HANDOFF!r} or {WORK!r})"
            )

    @property
    def base_engine(self) -> str:
        """The engine name without :data:`GATED` or :data:`GATED_AUTO`."""
        return self.engine.removesuffix(GATED_AUTO).removesuffix(GATED)

    @property
    def engine_options(self) -> dict[str, Any]:
        """The store's ``engine_options``: the claim gate on with :data:`GATED`, auto with
        :data:`GATED_AUTO`."""
        if self.engine.endswith(GATED_AUTO):
            return {"claim_gate": "auto"}
        return {"claim_gate": True} if self.engine.endswith(GATED) else {}

    @property
    def base_driver(self) -> str:
        """The driver name without :data:`HANDOFF` or :data:`WORK`."""
        return self.driver.removesuffix(HANDOFF).removesuffix(WORK)

    @property
    def handoff(self) -> bool:
        """Whether consumers drain with ``complete_and_fetch`` (see :data:`HANDOFF`)."""
        return self.driver.endswith(HANDOFF)

    @property
    def worker(self) -> bool:
        """Whether the drain runs through ``store.work()`` (see :data:`WORK`)."""
        return self.driver.endswith(WORK)

    @property
    def is_async(self) -> bool:
        """Whether this driver drains with asyncio tasks."""
        return self.base_driver in ASYNC_DRIVERS

    def cell(self, consumers: int, batch: int) -> Cell:
        """The table cell of a drain on this backend."""
        engine = f"{self.engine} (emulated)" if self.emulate else self.engine
        if self.scenario != "standard":
            engine = f"{engine} [{self.scenario}, {SCENARIO_KEYS} keys]"
        if self.telemetry:
            engine = f"{engine}{TELEMETRY_LABEL}"
        if self.pooled_dsn is not None:
            engine = f"{engine} [pgbouncer]"
        if self.connections is not None:
            engine = f"{engine} [{self.connections} connections]"
        return Cell(
            system="alkstore",
            engine=engine,
            driver=self.driver,
            consumers=consumers,
            batch=batch,
            variant=self.variant,
        )

    def open_sync(self, dsn: str, schema: str, pool_size: int) -> alkstore.Store:
        """A sync store on ``schema`` (migrated)."""
        store = alkstore.connect(
            self.pooled_dsn or dsn,
            engine=self.base_engine,
            engine_options=self.engine_options,
            driver=self.base_driver,
            schema=schema,
            pool_size=pool_size,
            emulate=self.emulate,
            pooler="pgbouncer" if self.pooled_dsn else None,
        )
        if self.telemetry:
            instrument_for_bench(store, self.telemetry_sample)
        return store

    async def open_async(self, dsn: str, schema: str, pool_size: int) -> alkstore.AsyncStore:
        """An async store on ``schema`` (migrated)."""
        store = await alkstore.connect_async(
            self.pooled_dsn or dsn,
            engine=self.base_engine,
            engine_options=self.engine_options,
            driver=ASYNC_DRIVERS[self.base_driver],
            schema=schema,
            pool_size=pool_size,
            emulate=self.emulate,
            pooler="pgbouncer" if self.pooled_dsn else None,
        )
        if self.telemetry:
            instrument_for_bench(store, self.telemetry_sample)
        return store


def alkstore_row(backend: Backend, fields: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON row of an alkstore cell: system, engine, driver, ``fields``, then the peak RSS."""
    return {
        "system": "alkstore",
        "engine": backend.engine,
        "driver": backend.driver,
        **fields,
        "peak_rss_mb": peak_rss_mb(),
    }


def job_specs(start: int, count: int) -> list[dict[str, Any]]:
    """``send_many`` arguments for ``count`` small jobs numbered from ``start``."""
    return [{"data": {"n": n}} for n in range(start, start + count)]


def numbered_batches(jobs: int) -> Iterator[range]:
    """The job numbers ``0 .. jobs - 1`` in batches of :data:`SEND_BATCH`."""
    for start in range(0, jobs, SEND_BATCH):
        yield range(start, min(jobs, start + SEND_BATCH))


def keyed_specs(specs: list[dict[str, Any]], scenario: str) -> list[dict[str, Any]]:
    """``specs`` spread over :data:`SCENARIO_KEYS` keys in a policy scenario."""
    if scenario == "standard":
        return specs
    return [{**s, "singleton_key": str(s["data"]["n"] % SCENARIO_KEYS)} for s in specs]


def send_in_batches(
    send_many: Callable[[list[dict[str, Any]]], object], jobs: int, scenario: str = "standard"
) -> float:
    """Send ``jobs`` jobs in batches of :data:`SEND_BATCH`; the seconds it took."""
    began = time.perf_counter()
    for numbers in numbered_batches(jobs):
        send_many(keyed_specs(job_specs(numbers.start, len(numbers)), scenario))
    return time.perf_counter() - began


async def send_in_batches_async(
    send_many: Callable[[list[dict[str, Any]]], Awaitable[object]],
    jobs: int,
    scenario: str = "standard",
) -> float:
    """:func:`send_in_batches` for an async store."""
    began = time.perf_counter()
    for numbers in numbered_batches(jobs):
        await send_many(keyed_specs(job_specs(numbers.start, len(numbers)), scenario))
    return time.perf_counter() - began


SCALING_ROUNDS = 10
"""Claims each consumer of a ``drain``/``peers`` cell makes at least (:func:`cell_jobs`)."""


def shared_connections(consumers: int, connections: int | None) -> int:
    """The connections ``consumers`` share: ``connections`` (``--connections``), at most one
    a consumer; None: one a consumer."""
    return min(consumers, connections or consumers)


def cell_jobs(jobs: int, consumers: int, batch: int) -> int:
    """The jobs a ``drain``/``peers`` cell drains: at least ``jobs``, and at least
    :data:`SCALING_ROUNDS` full claims for every consumer, so that a cell of many consumers
    measures a steady drain, not one round of claims (the same count for every system)."""
    return max(jobs, SCALING_ROUNDS * consumers * batch)


def cell_jobs_rule(jobs: int) -> str:
    """:func:`cell_jobs` in words, for table titles."""
    return f"max({jobs:,}, {SCALING_ROUNDS} x consumers x batch) jobs a cell"


def warmup_jobs(consumers: int, batch: int) -> int:
    """How many jobs the untimed warm-up drains: enough for every consumer to fetch a few times."""
    return min(WARMUP_MAX_JOBS, max(consumers * batch * 3, consumers * 6))


def job_id(job: Job) -> int:
    """The id of a fetched job as an integer (what duplicates are counted on).

    A ``uuid.UUID`` is an object the garbage collector tracks, an ``int`` is not: keeping
    every delivered id as a UUID made each full collection of the consumers' process walk
    them all, a cost of the harness's bookkeeping that the peers (integer ids) do not pay.
    """
    return job.id.int


def cell_schema(index: int) -> str:
    """The schema of the ``index``-th cell of a run."""
    return f"alkstore_bench_{index}"


def store_threads(
    store: alkstore.Store,
    queue: str,
    consumers: int,
    batch: int,
    tally: Tally,
    timeout: float,
    handoff: bool = False,
) -> LoopOutcome:
    """:func:`~alkstore.bench.loops.run_threads` fetching from and completing on ``queue``
    (with ``handoff``: through ``complete_and_fetch``)."""

    def complete_and_fetch(done: Sequence[Job], n: int) -> Sequence[Job]:
        return store.complete_and_fetch(queue, done, batch_size=n).jobs

    return run_threads(
        consumers,
        batch,
        lambda n: store.fetch(queue, batch_size=n),
        lambda done: store.complete(queue, done),
        job_id,
        tally,
        timeout,
        complete_and_fetch if handoff else None,
    )


async def store_tasks(
    store: alkstore.AsyncStore,
    queue: str,
    consumers: int,
    batch: int,
    tally: Tally,
    timeout: float,
    handoff: bool = False,
) -> LoopOutcome:
    """:func:`store_threads` for an async store (:func:`~alkstore.bench.loops.run_tasks`)."""

    async def fetch(n: int) -> Sequence[Job]:
        return await store.fetch(queue, batch_size=n)

    async def complete_and_fetch(done: Sequence[Job], n: int) -> Sequence[Job]:
        return (await store.complete_and_fetch(queue, done, batch_size=n)).jobs

    return await run_tasks(
        consumers,
        batch,
        fetch,
        lambda done: store.complete(queue, done),
        job_id,
        tally,
        timeout,
        complete_and_fetch if handoff else None,
    )


@attrs.define
class _Drain:
    """One drain cell: what it is given, and every step of it that is not store I/O."""

    dsn: str
    backend: Backend
    jobs: int
    consumers: int
    batch: int
    schema: str
    progress: Progress
    timeout: float
    peak_rss: int | None = attrs.field(default=None, init=False)
    cpu: CpuUse | None = attrs.field(default=None, init=False)
    postmaster: int | None = attrs.field(default=None, init=False)
    """The server's process when it runs on this machine (its CPU time is then measured)."""

    @property
    def pool_size(self) -> int:
        """One connection per consumer, or :attr:`Backend.connections` (not through PgBouncer,
        whose server pool holds that cap); a worker also fetches and watches on its own."""
        cap = None if self.backend.pooled_dsn else self.backend.connections
        return shared_connections(self.consumers, cap) + (2 if self.backend.worker else 0)

    @property
    def warmup(self) -> int:
        """Jobs of the untimed warm-up drain."""
        return warmup_jobs(self.consumers, self.batch)

    @contextlib.contextmanager
    def timed(self) -> Iterator[Tally]:
        """Around the timed drain: reset the peak RSS, show progress, then read the peak RSS
        and the CPU time the drain cost this process and the server."""
        reset_peak_rss()
        with (
            cpu_window(self.postmaster) as self.cpu,
            tracked(self.progress, self.cell.description, self.jobs) as tally,
        ):
            yield tally
        self.peak_rss = peak_rss_bytes()

    @property
    def cell(self) -> Cell:
        """The table cell of this drain."""
        return self.backend.cell(self.consumers, self.batch)

    def result(self, outcome: LoopOutcome, completed: int, enqueue_seconds: float) -> DrainResult:
        """The row of this drain."""
        return DrainResult.from_outcome(
            self.cell, self.jobs, outcome, completed, self.peak_rss, enqueue_seconds, cpu=self.cpu
        )


def drain_alkstore(
    dsn: str,
    backend: Backend,
    *,
    jobs: int,
    consumers: int,
    batch: int,
    schema: str,
    progress: Progress,
    timeout: float = DEFAULT_TIMEOUT,
) -> DrainResult:
    """One measured drain of ``jobs`` jobs by ``consumers`` consumers, ``batch`` a fetch."""
    cell = _Drain(dsn, backend, jobs, consumers, batch, schema, progress, timeout)
    cell.postmaster = local_postmaster(dsn)
    try:
        return event_loop.run(_drain_async(cell)) if backend.is_async else _drain_sync(cell)
    finally:
        drop_schema(dsn, schema)


def _drain_sync(d: _Drain) -> DrainResult:
    with d.backend.open_sync(d.dsn, d.schema, pool_size=d.pool_size) as store:
        for queue in (QUEUE, WARMUP_QUEUE):
            store.create_queue(queue, policy=d.backend.scenario)

        def loops(queue: str, tally: Tally) -> LoopOutcome:
            if d.backend.worker:
                return work_threads(store, queue, d.consumers, d.batch, tally, d.timeout)
            return store_threads(
                store, queue, d.consumers, d.batch, tally, d.timeout, d.backend.handoff
            )

        scenario = d.backend.scenario
        enqueue_seconds = send_in_batches(lambda s: store.send_many(QUEUE, s), d.jobs, scenario)
        send_in_batches(lambda s: store.send_many(WARMUP_QUEUE, s), d.warmup, scenario)
        loops(WARMUP_QUEUE, Tally(d.warmup))
        prepare_drain(d.dsn, d.backend.variant or STEADY)
        with d.timed() as tally:
            outcome = loops(QUEUE, tally)
        completed = store.queue_stats(QUEUE).counts[JobState.COMPLETED]
    return d.result(outcome, completed, enqueue_seconds)


async def _drain_async(d: _Drain) -> DrainResult:
    store = await d.backend.open_async(d.dsn, d.schema, pool_size=d.pool_size)
    async with store:
        for queue in (QUEUE, WARMUP_QUEUE):
            await store.create_queue(queue, policy=d.backend.scenario)

        async def loops(queue: str, tally: Tally) -> LoopOutcome:
            if d.backend.worker:
                return await work_tasks(store, queue, d.consumers, d.batch, tally, d.timeout)
            return await store_tasks(
                store, queue, d.consumers, d.batch, tally, d.timeout, d.backend.handoff
            )

        scenario = d.backend.scenario
        enqueue_seconds = await send_in_batches_async(
            lambda s: store.send_many(QUEUE, s), d.jobs, scenario
        )
        await send_in_batches_async(lambda s: store.send_many(WARMUP_QUEUE, s), d.warmup, scenario)
        await loops(WARMUP_QUEUE, Tally(d.warmup))
        await asyncio.to_thread(prepare_drain, d.dsn, d.backend.variant or STEADY)
        with d.timed() as tally:
            outcome = await loops(QUEUE, tally)
        completed = (await store.queue_stats(QUEUE)).counts[JobState.COMPLETED]
    return d.result(outcome, completed, enqueue_seconds)


__all__ = [
    "ASYNC_DRIVERS",
    "DRIVERS",
    "HANDOFF",
    "QUEUE",
    "SEND_BATCH",
    "SYNC_DRIVERS",
    "TELEMETRY_LABEL",
    "WORK",
    "Backend",
    "alkstore_row",
    "cell_schema",
    "drain_alkstore",
    "job_specs",
    "numbered_batches",
    "send_in_batches",
    "send_in_batches_async",
    "shared_connections",
    "store_tasks",
    "store_threads",
    "warmup_jobs",
]
