"""The thread shell of a worker, for :class:`~alkstore.Store`.

One fetcher thread claims jobs only for free handler threads (so no claimed job waits in a
buffer while its expiry clock runs), a pool of ``concurrency`` threads runs the handler and
settles each job, and a watch thread heartbeats running jobs and tells their handlers when a
job was cancelled or expired elsewhere.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from ..core.records import Job
from ..core.targets import targets
from ..engines.postgres.runtime import runtime_engine, watch
from ..runner import run_in_session
from .context import JobContext
from .events import WorkerEvent, emit, timed
from .options import WorkOptions
from .settle import STOPPED, JobLost, error_of, job_key, native_connection, settle, wants_context

if TYPE_CHECKING:
    from ..store import Store


class Worker:
    """A running worker: what ``Store.work()`` returns. Stop it with :meth:`stop` or a
    ``with`` block; it also stops when its store closes."""

    def __init__(
        self, store: Store, queue: str, handler: Callable[..., Any], options: WorkOptions
    ) -> None:
        self.queue = queue
        self.options = options
        self._store = store
        self._engine = runtime_engine(store.engine)
        self._handler = handler
        self._with_context = wants_context(handler)
        self._lock = threading.Lock()
        self._running: dict[uuid.UUID, JobContext] = {}
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

    def _event(self, kind: str, **detail: Any) -> None:
        emit(self.options.on_event, WorkerEvent(kind, self.queue, detail))

    def _timed(self, operation: str) -> Any:
        opts = self.options
        return timed(opts.on_event, self.queue, operation, opts.slow_query_seconds)

    def _free(self) -> int:
        with self._lock:
            return self.options.concurrency - len(self._running)

    def _fetch_loop(self) -> None:
        opts = self.options
        while not self._stopping.is_set():
            free = self._free()
            if free <= 0:
                self._wake.wait(opts.poll_interval)
                self._wake.clear()
                continue
            # Cleared before the fetch: a wake-up that arrives during it is kept.
            self._wake.clear()
            try:
                size = opts.batch_size if opts.batch else free
                with self._timed("fetch"):
                    jobs = self._store.fetch(self.queue, batch_size=size)
            except Exception as exc:
                self._event("fetch_error", error=error_of(exc)["message"])
                self._stopping.wait(opts.poll_interval)
                continue
            if not jobs:
                self._wake.wait(opts.poll_interval)
                continue
            for call in [jobs] if opts.batch else [[job] for job in jobs]:
                self._start(call)

    def _start(self, jobs: list[Job]) -> None:
        ctx = JobContext(jobs, self._touch)
        if self._stopping.is_set():
            ctx.cancelled.set()
        with self._lock:
            self._running[job_key(jobs)] = ctx
            self._idle.clear()
        self._pool.submit(self._call, ctx)

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
                follow = JobContext(more, self._touch)
                with self._lock:
                    self._running.pop(job_key(ctx.jobs), None)
                    self._running[job_key(more)] = follow
                    if self._stopping.is_set():
                        follow.cancelled.set()
                ctx = follow
        finally:
            with self._lock:
                self._running.pop(job_key(ctx.jobs), None)
                if not self._running:
                    self._idle.set()
            self._wake.set()

    def _invoke(self, ctx: JobContext) -> Any:
        arg: Any = ctx.jobs if self.options.batch else ctx.job
        return self._handler(arg, ctx) if self._with_context else self._handler(arg)

    def _call_plain(self, ctx: JobContext) -> list[Job]:
        """Run the handler and settle; the next jobs this slot claimed meanwhile, if any."""
        try:
            outcome = settle(
                self._store._ops,
                self.queue,
                ctx.jobs,
                batch=self.options.batch,
                result=self._invoke(ctx),
            )
        except Exception as exc:
            outcome = settle(self._store._ops, self.queue, ctx.jobs, batch=False, error=exc)
        try:
            if outcome.whole is not None and not self._stopping.is_set():
                size = self.options.batch_size if self.options.batch else 1
                with self._timed("complete_and_fetch"):
                    return self._store.complete_and_fetch(
                        self.queue, ctx.jobs, outcome.whole[0], batch_size=size
                    ).jobs
            with self._timed("settle"):
                for plan in outcome.plans:
                    self._store._run(plan)
        except Exception as exc:
            self._event("settle_error", error=error_of(exc)["message"])
            return []
        self._report(outcome.failed)
        return []

    def _call_in_transaction(self, ctx: JobContext) -> None:
        store = self._store
        try:
            with store._source.session() as session:
                with session.transaction(self._engine.isolation):
                    ctx.connection = native_connection(session)
                    outcome = settle(
                        store._ops,
                        self.queue,
                        ctx.jobs,
                        batch=self.options.batch,
                        result=self._invoke(ctx),
                    )
                    done = [run_in_session(session, store.driver, p) for p in outcome.plans]
                    if sum(done) < outcome.completions + len(outcome.failed):
                        raise JobLost(f"jobs of {self.queue!r} were settled elsewhere")
                ctx.connection = None
        except JobLost as exc:
            self._event("settle_error", error=str(exc))
            return
        except Exception as exc:
            ctx.connection = None
            # The handler's writes rolled back with the transaction; the failure is recorded
            # on its own.
            outcome = settle(store._ops, self.queue, ctx.jobs, batch=False, error=exc)
            try:
                for plan in outcome.plans:
                    store._run(plan)
            except Exception as again:
                self._event("settle_error", error=error_of(again)["message"])
                return
        self._report(outcome.failed)

    def _report(self, failed: list[tuple[Job, dict[str, str]]]) -> None:
        for job, stored in failed:
            self._event("handler_failed", job=str(job.id), error=stored["message"])

    def _touch(self, jobs: list[Job]) -> bool:
        alive = self._store._run(watch(self._engine, self.queue, targets(jobs)))
        return any(job.id in alive for job in jobs)

    def _watch_interval(self) -> float:
        with self._lock:
            beats = [
                j.heartbeat_seconds
                for ctx in self._running.values()
                for j in ctx.jobs
                if j.heartbeat_seconds
            ]
        return min([self.options.watch_interval] + [b / 3 for b in beats])

    def _watch_loop(self) -> None:
        while not self._stopped.wait(self._watch_interval()):
            with self._lock:
                calls = list(self._running.values())
            if not calls:
                continue
            jobs = [job for ctx in calls for job in ctx.jobs]
            try:
                with self._timed("watch"):
                    alive = self._store._run(watch(self._engine, self.queue, targets(jobs)))
            except Exception as exc:
                self._event("watch_error", error=error_of(exc)["message"])
                continue
            for ctx in calls:
                if not any(job.id in alive for job in ctx.jobs):
                    ctx.cancelled.set()

    # -- stopping --------------------------------------------------------------------------

    @property
    def running(self) -> int:
        """Handler calls in progress."""
        with self._lock:
            return len(self._running)

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
        with self._lock:
            for ctx in self._running.values():
                ctx.cancelled.set()
        self._idle.wait(max(0.0, deadline - time.monotonic()))
        with self._lock:
            left = [job for ctx in self._running.values() for job in ctx.jobs]
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
