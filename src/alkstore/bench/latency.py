"""``bench latency``: how long a job waits between ``send`` and the ``fetch`` that returns it.

A consumer polls: it fetches up to ``batch`` jobs, completes them, and sleeps
``poll_interval`` seconds whenever a fetch came back short of a full batch. A sender sends one
job every ``1 / rate`` seconds for ``duration`` seconds; each job carries the time its
``send`` began, and the consumer records the time from then until its fetch returned. Both
run in this process (threads for sync drivers, tasks for async ones), so the clocks agree.

LISTEN/NOTIFY wake-ups do not exist in alkstore yet: the "with wake-ups" column says so.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from typing import Any

from ..core.records import Job
from .drain import QUEUE, Backend
from .measure import Latency, peak_rss_bytes, reset_peak_rss
from .report import Column
from .server import drop_schema

WAKEUPS_UNAVAILABLE = "not available: LISTEN/NOTIFY wake-ups are not implemented yet"

COLUMNS = (
    Column("engine", "engine", justify="left"),
    Column("driver", "driver", justify="left"),
    Column("rate", "jobs/s sent"),
    Column("poll_interval_ms", "poll interval ms"),
    Column("batch", "batch"),
    Column("received", "jobs"),
    Column("p50_ms", "p50 ms", 1),
    Column("p95_ms", "p95 ms", 1),
    Column("p99_ms", "p99 ms", 1),
    Column("max_ms", "max ms", 1),
    Column("with_wakeups", "with wake-ups", justify="left"),
)


def _waits(jobs: Sequence[Job], now: float) -> list[float]:
    return [now - float(job.data["sent"]) for job in jobs]


def latency_cell(
    dsn: str,
    backend: Backend,
    *,
    rate: float,
    duration: float,
    poll_interval: float,
    batch: int,
    schema: str,
) -> dict[str, Any]:
    """Send at ``rate`` jobs/s for ``duration`` s against a polling consumer; one JSON row."""
    total = max(1, round(rate * duration))
    try:
        args = (dsn, backend, rate, total, poll_interval, batch, schema)
        waits = asyncio.run(_latency_async(*args)) if backend.is_async else _run_sync(*args)
    finally:
        drop_schema(dsn, schema)
    latency = Latency.of(waits)
    return {
        "system": "alkstore",
        "engine": backend.engine,
        "driver": backend.driver,
        "rate": rate,
        "duration_s": duration,
        "poll_interval_ms": round(poll_interval * 1000),
        "batch": batch,
        "sent": total,
        "received": len(waits),
        "p50_ms": latency.p50_ms,
        "p95_ms": latency.p95_ms,
        "p99_ms": latency.p99_ms,
        "max_ms": max(waits) * 1000 if waits else None,
        "with_wakeups": WAKEUPS_UNAVAILABLE,
        "peak_rss_mb": round(peak_rss_bytes() / 2**20, 1),
    }


def _deadline(total: int, rate: float) -> float:
    """When the consumer gives up waiting for the last jobs."""
    return time.monotonic() + total / rate + 60.0


def _run_sync(
    dsn: str, backend: Backend, rate: float, total: int, interval: float, batch: int, schema: str
) -> list[float]:
    waits: list[float] = []
    with backend.open_sync(dsn, schema, pool_size=2) as store:
        store.create_queue(QUEUE)
        deadline = _deadline(total, rate)
        reset_peak_rss()

        def consume() -> None:
            while len(waits) < total and time.monotonic() < deadline:
                jobs = store.fetch(QUEUE, batch_size=batch)
                waits.extend(_waits(jobs, time.perf_counter()))
                if jobs:
                    store.complete(QUEUE, jobs)
                if len(jobs) < batch:
                    time.sleep(interval)

        consumer = threading.Thread(target=consume, name="bench-latency-consumer", daemon=True)
        consumer.start()
        began = time.perf_counter()
        for n in range(total):
            _pause_until(began + n / rate)
            store.send(QUEUE, {"sent": time.perf_counter()})
        consumer.join()
    return waits


def _pause_until(moment: float) -> None:
    delay = moment - time.perf_counter()
    if delay > 0:
        time.sleep(delay)


async def _latency_async(
    dsn: str, backend: Backend, rate: float, total: int, interval: float, batch: int, schema: str
) -> list[float]:
    waits: list[float] = []
    store = await backend.open_async(dsn, schema, pool_size=2)
    async with store:
        await store.create_queue(QUEUE)
        deadline = _deadline(total, rate)
        reset_peak_rss()

        async def consume() -> None:
            while len(waits) < total and time.monotonic() < deadline:
                jobs = await store.fetch(QUEUE, batch_size=batch)
                waits.extend(_waits(jobs, time.perf_counter()))
                if jobs:
                    await store.complete(QUEUE, jobs)
                if len(jobs) < batch:
                    await asyncio.sleep(interval)

        consumer = asyncio.ensure_future(consume())
        began = time.perf_counter()
        for n in range(total):
            delay = began + n / rate - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            await store.send(QUEUE, {"sent": time.perf_counter()})
        await consumer
    return waits


__all__ = ["COLUMNS", "WAKEUPS_UNAVAILABLE", "latency_cell"]
