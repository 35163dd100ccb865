"""N concurrent fetch + complete loops: threads for sync clients, asyncio tasks for async ones.

Every drain in the harness (alkstore on each driver, the raw-SQL ceiling, pg-boss's Node
script mirrors it) is this loop: fetch a batch, record how long the fetch took and which job
ids came back, complete them, repeat until the harness has seen ``target`` jobs claimed.

Counting is done here, not trusted from the queue: every delivered id is kept, so duplicate
deliveries are found by comparing the ids all consumers collected. An *empty fetch* is a fetch
that returned no job while fewer than ``target`` jobs had been claimed, i.e. while jobs were
still queued (or held by a concurrent claim that had not returned yet).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable, Hashable, Iterator, Sequence
from typing import Any

import attrs

from .progress import Progress

SyncFetch = Callable[[int], Sequence[Any]]
"""Claim up to ``batch`` jobs; returns them (any objects)."""
SyncComplete = Callable[[Sequence[Any]], object]
"""Complete jobs returned by the fetch."""
SyncHandoff = Callable[[Sequence[Any], int], Sequence[Any]]
"""Complete the given jobs and claim up to ``batch`` more in one call; returns those."""
AsyncFetch = Callable[[int], Awaitable[Sequence[Any]]]
AsyncComplete = Callable[[Sequence[Any]], Awaitable[object]]
AsyncHandoff = Callable[[Sequence[Any], int], Awaitable[Sequence[Any]]]
IdOf = Callable[[Any], Hashable]
"""The job id of one fetched job."""


class Tally:
    """Claimed and completed counts shared by the consumers of one run."""

    def __init__(self, target: int) -> None:
        self.target = target
        """Stop once this many jobs were claimed."""
        self.claimed = 0
        self.completed = 0
        self.stop = False
        """Set to end every loop early (an error, or the deadline)."""
        self._lock = threading.Lock()

    def claim(self, n: int) -> None:
        """Record ``n`` claimed jobs."""
        with self._lock:
            self.claimed += n

    def complete(self, n: int) -> None:
        """Record ``n`` completed jobs."""
        with self._lock:
            self.completed += n

    @property
    def running(self) -> bool:
        """Jobs remain to be claimed and nobody asked to stop."""
        return self.claimed < self.target and not self.stop

    def go_on(self, deadline: float) -> bool:
        """:attr:`running`, and the ``deadline`` (``time.monotonic``) not passed: else stop."""
        if not self.running:
            return False
        if time.monotonic() > deadline:
            self.stop = True
            return False
        return True


@contextlib.contextmanager
def tracked(progress: Progress, description: str, target: int) -> Iterator[Tally]:
    """A fresh :class:`Tally` of ``target`` jobs, its completions shown while the block runs."""
    tally = Tally(target)
    with progress.track(description, target, lambda: tally.completed):
        yield tally


@attrs.define
class ConsumerLog:
    """What one consumer saw."""

    ids: list[Hashable] = attrs.field(factory=list)
    fetch_seconds: list[float] = attrs.field(factory=list)
    empty_fetches: int = 0

    def fetched(self, jobs: Sequence[Any], seconds: float, tally: Tally, id_of: IdOf) -> bool:
        """Record a fetch that took ``seconds``; whether it returned jobs (to complete)."""
        self.fetch_seconds.append(seconds)
        if not jobs:
            if tally.claimed < tally.target:
                self.empty_fetches += 1
            return False
        tally.claim(len(jobs))
        self.ids.extend(id_of(job) for job in jobs)
        return True


@attrs.frozen
class LoopOutcome:
    """What all consumers of one run saw together."""

    seconds: float
    """Wall time from the start signal until the last consumer stopped."""
    ids: list[Hashable]
    fetch_seconds: list[float]
    empty_fetches: int
    completed: int
    timed_out: bool

    @property
    def delivered(self) -> int:
        """Job deliveries seen (a duplicate counts twice)."""
        return len(self.ids)

    @property
    def duplicates(self) -> int:
        """Deliveries of a job that an earlier fetch had already delivered."""
        return len(self.ids) - len(set(self.ids))

    @classmethod
    def gather(
        cls, seconds: float, logs: Sequence[ConsumerLog], tally: Tally, timed_out: bool
    ) -> LoopOutcome:
        """Merge the consumers' logs."""
        return cls(
            seconds=seconds,
            ids=[i for log in logs for i in log.ids],
            fetch_seconds=[s for log in logs for s in log.fetch_seconds],
            empty_fetches=sum(log.empty_fetches for log in logs),
            completed=tally.completed,
            timed_out=timed_out,
        )


