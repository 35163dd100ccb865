"""The task shell of a worker, for :class:`~alkstore.AsyncStore`: the thread shell's design
(:mod:`.threads`) with a fetcher task, one task per handler call and a watch task; every
decision is :class:`~.core.WorkerCore`'s."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from ..core.records import Job
from ..runner import run_in_session_async
from . import stages
from .backoff import RECONNECT_FIRST, jittered
from .claims import AsyncClaims
from .context import AsyncJobContext
from .core import WorkerCore
from .options import WorkOptions
from .settle import STOPPED, JobLost, Settlement, error_of, native_connection

if TYPE_CHECKING:
    from .faces import AsyncFace

T = TypeVar("T")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, if any."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class AsyncWorker(WorkerCore[AsyncJobContext]):
    """A running worker: what ``await AsyncStore.work()`` returns. Stop it with
    ``await worker.stop()`` or an ``async with`` block."""

    def __init__(
        self, store: AsyncFace, queue: str, handler: Callable[..., Any], options: WorkOptions
    ) -> None:
        super().__init__(
            store, queue, handler, options, lambda jobs: AsyncJobContext(jobs, self._touch)
        )
        self._store: AsyncFace = store
        self._loop = asyncio.get_running_loop()
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
        """Fetch now (thread-safe: wake-ups may come from another thread). On the worker's
        own loop (its store's listener task, a send of the same store) the event is set at
        once, without a trip through the loop's self-pipe."""
        if _running_loop() is self._loop:
            self._wake.set()
            return
        with contextlib.suppress(RuntimeError):  # the loop has closed
            self._loop.call_soon_threadsafe(self._wake.set)

    async def _nap(self, seconds: float) -> None:
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for runs the wait in a task of
        # its own, two more turns of the loop between the wake-up and the fetch.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._wake.wait()

    async def _open_claims(self) -> AsyncClaims | None:
        """The fetcher's own connection (see :meth:`~.core.WorkerCore._claims_at`)."""
        at = self._claims_at()
        if at is None:
            return None
        try:
            return AsyncClaims(await self._store.driver.open(*at), self._store.driver)
        except Exception as exc:
            self._event("fetch_error", error=error_of(exc)["message"])
            return None

    async def _run_claim(self, claims: AsyncClaims | None, free: int) -> list[Job]:
        if claims is None:
            jobs: list[Job] = await self._store._run(self._claim(free))
            return jobs
        return await claims.run(self._fetch_plan(free))

    async def _fetch_loop(self) -> None:
        claims = await self._open_claims()
        try:
            await self._fetch_until_stopped(claims)
        finally:
            if claims is not None:
                await claims.close()

    async def _fetch_until_stopped(self, claims: AsyncClaims | None) -> None:
        opts = self.options
        failures = 0
        while not self._stopping.is_set():
            woken = stages.now_ns()
            free = self._free()
            if free <= 0:
                await self._nap(opts.poll_interval)
                self._wake.clear()
                continue
            self._wake.clear()
            try:
                with self._timed("fetch"):
                    claiming = stages.now_ns()
                    jobs = await self._run_claim(claims, free)
                    self._stamp(woken, claiming, jobs)
            except Exception as exc:
                self._event("fetch_error", error=error_of(exc)["message"])
                # A dead connection is replaced by the next claim: soon, not at the next poll.
                pause = jittered(failures, RECONNECT_FIRST, opts.poll_interval)
                failures += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), pause)
                continue
            failures = 0
            drained = self._drained(free, jobs)
            jobs, refused = self._refused(jobs)
            if refused:
                await self._fail_refused(refused)
            for call in self._calls(jobs):
                ctx = self._begin(call, self._stopping.is_set())
                self._idle.clear()
                task = self._loop.create_task(self._call(ctx))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            if drained and not refused:
                await self._nap(opts.poll_interval)

    async def _fail_refused(self, jobs: list[Job]) -> None:
        try:
            await self._store.fail(self.queue, jobs, self._refusal())
        except Exception as exc:
            self._event("settle_error", error=error_of(exc)["message"])
            return
        self._report([(job, self._refusal()) for job in jobs])

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
                ctx = self._follow(ctx, more, self._stopping.is_set())
        finally:
            if self._end(ctx):
                self._idle.set()
            self._wake.set()

    async def _invoke(self, ctx: AsyncJobContext) -> Any:
        with self._measured():
            result = self._handler(*self._arguments(ctx))
            return await result if inspect.isawaitable(result) else result

    async def _call_plain(self, ctx: AsyncJobContext) -> list[Job]:
        """Run the handler and settle; the next jobs this slot claimed meanwhile, if any."""
        try:
            outcome = self._settlement(ctx, await self._invoke(ctx))
        except Exception as exc:
            outcome = self._settlement(ctx, error=exc)
        if self._late(ctx):
            return []
        chains = self._chains(outcome, self._stopping.is_set())

        async def run() -> list[Job]:
            nonlocal chains
            if chains:
                # A retry settles without claiming: a lost handoff may have claimed already.
                chains = False
                assert outcome.whole is not None
                with self._timed("complete_and_fetch"):
                    handoff = await self._store.complete_and_fetch(
                        self.queue,
                        ctx.jobs,
                        outcome.whole[0],
                        batch_size=self._handoff_size(),
                        group_concurrency=self.options.group_concurrency,
                    )
                return handoff.jobs
            with self._timed("settle"):
                for plan in outcome.plans:
                    await self._store._run(plan)
            return []

        try:
            more = await self._retrying("settle", ctx.jobs, run)
        except Exception as exc:
            self._settle_failed("settle", ctx.jobs, exc)
            return []
        self._report(outcome.failed)
        return more

    async def _retrying(self, what: str, jobs: list[Job], run: Callable[[], Awaitable[T]]) -> T:
        """``await run()``, run again after a connection fault (:meth:`_settle_retry`)."""
        began = 0.0
        attempt = 0
        while True:
            try:
                return await run()
            except Exception as exc:
                began = began or time.monotonic()
                pause = self._settle_retry(what, jobs, exc, attempt, began)
                if pause is None:
                    raise
            attempt += 1
            await asyncio.sleep(pause)

    async def _call_in_transaction(self, ctx: AsyncJobContext) -> None:
        attempt = 0
        while True:
            try:
                outcome = await self._run_transaction(ctx)
                break
            except JobLost as exc:
                self._event("settle_error", error=str(exc))
                return
            except Exception as exc:
                ctx.connection = None
                pause = self._retry_pause(exc, attempt)
                if pause is None:
                    await self._fail_call(ctx, exc)
                    return
                attempt += 1
                await asyncio.sleep(pause)
        self._report(outcome.failed)

    async def _run_transaction(self, ctx: AsyncJobContext) -> Settlement:
        """The handler and its jobs' settlement in one transaction; the settlement."""
        store = self._store
        async with store._source.session() as session:
            async with session.transaction(self._engine.isolation):
                ctx.connection = native_connection(session)
                outcome = self._settlement(ctx, await self._invoke(ctx))
                done = [await run_in_session_async(session, store.driver, p) for p in outcome.plans]
                self._check_settled(outcome, done)
            ctx.connection = None
        return outcome

    async def _fail_call(self, ctx: AsyncJobContext, exc: Exception) -> None:
        """Record ``exc`` as the failure of the call's jobs, outside the rolled-back
        transaction."""
        outcome = self._settlement(ctx, error=exc)
        if self._late(ctx):
            return

        async def run() -> None:
            for plan in outcome.plans:
                await self._store._run(plan)

        try:
            await self._retrying("fail", ctx.jobs, run)
        except Exception as again:
            self._settle_failed("fail", ctx.jobs, again)
            return
        self._report(outcome.failed)

    async def _touch(self, jobs: list[Job]) -> bool:
        run = functools.partial(self._store._run, self._touch_plan(jobs))
        alive = await self._retrying("heartbeat", jobs, run)
        return any(job.id in alive for job in jobs)

    async def _watch_loop(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), self._watch_interval())
                return
            calls, plan = self._watched()
            if plan is None:
                continue
            jobs = [job for ctx in calls for job in ctx.jobs]
            try:
                with self._timed("watch"):
                    run = functools.partial(self._store._run, plan)
                    alive = await self._retrying("heartbeat", jobs, run)
            except Exception as exc:
                self._event("watch_error", error=error_of(exc)["message"])
                continue
            self._cancel_lost(calls, alive)

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
        self._cancel_running()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._idle.wait(), max(0.0, deadline - self._loop.time()))
        left = self._left()
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
