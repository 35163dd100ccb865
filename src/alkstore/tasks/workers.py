"""The app worker: one ``work()`` worker per task queue, started and stopped together."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from ..core.records import Job
from ..worker.loop import LoopThread
from .task import Task

if TYPE_CHECKING:
    from ..store import AsyncStore, Store
    from ..worker import AsyncWorker, Worker


def _runs(task: Task[Any, Any]) -> Callable[[Job], Any]:
    """The handler that calls ``task`` with a job's data."""

    def handle(job: Job) -> Any:
        return task.call_with(job.data)

    return handle


class AppWorker:
    """What :meth:`Tasks.worker` returns: a running worker per task queue (``workers``), on
    a :class:`~alkstore.Store`. Async tasks run on an event loop of its own (one thread),
    sync tasks in each worker's threads. Stop it with :meth:`stop` or a ``with`` block."""

    def __init__(
        self,
        store: Store,
        tasks: list[Task[Any, Any]],
        concurrency: int,
        options: Mapping[str, Any],
    ) -> None:
        self._loop = LoopThread() if any(t.is_async for t in tasks) else None
        self.workers: dict[str, Worker] = {}
        """Queue -> its running worker."""
        try:
            for task in tasks:
                handler = _runs(task)
                if task.is_async:
                    assert self._loop is not None
                    handler = self._loop.blocking(handler)
                self.workers[task.queue] = store.work(
                    task.queue, handler, concurrency=task.concurrency or concurrency, **options
                )
        except BaseException:
            self.stop()
            raise

    @property
    def running(self) -> int:
        """Task calls in progress, across every queue."""
        return sum(w.running for w in self.workers.values())

    def stop(self, timeout: float = 30.0) -> None:
        """Stop every queue's worker at once (see :meth:`~alkstore.worker.Worker.stop`: each
        waits up to ``timeout`` seconds for its running calls), then the event loop."""
        workers = list(self.workers.values())
        if workers:
            with ThreadPoolExecutor(len(workers), "alkstore-stop") as pool:
                for _ in pool.map(lambda w: w.stop(timeout), workers):
                    pass
        if self._loop is not None:
            self._loop.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


class AsyncAppWorker:
    """What :meth:`Tasks.worker_async` returns: :class:`AppWorker` on an
    :class:`~alkstore.AsyncStore`; async tasks run on the running loop, sync ones in threads.
    Stop it with ``await stop()`` or an ``async with`` block."""

    def __init__(self, workers: dict[str, AsyncWorker]) -> None:
        self.workers = workers
        """Queue -> its running worker."""

    @classmethod
    async def start(
        cls,
        store: AsyncStore,
        tasks: list[Task[Any, Any]],
        concurrency: int,
        options: Mapping[str, Any],
    ) -> AsyncAppWorker:
        """Start a worker per task's queue."""
        started = cls({})
        try:
            for task in tasks:
                handler = _runs(task)
                if not task.is_async:
                    handler = _in_thread(handler)
                started.workers[task.queue] = await store.work(
                    task.queue, handler, concurrency=task.concurrency or concurrency, **options
                )
        except BaseException:
            await started.stop()
            raise
        return started

    @property
    def running(self) -> int:
        """Task calls in progress, across every queue."""
        return sum(w.running for w in self.workers.values())

    async def stop(self, timeout: float = 30.0) -> None:
        """See :meth:`AppWorker.stop`."""
        await asyncio.gather(*(w.stop(timeout) for w in self.workers.values()))

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


def _in_thread(handler: Callable[[Job], Any]) -> Callable[[Job], Any]:
    async def handle(job: Job) -> Any:
        return await asyncio.to_thread(handler, job)

    return handle


__all__ = ["AppWorker", "AsyncAppWorker"]
