"""The thread shell of a worker, for :class:`~alkstore.Store`.

One fetcher thread claims jobs only for free handler threads (so no claimed job waits in a
buffer while its expiry clock runs), a pool of ``concurrency`` threads runs the handler and
settles each job, and a watch thread heartbeats running jobs and tells their handlers when a
job was cancelled or expired elsewhere. Every decision is :class:`~.core.WorkerCore`'s.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, TypeVar

from ..core.records import Job
from ..runner import run_in_session
from . import stages
from .backoff import RECONNECT_FIRST, jittered
from .claims import Claims
from .context import JobContext
from .core import WorkerCore
from .options import WorkOptions
from .settle import STOPPED, JobLost, Settlement, error_of, native_connection

if TYPE_CHECKING:
    from .faces import SyncFace

T = TypeVar("T")


class Worker(WorkerCore[JobContext]):
    """A running worker: what ``Store.work()`` returns. Stop it with :meth:`stop` or a
    ``with`` block; it also stops when its store closes."""

    def __init__(
        self, store: SyncFace, queue: str, handler: Callable[..., Any], options: WorkOptions
    ) -> None:
        super().__init__(store, queue, handler, options, lambda jobs: JobContext(jobs, self._touch))
        self._store: SyncFace = store
        self._idle = threading.Event()
        self._idle.set()
        self._stopping = threading.Event()
        self._stopped = threading.Event()
        self._wake = threading.Event()
        self._pool = ThreadPoolExecutor(options.concurrency, f"alkstore-{queue}")
        self._threads = [
            threading.Thread(target=self._fetch_loop, name=f"alkstore-fetch-{queue}", daemon=True),
            threading.Thread(target=self._watch_loop, name=f"alkstore-watch-{queue}", daemon=True),
        ]
        store._runtime.attach(self)
        for thread in self._threads:
            thread.start()

    # -- the loops -------------------------------------------------------------------------

    def wake(self) -> None:
        """Fetch now (called by wake-ups: a send, a notification)."""
        self._wake.set()

    def _open_claims(self) -> Claims | None:
        """The fetcher's own connection (see :meth:`~.core.WorkerCore._claims_at`)."""
        at = self._claims_at()
        if at is None:
            return None
        try:
            return Claims(self._store.driver.open(*at), self._store.driver)
        except Exception as exc:
            self._event("fetch_error", error=error_of(exc)["message"])
            return None

    def _run_claim(self, claims: Claims | None, free: int) -> list[Job]:
        if claims is None:
            jobs: list[Job] = self._store._run(self._claim(free))
            return jobs
        return claims.run(self._fetch_plan(free))

    def _fetch_loop(self) -> None:
        claims = self._open_claims()
        try:
            self._fetch_until_stopped(claims)
        finally:
            if claims is not None:
                claims.close()

    def _fetch_until_stopped(self, claims: Claims | None) -> None:
        opts = self.options
        failures = 0
        while not self._stopping.is_set():
            woken = stages.now_ns()
            free = self._free()
            if free <= 0:
                self._wake.wait(opts.poll_interval)
                self._wake.clear()
                continue
            # Cleared before the fetch: a wake-up that arrives during it is kept.
            self._wake.clear()
            try:
                with self._timed("fetch"):
                    claiming = stages.now_ns()
                    jobs = self._run_claim(claims, free)
                    self._stamp(woken, claiming, jobs)
            except Exception as exc:
                self._event("fetch_error", error=error_of(exc)["message"])
                # A dead connection is replaced by the next claim: soon, not at the next poll.
                self._stopping.wait(jittered(failures, RECONNECT_FIRST, opts.poll_interval))
                failures += 1
                continue
            failures = 0
            drained = self._drained(free, jobs)
            jobs, refused = self._refused(jobs)
            if refused:
                self._fail_refused(refused)
            for call in self._calls(jobs):
                ctx = self._begin(call, self._stopping.is_set())
                self._idle.clear()
                self._pool.submit(self._call, ctx)
            if drained and not refused:
                self._wake.wait(opts.poll_interval)

    def _fail_refused(self, jobs: list[Job]) -> None:
        try:
            self._store.fail(self.queue, jobs, self._refusal())
        except Exception as exc:
            self._event("settle_error", error=error_of(exc)["message"])
            return
        self._report([(job, self._refusal()) for job in jobs])

    def _call(self, ctx: JobContext) -> None:
        # A handler slot that completes its jobs also claims its next ones in the same
        # statement (complete_and_fetch) and runs them at once, as long as there are any.
        try:
            while True:
                if self.options.transactional:
                    self._call_in_transaction(ctx)
                    break
                more = self._call_plain(ctx)
                if not more:
                    break
                ctx = self._follow(ctx, more, self._stopping.is_set())
        finally:
            if self._end(ctx):
                self._idle.set()
            self._wake.set()

    def _call_plain(self, ctx: JobContext) -> list[Job]:
        """Run the handler and settle; the next jobs this slot claimed meanwhile, if any."""
        try:
            with self._measured():
                result = self._handler(*self._arguments(ctx))
            outcome = self._settlement(ctx, result)
        except Exception as exc:
            outcome = self._settlement(ctx, error=exc)
        if self._late(ctx):
            return []
        chains = self._chains(outcome, self._stopping.is_set())

        def run() -> list[Job]:
            nonlocal chains
            if chains:
                # A retry settles without claiming: a lost handoff may have claimed already.
                chains = False
                assert outcome.whole is not None
                with self._timed("complete_and_fetch"):
                    return self._store.complete_and_fetch(
                        self.queue,
                        ctx.jobs,
                        outcome.whole[0],
                        batch_size=self._handoff_size(),
                        group_concurrency=self.options.group_concurrency,
                    ).jobs
            with self._timed("settle"):
                for plan in outcome.plans:
                    self._store._run(plan)
            return []

        try:
            more = self._retrying("settle", ctx.jobs, run)
        except Exception as exc:
            self._settle_failed("settle", ctx.jobs, exc)
            return []
        self._report(outcome.failed)
        return more

    def _retrying(self, what: str, jobs: list[Job], run: Callable[[], T]) -> T:
        """``run()``, run again after a connection fault (:meth:`_settle_retry`)."""
        began = 0.0
        attempt = 0
        while True:
            try:
                return run()
            except Exception as exc:
                began = began or time.monotonic()
                pause = self._settle_retry(what, jobs, exc, attempt, began)
                if pause is None:
                    raise
            attempt += 1
            time.sleep(pause)

    def _call_in_transaction(self, ctx: JobContext) -> None:
        attempt = 0
        while True:
            try:
                outcome = self._run_transaction(ctx)
                break
            except JobLost as exc:
                self._event("settle_error", error=str(exc))
                return
            except Exception as exc:
                ctx.connection = None
                pause = self._retry_pause(exc, attempt)
                if pause is None:
                    # The handler's writes rolled back with the transaction; the failure is
                    # recorded on its own.
                    self._fail_call(ctx, exc)
                    return
                attempt += 1
                time.sleep(pause)
        self._report(outcome.failed)

    def _run_transaction(self, ctx: JobContext) -> Settlement:
        """The handler and its jobs' settlement in one transaction; the settlement."""
        store = self._store
        with store._source.session() as session:
            with session.transaction(self._engine.isolation):
                ctx.connection = native_connection(session)
                with self._measured():
                    result = self._handler(*self._arguments(ctx))
                outcome = self._settlement(ctx, result)
                done = [run_in_session(session, store.driver, p) for p in outcome.plans]
                self._check_settled(outcome, done)
            ctx.connection = None
        return outcome

    def _fail_call(self, ctx: JobContext, exc: Exception) -> None:
        """Record ``exc`` as the failure of the call's jobs, outside the rolled-back
        transaction."""
        outcome = self._settlement(ctx, error=exc)
        if self._late(ctx):
            return

        def run() -> None:
            for plan in outcome.plans:
                self._store._run(plan)

        try:
            self._retrying("fail", ctx.jobs, run)
        except Exception as again:
            self._settle_failed("fail", ctx.jobs, again)
            return
        self._report(outcome.failed)

    def _touch(self, jobs: list[Job]) -> bool:
        plan = self._touch_plan(jobs)
        alive = self._retrying("heartbeat", jobs, functools.partial(self._store._run, plan))
        return any(job.id in alive for job in jobs)

    def _watch_loop(self) -> None:
        while not self._stopped.wait(self._watch_interval()):
            calls, plan = self._watched()
            if plan is None:
                continue
            jobs = [job for ctx in calls for job in ctx.jobs]
            try:
                with self._timed("watch"):
                    run = functools.partial(self._store._run, plan)
                    alive = self._retrying("heartbeat", jobs, run)
            except Exception as exc:
                self._event("watch_error", error=error_of(exc)["message"])
                continue
            self._cancel_lost(calls, alive)

    # -- stopping --------------------------------------------------------------------------

    def stop(self, timeout: float = 30.0) -> None:
        """Stop fetching, tell running handlers (``ctx.cancelled``), wait up to ``timeout``
        seconds for them, then fail the jobs of those still running (so they retry at once
        instead of waiting for their expiry) and return."""
        if self._stopped.is_set():
            return
        deadline = time.monotonic() + timeout
        self._stopping.set()
        self._wake.set()
        self._threads[0].join(max(0.0, deadline - time.monotonic()))
        self._cancel_running()
        self._idle.wait(max(0.0, deadline - time.monotonic()))
        left = self._left()
        if left:
            try:
                self._store.fail(self.queue, left, STOPPED)
            finally:
                self._event("stopped", jobs=[str(job.id) for job in left])
        self._stopped.set()
        self._threads[1].join(max(0.0, deadline - time.monotonic()))
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._store._runtime.detach(self)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
