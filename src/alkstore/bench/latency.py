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
from collections.abc import Iterator, Sequence
from typing import Any

from ..core.records import Job
from .drain import QUEUE, Backend, alkstore_row
from .measure import Latency, reset_peak_rss
from .report import BACKEND_COLUMNS, Column
from .server import drop_schema

WAKEUPS_UNAVAILABLE = "not available: LISTEN/NOTIFY wake-ups are not implemented yet"

COLUMNS = (
    *BACKEND_COLUMNS,
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


class _Receiver:
    """The consumer's side of a latency cell: the waits it saw, until it has them all."""

    def __init__(self, total: int, rate: float) -> None:
        self.total = total
        self.waits: list[float] = []
        """Seconds from each job's ``send`` until the fetch that returned it."""
        self.deadline = time.monotonic() + total / rate + 60.0
        """When the consumer gives up waiting for the last jobs."""

    @property
    def running(self) -> bool:
        """Jobs remain to be received, and the deadline has not passed."""
        return len(self.waits) < self.total and time.monotonic() < self.deadline

    def received(self, jobs: Sequence[Job]) -> None:
        """Record the waits of fetched ``jobs`` (now is when the fetch returned)."""
        now = time.perf_counter()
        self.waits.extend(now - float(job.data["sent"]) for job in jobs)


def _delays(total: int, rate: float) -> Iterator[float]:
    """Before each of ``total`` sends: how long to wait so they go out at ``rate`` a second."""
    began = time.perf_counter()
    for n in range(total):
        yield began + n / rate - time.perf_counter()


def _sent() -> dict[str, Any]:
    """The data of a job: when its ``send`` began."""
    return {"sent": time.perf_counter()}


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
    return alkstore_row(
        backend,
        {
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
        },
    )


def _run_sync(
    dsn: str, backend: Backend, rate: float, total: int, interval: float, batch: int, schema: str
) -> list[float]:
    with backend.open_sync(dsn, schema, pool_size=2) as store:
        store.create_queue(QUEUE)
        receiver = _Receiver(total, rate)
        reset_peak_rss()

        def consume() -> None:
            while receiver.running:
                jobs = store.fetch(QUEUE, batch_size=batch)
                receiver.received(jobs)
                if jobs:
                    store.complete(QUEUE, jobs)
                if len(jobs) < batch:
                    time.sleep(interval)

        consumer = threading.Thread(target=consume, name="bench-latency-consumer", daemon=True)
        consumer.start()
        for delay in _delays(total, rate):
            if delay > 0:
                time.sleep(delay)
            store.send(QUEUE, _sent())
        consumer.join()
    return receiver.waits


async def _latency_async(
    dsn: str, backend: Backend, rate: float, total: int, interval: float, batch: int, schema: str
) -> list[float]:
    store = await backend.open_async(dsn, schema, pool_size=2)
    async with store:
        await store.create_queue(QUEUE)
        receiver = _Receiver(total, rate)
        reset_peak_rss()

        async def consume() -> None:
            while receiver.running:
                jobs = await store.fetch(QUEUE, batch_size=batch)
                receiver.received(jobs)
                if jobs:
                    await store.complete(QUEUE, jobs)
                if len(jobs) < batch:
                    await asyncio.sleep(interval)

        consumer = asyncio.ensure_future(consume())
        for delay in _delays(total, rate):
            if delay > 0:
                await asyncio.sleep(delay)
            await store.send(QUEUE, _sent())
        await consumer
    return receiver.waits


__all__ = ["COLUMNS", "WAKEUPS_UNAVAILABLE", "latency_cell"]
