"""One drain cell of alkstore: pre-enqueue, warm up, then time N consumers fetching + completing.

Sync drivers (``psycopg``, ``pg8000``) drain with threads, async ones (``psycopg-async``,
``asyncpg``) with asyncio tasks on one event loop. Each cell runs in a schema of its own,
dropped afterwards, so every cell starts from an empty job table. The store's pool holds one
connection per consumer; an untimed warm-up drain opens them (and lets the driver prepare its
statements) before the clock starts.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs

import alkstore

from ..core.records import Job
from ..core.states import JobState
from ..engines import engine_class
from .loops import Tally, run_tasks, run_threads
from .measure import peak_rss_bytes, reset_peak_rss
from .progress import Progress
from .results import Cell, DrainResult
from .server import checkpoint, drop_schema

SYNC_DRIVERS = ("psycopg", "pg8000")
"""Driver names that drain with threads."""
ASYNC_DRIVERS = {"psycopg-async": "psycopg", "asyncpg": "asyncpg"}
"""Driver names that drain with asyncio tasks -> the driver ``connect_async`` is given."""
DRIVERS = (*SYNC_DRIVERS, *ASYNC_DRIVERS)
"""Every driver name the benchmarks accept."""

SEND_BATCH = 1000
"""Jobs per ``send_many`` when pre-enqueueing."""
QUEUE = "bench"
"""The queue every cell drains."""
WARMUP_QUEUE = "bench_warmup"
WARMUP_MAX_JOBS = 5000
DEFAULT_TIMEOUT = 1800.0
"""Seconds one timed drain may take before it is stopped (and reported as timed out)."""


@attrs.frozen
class Backend:
    """An alkstore engine reached through one driver."""

    engine: str = "postgres"
    driver: str = "psycopg"

    def __attrs_post_init__(self) -> None:
        if self.driver not in DRIVERS:
            raise ValueError(f"unknown driver {self.driver!r}: use one of {', '.join(DRIVERS)}")

    @property
    def is_async(self) -> bool:
        """Whether this driver drains with asyncio tasks."""
        return self.driver in ASYNC_DRIVERS

    @property
    def emulate(self) -> bool:
        """Run behind the engine's emulation guard (engines of servers other than PostgreSQL)."""
        return engine_class(self.engine).emulation_profile is not None

    def cell(self, consumers: int, batch: int) -> Cell:
        """The table cell of a drain on this backend."""
        engine = f"{self.engine} (emulated)" if self.emulate else self.engine
        return Cell(
            system="alkstore", engine=engine, driver=self.driver, consumers=consumers, batch=batch
        )

    def open_sync(self, dsn: str, schema: str, pool_size: int) -> alkstore.Store:
        """A sync store on ``schema`` (migrated)."""
        return alkstore.connect(
            dsn,
            engine=self.engine,
            driver=self.driver,
            schema=schema,
            pool_size=pool_size,
            emulate=self.emulate,
        )

    async def open_async(self, dsn: str, schema: str, pool_size: int) -> alkstore.AsyncStore:
        """An async store on ``schema`` (migrated)."""
        return await alkstore.connect_async(
            dsn,
            engine=self.engine,
            driver=ASYNC_DRIVERS[self.driver],
            schema=schema,
            pool_size=pool_size,
            emulate=self.emulate,
        )


def job_specs(start: int, count: int) -> list[dict[str, Any]]:
    """``send_many`` arguments for ``count`` small jobs numbered from ``start``."""
    return [{"data": {"n": n}} for n in range(start, start + count)]


def send_in_batches(send_many: Callable[[list[dict[str, Any]]], object], jobs: int) -> float:
    """Send ``jobs`` jobs in batches of :data:`SEND_BATCH`; the seconds it took."""
    began = time.perf_counter()
    for start in range(0, jobs, SEND_BATCH):
        send_many(job_specs(start, min(SEND_BATCH, jobs - start)))
    return time.perf_counter() - began


async def send_in_batches_async(
    send_many: Callable[[list[dict[str, Any]]], Awaitable[object]], jobs: int
) -> float:
    """:func:`send_in_batches` for an async store."""
    began = time.perf_counter()
    for start in range(0, jobs, SEND_BATCH):
        await send_many(job_specs(start, min(SEND_BATCH, jobs - start)))
    return time.perf_counter() - began


