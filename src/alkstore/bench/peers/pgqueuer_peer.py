"""pgqueuer through its public API: ``Queries.enqueue`` in batches, ``QueueManager`` workers.

One :class:`pgqueuer.QueueManager` per consumer, each on its own asyncpg connection (opened
before the clock starts), all on one event loop, with a no-op entrypoint. They run in drain
mode (``mode=drain``: exit once the queue is empty) with ``batch_size`` set to the cell's
batch; everything else is pgqueuer's default, completions included (its status-log buffer
flushes finished jobs in batches). pgqueuer dequeues inside its worker loop, so there is no
per-fetch latency or empty-fetch count to report. pgqueuer deletes a finished job from its
queue table, so the jobs completed are the jobs no longer there.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from datetime import timedelta
from typing import Any

from ...engines.postgres.identifiers import quote_schema
from .. import event_loop
from ..pacing import after_commit, deadline_after, paced_async
from ..progress import Progress
from ..results import DrainResult
from ..server import prepare_drain
from .common import (
    fresh_schema,
    not_installed,
    python_library_versions,
    time_worker_loops,
    timed_enqueue,
)
from .spec import DrainSpec

NAME = "pgqueuer"
ENTRYPOINT = "bench"


def unavailable() -> str | None:
    """Why pgqueuer cannot run here, or None."""
    return not_installed(("pgqueuer", "asyncpg"), "pip install pgqueuer asyncpg")


versions = python_library_versions


def drain(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    """Pre-enqueue, then time ``spec.consumers`` queue managers draining the queue."""
    with fresh_schema(dsn, schema):
        return event_loop.run(_drain(dsn, spec, schema, progress))


async def _drain(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries, QueueManager
    from pgqueuer.types import QueueExecutionMode

    settings = {"search_path": schema}
    connections = [
        await asyncpg.connect(dsn, server_settings=settings) for _ in range(spec.consumers)
    ]
    try:
        queries = Queries(AsyncpgDriver(connections[0]))
        await queries.install()

        async def send(numbers: range) -> None:
            count = len(numbers)
            payloads: list[bytes | None] = [json.dumps({"n": n}).encode() for n in numbers]
            await queries.enqueue([ENTRYPOINT] * count, payloads, [0] * count)

        enqueue_seconds = await timed_enqueue(spec.jobs, send)
        await asyncio.to_thread(prepare_drain, dsn, spec.variant)

        ids: list[Any] = []
        managers = []
        for conn in connections:
            manager = QueueManager(Queries(AsyncpgDriver(conn)))

            @manager.entrypoint(ENTRYPOINT)
            async def handle(job: Any) -> None:
                ids.append(job.id)

            managers.append(manager)
        cell = spec.cell(NAME, "asyncpg")
        loops = (
            m.run(
                batch_size=spec.batch,
                mode=QueueExecutionMode.drain,
                dequeue_timeout=timedelta(seconds=1),
            )
            for m in managers
        )
        seconds, rss, cpu = await time_worker_loops(
            progress, cell, spec.jobs, ids, loops, spec.timeout, dsn
        )
        table = f"{quote_schema(schema)}.pgqueuer"
        left = await connections[0].fetchval(f"SELECT count(*) FROM {table}")
    finally:
        for conn in connections:
            await conn.close()
    return DrainResult.from_worker_loop(
        cell,
        spec.jobs,
        seconds=seconds,
        ids=ids,
        completed=spec.jobs - int(left),
        peak_rss=rss,
        enqueue_seconds=enqueue_seconds,
        cpu=cpu,
        note="fetches happen inside pgqueuer's worker loop",
    )


def latency(dsn: str, rate: float, total: int, concurrency: int, schema: str) -> dict[str, Any]:
    """``{waits, sends, commits}`` (seconds; commits: see :func:`after_commit`): ``total`` jobs
    enqueued at ``rate`` on one connection to a ``QueueManager`` on another, woken by
    pgqueuer's NOTIFY (its default)."""
    with fresh_schema(dsn, schema):
        return event_loop.run(_latency(dsn, rate, total, concurrency, schema))


async def _latency(
    dsn: str, rate: float, total: int, concurrency: int, schema: str
) -> dict[str, Any]:
    import asyncpg
    from pgqueuer import AsyncpgDriver, Queries, QueueManager

    settings = {"search_path": schema}
    worker_conn = await asyncpg.connect(dsn, server_settings=settings)
    sender_conn = await asyncpg.connect(dsn, server_settings=settings)
    try:
        queries = Queries(AsyncpgDriver(sender_conn))
        await queries.install()
        manager = QueueManager(Queries(AsyncpgDriver(worker_conn)))
        handled: list[tuple[float, float]] = []
        began: list[float] = []
        done = asyncio.Event()

        @manager.entrypoint(ENTRYPOINT)
        async def handle(job: Any) -> None:
            handled.append((float(json.loads(job.payload)["sent"]), time.perf_counter()))
            if len(handled) >= total:
                done.set()

        running = asyncio.ensure_future(
            manager.run(batch_size=concurrency, dequeue_timeout=timedelta(seconds=1))
        )

        async def send(start: float) -> None:
            began.append(start)
            await queries.enqueue(ENTRYPOINT, json.dumps({"sent": start}).encode(), 0)

        sends = await paced_async(total, rate, send)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), deadline_after(total, rate))
        manager.shutdown.set()
        await running
    finally:
        await worker_conn.close()
        await sender_conn.close()
    return {
        "waits": [started - sent for sent, started in handled],
        "sends": sends,
        "commits": after_commit(handled, began, sends),
    }


__all__ = ["NAME", "drain", "latency", "unavailable", "versions"]
