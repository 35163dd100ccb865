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
import importlib.util
import json
import time
from datetime import timedelta
from typing import Any

from ...engines.postgres.identifiers import quote_schema
from ..measure import peak_rss_bytes, reset_peak_rss
from ..progress import Progress
from ..results import Cell, DrainResult
from ..server import checkpoint, create_schema, drop_schema
from .spec import DrainSpec

NAME = "pgqueuer"
ENTRYPOINT = "bench"
SEND_BATCH = 1000


def unavailable() -> str | None:
    """Why pgqueuer cannot run here, or None."""
    for module in ("pgqueuer", "asyncpg"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed (pip install pgqueuer asyncpg)"
    return None


def versions() -> dict[str, object]:
    """Recorded with the other Python libraries."""
    return {}


def drain(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    """Pre-enqueue, then time ``spec.consumers`` queue managers draining the queue."""
    create_schema(dsn, schema)
    try:
        return asyncio.run(_drain(dsn, spec, schema, progress))
    finally:
        drop_schema(dsn, schema)


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
        began = time.perf_counter()
        for start in range(0, spec.jobs, SEND_BATCH):
            count = min(SEND_BATCH, spec.jobs - start)
            payloads: list[bytes | None] = [
                json.dumps({"n": n}).encode() for n in range(start, start + count)
            ]
            await queries.enqueue([ENTRYPOINT] * count, payloads, [0] * count)
        enqueue_seconds = time.perf_counter() - began
        await asyncio.to_thread(checkpoint, dsn)

        ids: list[Any] = []
        managers = []
        for conn in connections:
            manager = QueueManager(Queries(AsyncpgDriver(conn)))

            @manager.entrypoint(ENTRYPOINT)
            async def handle(job: Any) -> None:
                ids.append(job.id)

            managers.append(manager)
        reset_peak_rss()
        cell = Cell(system=NAME, driver="asyncpg", consumers=spec.consumers, batch=spec.batch)
        with progress.track(
            f"{cell.label} c={spec.consumers} b={spec.batch}", spec.jobs, lambda: len(ids)
        ):
            began = time.perf_counter()
            await asyncio.wait_for(
                asyncio.gather(
                    *(
                        m.run(
                            batch_size=spec.batch,
                            mode=QueueExecutionMode.drain,
                            dequeue_timeout=timedelta(seconds=1),
                        )
                        for m in managers
                    )
                ),
                spec.timeout,
            )
            seconds = time.perf_counter() - began
        rss = peak_rss_bytes()
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
        note="fetches happen inside pgqueuer's worker loop",
    )


__all__ = ["NAME", "drain", "unavailable", "versions"]
