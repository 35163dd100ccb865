"""The task shell of a worker, for :class:`~alkstore.AsyncStore`: the thread shell's design
(:mod:`.threads`) with a fetcher task, one task per handler call and a watch task."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import uuid
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from ..core.records import Job
from ..core.targets import targets
from ..engines.postgres.runtime import runtime_engine, watch
from ..runner import run_in_session_async
from .context import AsyncJobContext
from .events import WorkerEvent, emit, timed
from .options import WorkOptions
from .settle import STOPPED, JobLost, error_of, job_key, native_connection, settle, wants_context

if TYPE_CHECKING:
    from ..store import AsyncStore


class AsyncWorker:
    """A running worker: what ``await AsyncStore.work()`` returns. Stop it with
    ``await worker.stop()`` or an ``async with`` block."""

    def __init__(
        self, store: AsyncStore, queue: str, handler: Callable[..., Any], options: WorkOptions
    ) -> None:
        self.queue = queue
        self.options = options
        self._store = store
        self._engine = runtime_engine(store.engine)
        self._handler = handler
        self._with_context = wants_context(handler)
        self._loop = asyncio.get_running_loop()
        self._running: dict[uuid.UUID, AsyncJobContext] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._stopping = asyncio.Event()
        self._stopped = asyncio.Event()
        self._wake = asyncio.Event()
        store._runtime.attach(self)
        self._fetcher = self._loop.create_task(self._fetch_loop())
        self._watcher = self._loop.create_task(self._watch_loop())

    def wake(self) -> None:
        """Fetch now (thread-safe: wake-ups may come from another thread)."""
        with contextlib.suppress(RuntimeError):  # the loop has closed
            self._loop.call_soon_threadsafe(self._wake.set)

    def _event(self, kind: str, **detail: Any) -> None:
        emit(self.options.on_event, WorkerEvent(kind, self.queue, detail))

    def _timed(self, operation: str) -> Any:
        opts = self.options
        return timed(opts.on_event, self.queue, operation, opts.slow_query_seconds)

    async def _nap(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), seconds)

    async def _fetch_loop(self) -> None:
        opts = self.options
        while not self._stopping.is_set():
            free = opts.concurrency - len(self._running)
            if free <= 0:
                await self._nap(opts.poll_interval)
                self._wake.clear()
                continue
            self._wake.clear()
            try:
                with self._timed("fetch"):
                    jobs = await self._store.fetch(
                        self.queue, batch_size=opts.batch_size if opts.batch else free
                    )
            except Exception as exc:
                self._event("fetch_error", error=error_of(exc)["message"])
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), opts.poll_interval)
                continue
            if not jobs:
                await self._nap(opts.poll_interval)
                continue
            for call in [jobs] if opts.batch else [[job] for job in jobs]:
                self._start(call)

    def _start(self, jobs: list[Job]) -> None:
        ctx = AsyncJobContext(jobs, self._touch)
        if self._stopping.is_set():
            ctx.cancelled.set()
        self._running[job_key(jobs)] = ctx
        self._idle.clear()
        task = self._loop.create_task(self._call(ctx))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _call(self, ctx: AsyncJobContext) -> None:
        # As the thread shell: a slot chains complete_and_fetch while it claims jobs.
        try:
            while True:
                if self.options.transactional:
                    await self._call_in_transaction(ctx)
                    break
                more = await self._call_plain(ctx)
                if not more:
                    break
                follow = AsyncJobContext(more, self._touch)
                self._running.pop(job_key(ctx.jobs), None)
                self._running[job_key(more)] = follow
                if self._stopping.is_set():
                    follow.cancelled.set()
                ctx = follow
        finally:
            self._running.pop(job_key(ctx.jobs), None)
            if not self._running:
                self._idle.set()
            self._wake.set()

    async def _invoke(self, ctx: AsyncJobContext) -> Any:
        arg: Any = ctx.jobs if self.options.batch else ctx.job
        result = self._handler(arg, ctx) if self._with_context else self._handler(arg)
        return await result if inspect.isawaitable(result) else result

    async def _call_plain(self, ctx: AsyncJobContext) -> list[Job]:
        """Run the handler and settle; the next jobs this slot claimed meanwhile, if any."""
        ops = self._store._ops
        try:
            result = await self._invoke(ctx)
            outcome = settle(ops, self.queue, ctx.jobs, batch=self.options.batch, result=result)
        except Exception as exc:
            outcome = settle(ops, self.queue, ctx.jobs, batch=False, error=exc)
        try:
            if outcome.whole is not None and not self._stopping.is_set():
                size = self.options.batch_size if self.options.batch else 1
                with self._timed("complete_and_fetch"):
                    handoff = await self._store.complete_and_fetch(
                        self.queue, ctx.jobs, outcome.whole[0], batch_size=size
                    )
                return handoff.jobs
            with self._timed("settle"):
                for plan in outcome.plans:
                    await self._store._run(plan)
        except Exception as exc:
            self._event("settle_error", error=error_of(exc)["message"])
            return []
        self._report(outcome.failed)
        return []

    async def _call_in_transaction(self, ctx: AsyncJobContext) -> None:
        store = self._store
        try:
            async with store._source.session() as session:
                async with session.transaction(self._engine.isolation):
                    ctx.connection = native_connection(session)
                    result = await self._invoke(ctx)
                    outcome = settle(
                        store._ops, self.queue, ctx.jobs, batch=self.options.batch, result=result
                    )
                    done = [
                        await run_in_session_async(session, store.driver, p) for p in outcome.plans
                    ]
                    if sum(done) < outcome.completions + len(outcome.failed):
                        raise JobLost(f"jobs of {self.queue!r} were settled elsewhere")
                ctx.connection = None
        except JobLost as exc:
            self._event("settle_error", error=str(exc))
            return
        except Exception as exc:
            ctx.connection = None
            outcome = settle(store._ops, self.queue, ctx.jobs, batch=False, error=exc)
            try:
                for plan in outcome.plans:
                    await store._run(plan)
            except Exception as again:
                self._event("settle_error", error=error_of(again)["message"])
                return
        self._report(outcome.failed)

    def _report(self, failed: list[tuple[Job, dict[str, str]]]) -> None:
        for job, stored in failed:
            self._event("handler_failed", job=str(job.id), error=stored["message"])

    async def _touch(self, jobs: list[Job]) -> bool:
        alive = await self._store._run(watch(self._engine, self.queue, targets(jobs)))
        return any(job.id in alive for job in jobs)

    def _watch_interval(self) -> float:
        beats = [
            j.heartbeat_seconds
            for ctx in self._running.values()
            for j in ctx.jobs
            if j.heartbeat_seconds
        ]
        return min([self.options.watch_interval] + [b / 3 for b in beats])

    async def _watch_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), self._watch_interval())
                return
            calls = list(self._running.values())
            if not calls:
                continue
            jobs = [job for ctx in calls for job in ctx.jobs]
            try:
                with self._timed("watch"):
                    alive = await self._store._run(watch(self._engine, self.queue, targets(jobs)))
            except Exception as exc:
                self._event("watch_error", error=error_of(exc)["message"])
                continue
            for ctx in calls:
                if not any(job.id in alive for job in ctx.jobs):
                    ctx.cancelled.set()

    @property
    def running(self) -> int:
        """Handler calls in progress."""
        return len(self._running)

    async def stop(self, timeout: float = 30.0) -> None:
        """See :meth:`~alkstore.worker.Worker.stop`; handler tasks still running after
        ``timeout`` are cancelled once their jobs are failed."""
        if self._stopped.is_set():
            return
        deadline = self._loop.time() + timeout
        self._stopping.set()
        self._wake.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._fetcher), timeout)
        for ctx in self._running.values():
            ctx.cancelled.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), max(0.0, deadline - self._loop.time()))
        left = [job for ctx in self._running.values() for job in ctx.jobs]
        if left:
            try:
                await self._store.fail(self.queue, left, STOPPED)
            finally:
                self._event("stopped", jobs=[str(job.id) for job in left])
                for task in list(self._tasks):
                    task.cancel()
        self._fetcher.cancel()
        self._stopped.set()
        with contextlib.suppress(asyncio.CancelledError):
            await self._watcher
        await self._store._runtime.detach(self)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
