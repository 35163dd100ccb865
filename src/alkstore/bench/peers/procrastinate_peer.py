"""procrastinate through its public API: ``batch_defer_async`` and ``run_worker_async``.

procrastinate fetches one job per query. Each consumer is one worker (``run_worker_async``)
with ``concurrency`` = the cell's batch, so as many jobs are in flight as with alkstore's
consumers fetching a batch each; ``wait=False`` makes the workers stop once the queue is
empty, and ``listen_notify=False`` since nothing is sent during a drain. The workers share
one psycopg pool of ``consumers + 2`` connections, opened before the clock starts. There is no
per-fetch latency or empty-fetch count to report; completed jobs are counted in
``procrastinate_jobs`` (status ``succeeded``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from typing import Any

import attrs

from ...engines.postgres.identifiers import quote_schema
from .. import event_loop
from ..pacing import after_commit, deadline_after, paced_async
from ..progress import Progress
from ..results import DrainResult
from ..server import admin_connection, prepare_drain, with_search_path
from .common import (
    fresh_schema,
    not_installed,
    python_library_versions,
    time_worker_loops,
    timed_enqueue,
)
from .spec import DrainSpec

NAME = "procrastinate"
QUEUE = "bench"


def unavailable() -> str | None:
    """Why procrastinate cannot run here, or None."""
    return not_installed(("procrastinate",), "pip install procrastinate")


versions = python_library_versions


def drain(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    """Pre-enqueue, then time ``spec.consumers`` workers draining the queue."""
    with fresh_schema(dsn, schema):
        result = event_loop.run(_drain(dsn, spec, schema, progress))
        with admin_connection(dsn) as conn:
            row = conn.execute(
                f"SELECT count(*) FROM {quote_schema(schema)}.procrastinate_jobs WHERE status = %s",
                ("succeeded",),
            ).fetchone()
        completed = int(row[0]) if row else 0
    return attrs.evolve(result, completed=completed)


async def _drain(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    import procrastinate

    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    size = spec.consumers + 2
    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(
            conninfo=with_search_path(dsn, schema), min_size=size, max_size=size
        )
    )
    ids: list[Any] = []

    @app.task(name="bench", queue=QUEUE, pass_context=True)
    async def bench(context: Any, n: int) -> None:
        ids.append(context.job.id)

    async with app.open_async():
        await app.schema_manager.apply_schema_async()

        async def send(numbers: range) -> None:
            batch: list[dict[str, Any]] = [{"n": n} for n in numbers]
            await bench.batch_defer_async(*batch)

        enqueue_seconds = await timed_enqueue(spec.jobs, send)
        await asyncio.to_thread(prepare_drain, dsn, spec.variant)
        cell = spec.cell(NAME, "psycopg")
        loops = (
            app.run_worker_async(
                queues=[QUEUE],
                name=f"bench-{index}",
                concurrency=spec.batch,
                wait=False,
                listen_notify=False,
                install_signal_handlers=False,
            )
            for index in range(spec.consumers)
        )
        seconds, rss, cpu = await time_worker_loops(
            progress, cell, spec.jobs, ids, loops, spec.timeout, dsn
        )
    return DrainResult.from_worker_loop(
        cell,
        spec.jobs,
        seconds=seconds,
        ids=ids,
        completed=len(ids),  # replaced by the count in the database
        peak_rss=rss,
        enqueue_seconds=enqueue_seconds,
        cpu=cpu,
        note="one job per fetch; worker concurrency = batch",
    )


def latency(dsn: str, rate: float, total: int, concurrency: int, schema: str) -> dict[str, Any]:
    """``{waits, sends, commits}`` (seconds; commits: see :func:`after_commit`): ``total`` jobs
    deferred at ``rate`` through one app to a worker (``concurrency``, ``listen_notify=True``)
    of another app, each with its own pool."""
    with fresh_schema(dsn, schema):
        return event_loop.run(_latency(dsn, rate, total, concurrency, schema))


async def _latency(
    dsn: str, rate: float, total: int, concurrency: int, schema: str
) -> dict[str, Any]:
    import procrastinate

    logging.getLogger("procrastinate").setLevel(logging.WARNING)

    def app(size: int) -> Any:
        conninfo = with_search_path(dsn, schema)
        connector = procrastinate.PsycopgConnector(conninfo=conninfo, min_size=size, max_size=size)
        return procrastinate.App(connector=connector)

    worker_app, sender_app = app(concurrency + 2), app(2)
    handled: list[tuple[float, float]] = []
    began: list[float] = []
    done = asyncio.Event()

    @worker_app.task(name="bench", queue=QUEUE)
    async def bench(sent: float) -> None:
        handled.append((sent, time.perf_counter()))
        if len(handled) >= total:
            done.set()

    async with worker_app.open_async(), sender_app.open_async():
        await worker_app.schema_manager.apply_schema_async()
        running = asyncio.ensure_future(
            worker_app.run_worker_async(
                queues=[QUEUE],
                concurrency=concurrency,
                listen_notify=True,
                install_signal_handlers=False,
            )
        )
        deferrer = sender_app.configure_task("bench", queue=QUEUE)

        async def send(start: float) -> None:
            began.append(start)
            await deferrer.defer_async(sent=start)

        sends = await paced_async(total, rate, send)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), deadline_after(total, rate))
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    return {
        "waits": [started - sent for sent, started in handled],
        "sends": sends,
        "commits": after_commit(handled, began, sends),
    }


__all__ = ["NAME", "drain", "latency", "unavailable", "versions"]
