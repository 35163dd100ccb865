"""``bench scale``: fetch latency and drain rate as the job table grows.

Scenarios: one per queue depth (10k, 100k, 1M queued jobs by default), one with the
smallest depth queued plus many finished (completed) jobs retained in the same queue, and
the largest depth once more before any ANALYZE (a burst of jobs the planner has no
statistics for yet). The table is filled by one ``INSERT … SELECT generate_series`` straight
into the job table (the schema of :mod:`alkstore.engines.postgres.schema`), then vacuumed and
analysed as autovacuum would soon do, except in the burst scenario, where autovacuum is
switched off for the job table so that it cannot analyse it during the measurement. Then,
through the store: ``samples`` fetches of one job by one consumer, each
completed (the fetch latency), and a drain of ``drain_jobs`` jobs by ``consumers`` consumers
fetching ``batch`` at a time (the drain rate).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import attrs
import psycopg

from ..engines import engine_class
from ..engines.postgres.identifiers import quote_ident, quote_schema
from ..engines.postgres.schema import rows_table
from . import event_loop
from .drain import QUEUE, Backend, alkstore_row, store_tasks, store_threads
from .loops import LoopOutcome, Tally, tracked
from .measure import Latency, rate, reset_peak_rss
from .progress import Progress
from .report import PEAK_RSS_COLUMN, Column
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
    PEAK_RSS_COLUMN,
)


@attrs.frozen
class Scenario:
    """How many queued and finished jobs the queue holds before measuring."""

    queued: int
    finished: int = 0
    analyzed: bool = True
    """Whether the table is analysed after the fill (else: a burst before any ANALYZE)."""

    @property
    def name(self) -> str:
        """``10,000 queued``, ``10,000 queued + 1,000,000 finished``, or ``… never analyzed``."""
        text = f"{self.queued:,} queued"
        if self.finished:
            text += f" + {self.finished:,} finished"
        return text if self.analyzed else f"{text}, never analyzed"


def scenarios(depths: list[int], finished: int, burst: int | None = None) -> list[Scenario]:
    """One scenario per depth, the smallest depth with ``finished`` finished jobs, then
    ``burst`` queued jobs (default: the largest depth; 0: none) before any ANALYZE."""
    result = [Scenario(depth) for depth in depths]
    if finished > 0:
        result.append(Scenario(min(depths), finished))
    burst = max(depths) if burst is None else burst
    if burst > 0:
        result.append(Scenario(burst, analyzed=False))
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


def without_autovacuum(dsn: str, schema: str, table: str) -> None:
    """Switch autovacuum off for ``table`` (the one that holds the jobs), so that nothing
    analyses it behind the measurement."""
    with admin_connection(dsn) as conn:
        conn.execute(
            f"ALTER TABLE {quote_schema(schema)}.{quote_ident(table)} "
            "SET (autovacuum_enabled = off)"
        )


def vacuum_analyze(dsn: str, schema: str) -> None:
    """``VACUUM ANALYZE`` the job table (what autovacuum would do after a bulk load)."""
    vacuum = f"VACUUM ANALYZE {quote_schema(schema)}.job"  # identifier, quoted
    with admin_connection(dsn) as conn:
        conn.execute(vacuum)


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
    cell = _Scale(
        dsn, backend, scenario, samples, drain_jobs, consumers, batch, schema, progress, timeout
    )
    try:
        return event_loop.run(_cell_async(cell)) if backend.is_async else _cell_sync(cell)
    finally:
        drop_schema(dsn, schema)


def _fill_all(
    dsn: str, schema: str, backend: Backend, scenario: Scenario, progress: Progress
) -> float:
    began = time.perf_counter()
    done = [0]
    with progress.track(
        f"fill: {scenario.name}", scenario.queued + scenario.finished, lambda: done[0]
    ):

        def tick(n: int) -> None:
            done[0] += n

        if not scenario.analyzed:
            caps = engine_class(backend.engine).description.capabilities
            without_autovacuum(dsn, schema, rows_table(caps))
        fill(dsn, schema, QUEUE, "completed", scenario.finished, tick)
        fill(dsn, schema, QUEUE, "created", scenario.queued, tick)
    if scenario.analyzed:
        vacuum_analyze(dsn, schema)
    checkpoint(dsn)
    return time.perf_counter() - began


@attrs.frozen
class _Scale:
    """One scale cell: what it is given, and every step of it that is not store I/O."""

    dsn: str
    backend: Backend
    scenario: Scenario
    samples: int
    drain_jobs: int
    consumers: int
    batch: int
    schema: str
    progress: Progress
    timeout: float

    def fill(self) -> float:
        """Fill the job table for the scenario; the seconds it took."""
        return _fill_all(self.dsn, self.schema, self.backend, self.scenario, self.progress)

    def sampling(self) -> contextlib.AbstractContextManager[Tally]:
        """Reset the peak RSS; the tally of the fetch-latency samples, shown while it runs."""
        reset_peak_rss()
        target = min(self.samples, self.scenario.queued)
        return tracked(self.progress, f"fetch latency: {self.scenario.name}", target)

    def draining(self) -> contextlib.AbstractContextManager[Tally]:
        """The tally of the drain after the samples, shown while it runs."""
        sampled = min(self.samples, self.scenario.queued)
        target = min(self.drain_jobs, self.scenario.queued - sampled)
        return tracked(self.progress, f"drain: {self.scenario.name}", target)

    def row(
        self, fill_seconds: float, sampled: LoopOutcome, drained: LoopOutcome
    ) -> dict[str, Any]:
        """The JSON row of this cell."""
        fetch = Latency.of(sampled.fetch_seconds)
        return alkstore_row(
            self.backend,
            {
                "scenario": self.scenario.name,
                "queued": self.scenario.queued,
                "finished": self.scenario.finished,
                "fill_s": round(fill_seconds, 2),
                "fetch_samples": fetch.count,
                "fetch_p50_ms": fetch.p50_ms,
                "fetch_p95_ms": fetch.p95_ms,
                "fetch_p99_ms": fetch.p99_ms,
                "consumers": self.consumers,
                "batch": self.batch,
                "drain_jobs": drained.completed,
                "drain_seconds": round(drained.seconds, 4),
                "drain_jobs_per_s": round(rate(drained.completed, drained.seconds), 1),
                "empty_fetches": drained.empty_fetches,
                "duplicates": sampled.duplicates
                + drained.duplicates
                + len(set(sampled.ids) & set(drained.ids)),
                "timed_out": sampled.timed_out or drained.timed_out,
            },
        )


def _cell_sync(c: _Scale) -> dict[str, Any]:
    with c.backend.open_sync(c.dsn, c.schema, pool_size=c.consumers) as store:
        store.create_queue(QUEUE, deletion_seconds=0)
        fill_seconds = c.fill()
        with c.sampling() as tally:
            sampled = store_threads(store, QUEUE, 1, 1, tally, c.timeout)
        with c.draining() as tally:
            drained = store_threads(store, QUEUE, c.consumers, c.batch, tally, c.timeout)
    return c.row(fill_seconds, sampled, drained)


async def _cell_async(c: _Scale) -> dict[str, Any]:
    store = await c.backend.open_async(c.dsn, c.schema, pool_size=c.consumers)
    async with store:
        await store.create_queue(QUEUE, deletion_seconds=0)
        fill_seconds = await asyncio.to_thread(c.fill)
        with c.sampling() as tally:
            sampled = await store_tasks(store, QUEUE, 1, 1, tally, c.timeout)
        with c.draining() as tally:
            drained = await store_tasks(store, QUEUE, c.consumers, c.batch, tally, c.timeout)
    return c.row(fill_seconds, sampled, drained)


__all__ = [
    "COLUMNS",
    "Scenario",
    "fill",
    "scale_cell",
    "scenarios",
    "vacuum_analyze",
    "without_autovacuum",
]