def _on_threads(
    count: int,
    body: Callable[[int], None],
    name: str | None = None,
    on_error: Callable[[], None] | None = None,
) -> float:
    """``body(index)`` on ``count`` threads released at once; wall seconds until all ended.

    The first error a body raised is raised here, after every thread ended; ``on_error`` is
    called as soon as a body fails (to stop the others early).
    """
    errors: list[BaseException] = []
    start = threading.Barrier(count + 1)

    def run(index: int) -> None:
        start.wait()
        try:
            body(index)
        except BaseException as exc:
            errors.append(exc)
            if on_error is not None:
                on_error()

    threads = [
        threading.Thread(
            target=run, args=(i,), name=None if name is None else f"{name}-{i}", daemon=True
        )
        for i in range(count)
    ]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - began
    if errors:
        raise errors[0]
    return seconds


def run_threads(
    consumers: int,
    batch: int,
    fetch: SyncFetch,
    complete: SyncComplete,
    id_of: IdOf,
    tally: Tally,
    timeout: float,
    handoff: SyncHandoff | None = None,
) -> LoopOutcome:
    """Run ``consumers`` threads of fetch + complete until ``tally.target`` jobs are claimed.

    With ``handoff``, a consumer that holds jobs completes them and claims the next ones in
    that one call (timed as its fetch); ``fetch`` is used only while it holds none.
    """
    logs = [ConsumerLog() for _ in range(consumers)]
    deadline = time.monotonic() + timeout

    def consume(index: int) -> None:
        log = logs[index]
        held: Sequence[Any] = []
        while tally.go_on(deadline):
            began = time.perf_counter()
            jobs = handoff(held, batch) if handoff is not None and held else fetch(batch)
            tally.complete(len(held))
            held = []
            if log.fetched(jobs, time.perf_counter() - began, tally, id_of):
                if handoff is not None:
                    held = jobs
                    continue
                complete(jobs)
                tally.complete(len(jobs))
        if held:
            complete(held)
            tally.complete(len(held))

    def stop() -> None:
        tally.stop = True

    seconds = _on_threads(consumers, consume, "bench-consumer", stop)
    return LoopOutcome.gather(seconds, logs, tally, timed_out=tally.stop)


async def run_tasks(
    consumers: int,
    batch: int,
    fetch: AsyncFetch,
    complete: AsyncComplete,
    id_of: IdOf,
    tally: Tally,
    timeout: float,
    handoff: AsyncHandoff | None = None,
) -> LoopOutcome:
    """Run ``consumers`` asyncio tasks of fetch + complete until ``tally.target`` are claimed
    (``handoff`` as in :func:`run_threads`)."""
    logs = [ConsumerLog() for _ in range(consumers)]
    deadline = time.monotonic() + timeout

    async def consume(log: ConsumerLog) -> None:
        held: Sequence[Any] = []
        while tally.go_on(deadline):
            began = time.perf_counter()
            jobs = await (handoff(held, batch) if handoff is not None and held else fetch(batch))
            tally.complete(len(held))
            held = []
            if log.fetched(jobs, time.perf_counter() - began, tally, id_of):
                if handoff is not None:
                    held = jobs
                    continue
                await complete(jobs)
                tally.complete(len(jobs))
            else:
                await asyncio.sleep(0)  # let the other consumers' claims return
        if held:
            await complete(held)
            tally.complete(len(held))

    began = time.perf_counter()
    tasks = [asyncio.ensure_future(consume(log)) for log in logs]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        tally.stop = True
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    seconds = time.perf_counter() - began
    return LoopOutcome.gather(seconds, logs, tally, timed_out=tally.stop)


def run_workers(count: int, work: Callable[[int], list[float]]) -> tuple[float, list[float]]:
    """Run ``work(index)`` on ``count`` threads at once; wall seconds and all returned samples."""
    results: list[list[float]] = [[] for _ in range(count)]

    def body(index: int) -> None:
        results[index] = work(index)

    seconds = _on_threads(count, body)
    return seconds, [s for samples in results for s in samples]


async def run_workers_async(
    count: int, work: Callable[[int], Awaitable[list[float]]]
) -> tuple[float, list[float]]:
    """:func:`run_workers` with asyncio tasks."""
    began = time.perf_counter()
    results = await asyncio.gather(*(work(i) for i in range(count)))
    return time.perf_counter() - began, [s for samples in results for s in samples]


__all__ = [
    "AsyncComplete",
    "AsyncFetch",
    "AsyncHandoff",
    "ConsumerLog",
    "IdOf",
    "LoopOutcome",
    "SyncComplete",
    "SyncFetch",
    "SyncHandoff",
    "Tally",
    "run_tasks",
    "run_threads",
    "run_workers",
    "run_workers_async",
    "tracked",
]
