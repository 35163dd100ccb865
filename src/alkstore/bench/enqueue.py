"""``bench enqueue``: single ``send``, ``send_many`` in batches, by one or many concurrent senders.

Each cell splits its jobs evenly between ``senders`` threads (sync drivers) or tasks (async
drivers) and times every call; a ``send_many`` cell sends batches of ``batch`` jobs.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from .drain import QUEUE, Backend, job_specs
from .loops import run_workers, run_workers_async
from .measure import Latency, peak_rss_bytes, rate, reset_peak_rss
from .report import Column
from .server import checkpoint, drop_schema

MODES = ("send", "send_many")
"""``send``: one job a call; ``send_many``: ``batch`` jobs a call."""

COLUMNS = (
    Column("engine", "engine", justify="left"),
    Column("driver", "driver", justify="left"),
    Column("mode", "mode", justify="left"),
    Column("senders", "senders"),
    Column("batch", "jobs/call"),
    Column("jobs", "jobs"),
    Column("jobs_per_s", "jobs/s"),
    Column("call_p50_ms", "call p50 ms", 2),
    Column("call_p99_ms", "call p99 ms", 2),
    Column("peak_rss_mb", "peak RSS MiB", 1),
)


def _split(total: int, parts: int, index: int) -> int:
    """The share of ``total`` that part ``index`` of ``parts`` takes."""
    return total // parts + (1 if index < total % parts else 0)


def _calls(jobs: int, batch: int) -> list[int]:
    """Sizes of the calls that send ``jobs`` jobs ``batch`` at a time."""
    return [min(batch, jobs - start) for start in range(0, jobs, batch)]


def enqueue_cell(
    dsn: str, backend: Backend, *, mode: str, senders: int, jobs: int, batch: int, schema: str
) -> dict[str, Any]:
    """Time ``jobs`` jobs sent by ``senders`` concurrent senders; one JSON row."""
    per_call = 1 if mode == "send" else batch
    try:
        if backend.is_async:
            seconds, samples = asyncio.run(
                _async_cell(dsn, backend, mode, senders, jobs, per_call, schema)
            )
        else:
            seconds, samples = _sync_cell(dsn, backend, mode, senders, jobs, per_call, schema)
    finally:
        drop_schema(dsn, schema)
    latency = Latency.of(samples)
    return {
        "system": "alkstore",
        "engine": backend.engine,
        "driver": backend.driver,
        "mode": mode,
        "senders": senders,
        "batch": per_call,
        "jobs": jobs,
        "seconds": round(seconds, 4),
        "jobs_per_s": round(rate(jobs, seconds), 1),
        "call_p50_ms": latency.p50_ms,
        "call_p99_ms": latency.p99_ms,
        "peak_rss_mb": round(peak_rss_bytes() / 2**20, 1),
    }


def _sync_cell(
    dsn: str, backend: Backend, mode: str, senders: int, jobs: int, per_call: int, schema: str
) -> tuple[float, list[float]]:
    with backend.open_sync(dsn, schema, pool_size=senders) as store:
        store.create_queue(QUEUE)

        def work(index: int, limit: int | None = None) -> list[float]:
            samples = []
            for n in _calls(_split(jobs, senders, index), per_call)[:limit]:
                began = time.perf_counter()
                if mode == "send":
                    store.send(QUEUE, {"n": index})
                else:
                    store.send_many(QUEUE, job_specs(0, n))
                samples.append(time.perf_counter() - began)
            return samples

        run_workers(senders, lambda i: work(i, 1))  # warm-up: opens the connections
        checkpoint(dsn)
        reset_peak_rss()
        return run_workers(senders, work)


async def _async_cell(
    dsn: str, backend: Backend, mode: str, senders: int, jobs: int, per_call: int, schema: str
) -> tuple[float, list[float]]:
    store = await backend.open_async(dsn, schema, pool_size=senders)
    async with store:
        await store.create_queue(QUEUE)

        async def work(index: int, limit: int | None = None) -> list[float]:
            samples = []
            for n in _calls(_split(jobs, senders, index), per_call)[:limit]:
                began = time.perf_counter()
                if mode == "send":
                    await store.send(QUEUE, {"n": index})
                else:
                    await store.send_many(QUEUE, job_specs(0, n))
                samples.append(time.perf_counter() - began)
            return samples

        await run_workers_async(senders, lambda i: work(i, 1))  # warm-up
        await asyncio.to_thread(checkpoint, dsn)
        reset_peak_rss()
        return await run_workers_async(senders, work)


__all__ = ["COLUMNS", "MODES", "enqueue_cell"]