def warmup_jobs(consumers: int, batch: int) -> int:
    """How many jobs the untimed warm-up drains: enough for every consumer to fetch a few times."""
    return min(WARMUP_MAX_JOBS, max(consumers * batch * 3, consumers * 6))


def job_id(job: Job) -> Any:
    """The id of a fetched job (what duplicates are counted on)."""
    return job.id


def cell_schema(index: int) -> str:
    """The schema of the ``index``-th cell of a run."""
    return f"alkstore_bench_{index}"


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
    try:
        if backend.is_async:
            return asyncio.run(
                _drain_async(dsn, backend, jobs, consumers, batch, schema, progress, timeout)
            )
        return _drain_sync(dsn, backend, jobs, consumers, batch, schema, progress, timeout)
    finally:
        drop_schema(dsn, schema)


def _drain_sync(
    dsn: str,
    backend: Backend,
    jobs: int,
    consumers: int,
    batch: int,
    schema: str,
    progress: Progress,
    timeout: float,
) -> DrainResult:
    cell = backend.cell(consumers, batch)
    with backend.open_sync(dsn, schema, pool_size=consumers) as store:
        for queue in (QUEUE, WARMUP_QUEUE):
            store.create_queue(queue)

        def loops(queue: str, tally: Tally) -> Any:
            return run_threads(
                consumers,
                batch,
                lambda n: store.fetch(queue, batch_size=n),
                lambda done: store.complete(queue, done),
                job_id,
                tally,
                timeout,
            )

        enqueue_seconds = send_in_batches(lambda s: store.send_many(QUEUE, s), jobs)
        warm = warmup_jobs(consumers, batch)
        send_in_batches(lambda s: store.send_many(WARMUP_QUEUE, s), warm)
        loops(WARMUP_QUEUE, Tally(warm))
        checkpoint(dsn)
        reset_peak_rss()
        tally = Tally(jobs)
        with progress.track(f"{cell.label} c={consumers} b={batch}", jobs, lambda: tally.completed):
            outcome = loops(QUEUE, tally)
        rss = peak_rss_bytes()
        completed = store.queue_stats(QUEUE).counts[JobState.COMPLETED]
    return DrainResult.from_outcome(cell, jobs, outcome, completed, rss, enqueue_seconds)


async def _drain_async(
    dsn: str,
    backend: Backend,
    jobs: int,
    consumers: int,
    batch: int,
    schema: str,
    progress: Progress,
    timeout: float,
) -> DrainResult:
    cell = backend.cell(consumers, batch)
    store = await backend.open_async(dsn, schema, pool_size=consumers)
    async with store:
        for queue in (QUEUE, WARMUP_QUEUE):
            await store.create_queue(queue)

        async def fetch(queue: str, n: int) -> Sequence[Job]:
            return await store.fetch(queue, batch_size=n)

        async def loops(queue: str, tally: Tally) -> Any:
            return await run_tasks(
                consumers,
                batch,
                lambda n: fetch(queue, n),
                lambda done: store.complete(queue, done),
                job_id,
                tally,
                timeout,
            )

        enqueue_seconds = await send_in_batches_async(lambda s: store.send_many(QUEUE, s), jobs)
        warm = warmup_jobs(consumers, batch)
        await send_in_batches_async(lambda s: store.send_many(WARMUP_QUEUE, s), warm)
        await loops(WARMUP_QUEUE, Tally(warm))
        await asyncio.to_thread(checkpoint, dsn)
        reset_peak_rss()
        tally = Tally(jobs)
        with progress.track(f"{cell.label} c={consumers} b={batch}", jobs, lambda: tally.completed):
            outcome = await loops(QUEUE, tally)
        rss = peak_rss_bytes()
        completed = (await store.queue_stats(QUEUE)).counts[JobState.COMPLETED]
    return DrainResult.from_outcome(cell, jobs, outcome, completed, rss, enqueue_seconds)


__all__ = [
    "ASYNC_DRIVERS",
    "DRIVERS",
    "QUEUE",
    "SEND_BATCH",
    "SYNC_DRIVERS",
    "Backend",
    "cell_schema",
    "drain_alkstore",
    "job_specs",
    "send_in_batches",
    "send_in_batches_async",
    "warmup_jobs",
]
