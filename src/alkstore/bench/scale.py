"""``bench scale``: fetch latency and drain rate as the job table grows.

Scenarios: one per queue depth (10k, 100k, 1M queued jobs by default) and one with the
smallest depth queued plus many finished (completed) jobs retained in the same queue. The
table is filled by one ``INSERT … SELECT generate_series`` straight into the job table (the
schema of :mod:`alkstore.engines.postgres.schema`), then vacuumed and analysed as autovacuum
would soon do. Then, through the store: ``samples`` fetches of one job by one consumer, each
completed (the fetch latency), and a drain of ``drain_jobs`` jobs by ``consumers`` consumers
fetching ``batch`` at a time (the drain rate).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import attrs
import psycopg

from ..core.records import Job
from ..engines.postgres.identifiers import quote_schema
from .drain import QUEUE, Backend, job_id
from .loops import LoopOutcome, Tally, run_tasks, run_threads
from .measure import Latency, peak_rss_bytes, rate, reset_peak_rss
from .progress import Progress
from .report import Column
from .server import admin_connection, checkpoint, drop_schema

FILL_CHUNK = 100_000
"""Rows per INSERT while filling (one statement per chunk keeps progress visible)."""

COLUMNS = (
    Column("scenario", "scenario", justify="left"),
    Column("queued", "queued"),
    Column("finished", "finished"),
    Column("fill_s", "fill s", 1),
    Column("fetch_p50_ms", "fetch p50 ms", 2),
    Column("fetch_p99_ms", "fetch p99 ms", 2),
    Column("drain_jobs_per_s", "drain jobs/s"),
    Column("duplicates", "duplicates"),
    Column("peak_rss_mb", "peak RSS MiB", 1),
)


@attrs.frozen
class Scenario:
    """How many queued and finished jobs the queue holds before measuring."""

    queued: int
    finished: int = 0

    @property
    def name(self) -> str:
        """``10,000 queued`` or ``10,000 queued + 1,000,000 finished``."""
        text = f"{self.queued:,} queued"
        return f"{text} + {self.finished:,} finished" if self.finished else text


def scenarios(depths: list[int], finished: int) -> list[Scenario]:
    """One scenario per depth, then the smallest depth with ``finished`` finished jobs."""
    result = [Scenario(depth) for depth in depths]
    if finished > 0:
        result.append(Scenario(min(depths), finished))
    return result


def fill(
    dsn: str, schema: str, queue: str, state: str, count: int, tick: Callable[[int], None]
) -> None:
    """Insert ``count`` jobs in ``state`` into ``queue`` with one statement per chunk."""
    s = quote_schema(schema)
    sql = f"""INSERT INTO {s}.job (id, name, data, state, priority, retry_limit, retry_delay,
            retry_backoff, retry_delay_max, expire_seconds, heartbeat_seconds,
            retention_seconds, deletion_seconds, policy, start_after, created_on, keep_until,
            started_on, completed_on)
        SELECT gen_random_uuid(), q.name, jsonb_build_object('n', g), $2::text, 0,
            q.retry_limit, q.retry_delay, q.retry_backoff, q.retry_delay_max, q.expire_seconds,
            q.heartbeat_seconds, q.retention_seconds, q.deletion_seconds, q.policy,
            now() - interval '1 hour', now() - interval '1 hour' + g * interval '1 microsecond',
            now() + q.retention_seconds * interval '1 second',
            CASE WHEN $2::text = 'completed' THEN now() END,
            CASE WHEN $2::text = 'completed' THEN now() END
        FROM {s}.queue q CROSS JOIN generate_series($3::int, $4::int) AS g
        WHERE q.name = $1"""
    with admin_connection(dsn) as conn:
        for start in range(0, count, FILL_CHUNK):
            end = min(count, start + FILL_CHUNK)
            with psycopg.RawCursor(conn) as cur:
                cur.execute(sql, (queue, state, start + 1, end))
            tick(end - start)


def vacuum_analyze(dsn: str, schema: str) -> None:
    """``VACUUM ANALYZE`` the job table (what autovacuum would do after a bulk load)."""
    with admin_connection(dsn) as conn:
        conn.execute(f"VACUUM ANALYZE {quote_schema(schema)}.job")


def scale_cell(
    dsn: str,
    backend: Backend,
    scenario: Scenario,
    *,
    samples: int,
    drain_jobs: int,
    consumers: int,
    batch: int,
    schema: str,
    progress: Progress,
    timeout: float,
) -> dict[str, Any]:
    """Fill, then measure fetch latency and drain rate; one JSON row."""
    try:
        if backend.is_async:
            return asyncio.run(
                _cell_async(
                    dsn,
                    backend,
                    scenario,
                    samples,
                    drain_jobs,
                    consumers,
                    batch,
                    schema,
                    progress,
                    timeout,
                )
            )
        return _cell_sync(
            dsn,
            backend,
            scenario,
            samples,
            drain_jobs,
            consumers,
            batch,
            schema,
            progress,
            timeout,
        )
    finally:
        drop_schema(dsn, schema)


def _fill_all(dsn: str, schema: str, scenario: Scenario, progress: Progress) -> float:
    import time

    began = time.perf_counter()
    done = [0]
    with progress.track(
        f"fill: {scenario.name}", scenario.queued + scenario.finished, lambda: done[0]
    ):

        def tick(n: int) -> None:
            done[0] += n

        fill(dsn, schema, QUEUE, "completed", scenario.finished, tick)
        fill(dsn, schema, QUEUE, "created", scenario.queued, tick)
    vacuum_analyze(dsn, schema)
    checkpoint(dsn)
    return time.perf_counter() - began


def _row(
    backend: Backend,
    scenario: Scenario,
    fill_seconds: float,
    sampled: LoopOutcome,
    drained: LoopOutcome,
    consumers: int,
    batch: int,
) -> dict[str, Any]:
    fetch = Latency.of(sampled.fetch_seconds)
    return {
        "system": "alkstore",
        "engine": backend.engine,
        "driver": backend.driver,
        "scenario": scenario.name,
        "queued": scenario.queued,
        "finished": scenario.finished,
        "fill_s": round(fill_seconds, 2),
        "fetch_samples": fetch.count,
        "fetch_p50_ms": fetch.p50_ms,
        "fetch_p95_ms": fetch.p95_ms,
        "fetch_p99_ms": fetch.p99_ms,
        "consumers": consumers,
        "batch": batch,
        "drain_jobs": drained.completed,
        "drain_seconds": round(drained.seconds, 4),
        "drain_jobs_per_s": round(rate(drained.completed, drained.seconds), 1),
        "empty_fetches": drained.empty_fetches,
        "duplicates": sampled.duplicates
        + drained.duplicates
        + len(set(sampled.ids) & set(drained.ids)),
        "timed_out": sampled.timed_out or drained.timed_out,
        "peak_rss_mb": round(peak_rss_bytes() / 2**20, 1),
    }


def _targets(scenario: Scenario, samples: int, drain_jobs: int) -> tuple[int, int]:
    sample_target = min(samples, scenario.queued)
    return sample_target, min(drain_jobs, scenario.queued - sample_target)


def _cell_sync(
    dsn: str,
    backend: Backend,
    scenario: Scenario,
    samples: int,
    drain_jobs: int,
    consumers: int,
    batch: int,
    schema: str,
    progress: Progress,
    timeout: float,
) -> dict[str, Any]:
    with backend.open_sync(dsn, schema, pool_size=consumers) as store:
        store.create_queue(QUEUE, deletion_seconds=0)
        fill_seconds = _fill_all(dsn, schema, scenario, progress)
        sample_target, drain_target = _targets(scenario, samples, drain_jobs)

        def loops(count: int, size: int, tally: Tally) -> LoopOutcome:
            return run_threads(
                count,
                size,
                lambda n: store.fetch(QUEUE, batch_size=n),
                lambda done: store.complete(QUEUE, done),
                job_id,
                tally,
                timeout,
            )

        reset_peak_rss()
        tally = Tally(sample_target)
        with progress.track(
            f"fetch latency: {scenario.name}", sample_target, lambda: tally.completed
        ):
            sampled = loops(1, 1, tally)
        tally = Tally(drain_target)
        with progress.track(f"drain: {scenario.name}", drain_target, lambda: tally.completed):
            drained = loops(consumers, batch, tally)
    return _row(backend, scenario, fill_seconds, sampled, drained, consumers, batch)


async def _cell_async(
    dsn: str,
    backend: Backend,
    scenario: Scenario,
    samples: int,
    drain_jobs: int,
    consumers: int,
    batch: int,
    schema: str,
    progress: Progress,
    timeout: float,
) -> dict[str, Any]:
    store = await backend.open_async(dsn, schema, pool_size=consumers)
    async with store:
        await store.create_queue(QUEUE, deletion_seconds=0)
        fill_seconds = await asyncio.to_thread(_fill_all, dsn, schema, scenario, progress)
        sample_target, drain_target = _targets(scenario, samples, drain_jobs)

        async def fetch(n: int) -> list[Job]:
            return await store.fetch(QUEUE, batch_size=n)

        async def loops(count: int, size: int, tally: Tally) -> LoopOutcome:
            return await run_tasks(
                count,
                size,
                fetch,
                lambda done: store.complete(QUEUE, done),
                job_id,
                tally,
                timeout,
            )

        reset_peak_rss()
        tally = Tally(sample_target)
        with progress.track(
            f"fetch latency: {scenario.name}", sample_target, lambda: tally.completed
        ):
            sampled = await loops(1, 1, tally)
        tally = Tally(drain_target)
        with progress.track(f"drain: {scenario.name}", drain_target, lambda: tally.completed):
            drained = await loops(consumers, batch, tally)
    return _row(backend, scenario, fill_seconds, sampled, drained, consumers, batch)


__all__ = ["COLUMNS", "Scenario", "fill", "scale_cell", "scenarios", "vacuum_analyze"]
