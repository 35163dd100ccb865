"""``bench enqueue``: single ``send``, ``send_many`` in batches, by one or many concurrent senders.

Each cell splits its jobs evenly between ``senders`` threads (sync drivers) or tasks (async
drivers) and times every call; a ``send_many`` cell sends batches of ``batch`` jobs.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import attrs

from . import event_loop
from .drain import QUEUE, Backend, alkstore_row, job_specs
from .loops import run_workers, run_workers_async
from .measure import Latency, rate, reset_peak_rss
from .report import BACKEND_COLUMNS, PEAK_RSS_COLUMN, Column
from .server import checkpoint, drop_schema

MODES = ("send", "send_many")
"""``send``: one job a call; ``send_many``: ``batch`` jobs a call."""

COLUMNS = (
    *BACKEND_COLUMNS,
    Column("mode", "mode", justify="left"),
    Column("senders", "senders"),
    Column("batch", "jobs/call"),
    Column("jobs", "jobs"),
    Column("jobs_per_s", "jobs/s"),
    Column("call_p50_ms", "call p50 ms", 2),
    Column("call_p99_ms", "call p99 ms", 2),
    PEAK_RSS_COLUMN,
)


def _split(total: int, parts: int, index: int) -> int:
    """The share of ``total`` that part ``index`` of ``parts`` takes."""
    return total // parts + (1 if index < total % parts else 0)


def _calls(jobs: int, batch: int) -> list[int]:
    """Sizes of the calls that send ``jobs`` jobs ``batch`` at a time."""
    return [min(batch, jobs - start) for start in range(0, jobs, batch)]


@attrs.frozen
class _Senders:
    """One enqueue cell: what it is given, and every step of it that is not store I/O."""

    dsn: str
    backend: Backend
    mode: str
    senders: int
    jobs: int
    per_call: int
    schema: str

    def timed_calls(self, index: int, samples: list[float], limit: int | None) -> Iterator[int]:
        """The call sizes of sender ``index`` (the first ``limit``), each call timed.

        The caller makes call ``n`` in the body of its ``for`` loop; the time from the yield
        until the loop asks for the next size is appended to ``samples``.
        """
        for n in _calls(_split(self.jobs, self.senders, index), self.per_call)[:limit]:
            began = time.perf_counter()
            yield n
            samples.append(time.perf_counter() - began)


def enqueue_cell(
    dsn: str, backend: Backend, *, mode: str, senders: int, jobs: int, batch: int, schema: str
) -> dict[str, Any]:
    """Time ``jobs`` jobs sent by ``senders`` concurrent senders; one JSON row."""
    per_call = 1 if mode == "send" else batch
    cell = _Senders(dsn, backend, mode, senders, jobs, per_call, schema)
    try:
        seconds, samples = (
            event_loop.run(_async_cell(cell)) if backend.is_async else _sync_cell(cell)
        )
    finally:
        drop_schema(dsn, schema)
    latency = Latency.of(samples)
    return alkstore_row(
        backend,
        {
            "mode": mode,
            "senders": senders,
            "batch": per_call,
            "jobs": jobs,
            "seconds": round(seconds, 4),
            "jobs_per_s": round(rate(jobs, seconds), 1),
            "call_p50_ms": latency.p50_ms,
            "call_p99_ms": latency.p99_ms,
        },
    )


def _sync_cell(c: _Senders) -> tuple[float, list[float]]:
    with c.backend.open_sync(c.dsn, c.schema, pool_size=c.senders) as store:
        store.create_queue(QUEUE)

        def work(index: int, limit: int | None = None) -> list[float]:
            samples: list[float] = []
            for n in c.timed_calls(index, samples, limit):
                if c.mode == "send":
                    store.send(QUEUE, {"n": index})
                else:
                    store.send_many(QUEUE, job_specs(0, n))
            return samples

        run_workers(c.senders, lambda i: work(i, 1))  # warm-up: opens the connections
        checkpoint(c.dsn)
        reset_peak_rss()
        return run_workers(c.senders, work)


async def _async_cell(c: _Senders) -> tuple[float, list[float]]:
    store = await c.backend.open_async(c.dsn, c.schema, pool_size=c.senders)
    async with store:
        await store.create_queue(QUEUE)

        async def work(index: int, limit: int | None = None) -> list[float]:
            samples: list[float] = []
            for n in c.timed_calls(index, samples, limit):
                if c.mode == "send":
                    await store.send(QUEUE, {"n": index})
                else:
                    await store.send_many(QUEUE, job_specs(0, n))
            return samples

        await run_workers_async(c.senders, lambda i: work(i, 1))  # warm-up
        await asyncio.to_thread(checkpoint, c.dsn)
        reset_peak_rss()
        return await run_workers_async(c.senders, work)


__all__ = ["COLUMNS", "MODES", "enqueue_cell"]
