"""``bench rss``: the worker's resident memory through a long drain through ``store.work()``.

The cell runs in a process of its own (:mod:`.isolation`): it pre-enqueues ``jobs`` jobs in
batches, prepares the server as every drain does, then drains them with ``store.work()``
(no-op batch handler, ``concurrency`` and ``batch_size``) while a sampler records the
process's current RSS (``VmRSS``) and the jobs handled every ``every`` seconds. Flat means the
last samples are no higher than the first ones after the warm-up: no memory grows with the
number of jobs handled.
"""

from __future__ import annotations

import gc
import threading
import time
from pathlib import Path
from typing import Any

from ..core.records import Job
from .drain import QUEUE, Backend, send_in_batches
from .progress import Progress
from .report import Column
from .server import drop_schema, prepare_drain

_STATUS = Path("/proc/self/status")

COLUMNS = (
    Column("driver", "driver", justify="left"),
    Column("jobs", "jobs"),
    Column("concurrency", "concurrency"),
    Column("batch", "batch"),
    Column("jobs_per_s", "jobs/s"),
    Column("rss_start_mb", "RSS at start MiB", 1),
    Column("rss_max_mb", "RSS max MiB", 1),
    Column("rss_end_mb", "RSS at end MiB", 1),
    Column("rss_growth_mb", "growth after the first 10% MiB", 1),
    Column("samples", "samples"),
)


def current_rss_mb() -> float:
    """This process's resident set size now (``VmRSS``), in MiB."""
    for line in _STATUS.read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmRSS in /proc/self/status (Linux only)")


def rss_cell(
    progress: Progress,
    dsn: str,
    backend: Backend,
    jobs: int,
    concurrency: int,
    batch: int,
    schema: str,
    every: float,
    timeout: float,
) -> dict[str, Any]:
    """One drain of ``jobs`` jobs with RSS samples (runs in the child process)."""
    if backend.is_async:
        raise ValueError("bench rss drives the sync face (Store.work's threads)")
    try:
        with backend.open_sync(dsn, schema, pool_size=concurrency + 4) as store:
            store.create_queue(QUEUE)
            send_in_batches(lambda specs: store.send_many(QUEUE, specs), jobs)
            prepare_drain(dsn)
            gc.collect()
            handled = [0]
            lock, done = threading.Lock(), threading.Event()

            def handler(batch_jobs: list[Job]) -> None:
                with lock:
                    handled[0] += len(batch_jobs)
                    if handled[0] >= jobs:
                        done.set()

            samples: list[dict[str, float]] = []
            began = time.perf_counter()

            def sample() -> None:
                samples.append(
                    {
                        "seconds": round(time.perf_counter() - began, 2),
                        "handled": handled[0],
                        "rss_mb": current_rss_mb(),
                    }
                )

            sample()
            with (
                progress.track(f"rss {backend.driver}", jobs, lambda: handled[0]),
                store.work(
                    QUEUE,
                    handler,
                    concurrency=concurrency,
                    batch=True,
                    batch_size=batch,
                    maintenance=False,
                ),
            ):
                deadline = time.monotonic() + timeout
                # The sampling cadence, not a synchronisation: the wait ends early when done.
                while not done.wait(every) and time.monotonic() < deadline:
                    sample()
            seconds = time.perf_counter() - began
            sample()
    finally:
        drop_schema(dsn, schema)
    return summary(backend.driver, jobs, concurrency, batch, seconds, samples)


def summary(
    driver: str,
    jobs: int,
    concurrency: int,
    batch: int,
    seconds: float,
    samples: list[dict[str, float]],
) -> dict[str, Any]:
    """The JSON row of a cell: the figures of the table, then every sample."""
    rss = [s["rss_mb"] for s in samples]
    warm = [s["rss_mb"] for s in samples if s["handled"] >= jobs / 10] or rss
    handled = int(samples[-1]["handled"])
    return {
        "system": "alkstore",
        "driver": driver,
        "jobs": jobs,
        "handled": handled,
        "concurrency": concurrency,
        "batch": batch,
        "seconds": seconds,
        "jobs_per_s": handled / seconds if seconds > 0 else 0.0,
        "rss_start_mb": rss[0],
        "rss_max_mb": max(rss),
        "rss_end_mb": rss[-1],
        "rss_growth_mb": round(max(warm) - warm[0], 1),
        "samples": len(samples),
        "rss_samples": samples,
    }


__all__ = ["COLUMNS", "current_rss_mb", "rss_cell", "summary"]
