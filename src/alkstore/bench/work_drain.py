"""Drains through ``store.work()`` (driver suffix ``+work``): the worker runtime's own loop,
``concurrency`` = consumers and ``batch_size`` = batch, with a no-op batch handler. The clock
stops when the worker has stopped, so every handled job is also completed."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Hashable
from typing import Any

import alkstore

from ..core.records import Job
from .loops import LoopOutcome, Tally

POLL = 0.05
"""The worker's poll interval (a drain finds jobs on every fetch; this only bounds the idle
wait of the last fetches)."""


class _Handled:
    """The batch handler: records each delivery; ``done`` once ``tally.target`` were seen."""

    def __init__(self, tally: Tally) -> None:
        self.tally = tally
        self.ids: list[Hashable] = []
        self._lock = threading.Lock()

    def seen(self, jobs: list[Job]) -> bool:
        with self._lock:
            self.ids.extend(job.id for job in jobs)
            count = len(self.ids)
        self.tally.claim(len(jobs))
        return count >= self.tally.target

    def outcome(self, seconds: float, timed_out: bool) -> LoopOutcome:
        self.tally.complete(len(self.ids))
        return LoopOutcome(seconds, self.ids, [], 0, self.tally.completed, timed_out)


def _options(consumers: int, batch: int) -> dict[str, Any]:
    return {
        "concurrency": consumers,
        "batch": True,
        "batch_size": batch,
        "poll_interval": POLL,
        "maintenance": False,
    }


def work_threads(
    store: alkstore.Store, queue: str, consumers: int, batch: int, tally: Tally, timeout: float
) -> LoopOutcome:
    """Drain ``queue`` with ``store.work()`` until ``tally.target`` jobs were handled."""
    handled, done = _Handled(tally), threading.Event()

    def handler(jobs: list[Job]) -> None:
        if handled.seen(jobs):
            done.set()

    began = time.perf_counter()
    worker = store.work(queue, handler, **_options(consumers, batch))
    timed_out = not done.wait(timeout)
    worker.stop()
    return handled.outcome(time.perf_counter() - began, timed_out)


async def work_tasks(
    store: alkstore.AsyncStore, queue: str, consumers: int, batch: int, tally: Tally, timeout: float
) -> LoopOutcome:
    """:func:`work_threads` for an async store."""
    handled, done = _Handled(tally), asyncio.Event()

    async def handler(jobs: list[Job]) -> None:
        if handled.seen(jobs):
            done.set()

    began = time.perf_counter()
    worker = await store.work(queue, handler, **_options(consumers, batch))
    timed_out = True
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), timeout)
        timed_out = False
    await worker.stop()
    return handled.outcome(time.perf_counter() - began, timed_out)
