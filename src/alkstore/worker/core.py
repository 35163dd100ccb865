"""What the thread shell (:mod:`.threads`) and the task shell (:mod:`.tasks`) share: the
bookkeeping of running handler calls and every decision about them. The shells only wait
(threads and events, or tasks and asyncio events) and run what is decided here.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, Protocol, TypeVar

import attrs

from ..core.contracts import worker_runtime
from ..core.plans import Plan, serialization_retry
from ..core.records import Job
from ..core.targets import targets
from ..drivers.base import DriverSettings
from . import stages
from .backoff import SETTLE_BUDGET, settle_pause
from .events import WorkerEvent, emit, timed
from .metrics import QueueMetrics
from .options import WorkOptions
from .settle import JobLost, Settlement, job_key, settle, wants_context


class Context(Protocol):
    """A handler call's context (:class:`~.context.JobContext` or its async twin)."""

    jobs: list[Job]

    @property
    def cancelled(self) -> Any:
        """An event with ``set()``."""


C = TypeVar("C", bound=Context)


class WorkerCore(Generic[C]):
    """The state of a worker and the decisions both shells make the same way."""

    def __init__(
        self,
        store: Any,
        queue: str,
        handler: Callable[..., Any],
        options: WorkOptions,
        context: Callable[[list[Job]], C],
    ) -> None:
        self.queue = queue
        self.options = options
        self._store = store
        self._engine = worker_runtime(store.engine)
        self._handler = handler
        self._with_context = wants_context(handler)
        self._context = context
        # A plain lock: every section under it is short and never waits (the task shell
        # takes it too, and wake-ups of async workers arrive from the listener's thread).
        self._lock = threading.Lock()
        self._running: dict[uuid.UUID, C] = {}
        self._released: set[uuid.UUID] = set()
        self.settle_retries = 0
        """Settles (complete, fail, heartbeat) this worker ran again after a connection
        fault (each also reported as a ``settle_retry`` event)."""
        self._metrics = QueueMetrics.of(queue)

    # -- events ----------------------------------------------------------------------------

    def _event(self, kind: str, **detail: Any) -> None:
        self._metrics.event(kind)
        emit(self.options.on_event, WorkerEvent(kind, self.queue, detail))

    @contextlib.contextmanager
    def _measured(self) -> Iterator[None]:
        """Around a handler call: the worker metrics' in-flight gauge and duration."""
        self._metrics.started()
        began = time.perf_counter()
        try:
            yield
        finally:
            self._metrics.finished(time.perf_counter() - began)

    def _timed(self, operation: str) -> Any:
        opts = self.options
        return timed(opts.on_event, self.queue, operation, opts.slow_query_seconds)

    def _report(self, failed: list[tuple[Job, dict[str, str]]]) -> None:
        for job, stored in failed:
            self._event(
                "handler_failed",
                job=str(job.id),
                error=stored["message"],
                stack=stored.get("stack", ""),
            )

    # -- fetching --------------------------------------------------------------------------

    def _free(self) -> int:
        with self._lock:
            return self.options.concurrency - len(self._running)

    def _wanted(self, free: int) -> int:
        """How many jobs the fetch of an idle worker asks for: a batch, or one per free
        handler."""
        return self.options.batch_size if self.options.batch else free

    def _fetch_plan(self, free: int) -> Plan[list[Job]]:
        """The fetch of an idle worker (:meth:`_wanted` jobs)."""
        opts = self.options
        plan: Plan[list[Job]] = self._store._ops.fetch(
            self.queue, self._wanted(free), opts.group_concurrency
        )
        return plan

    def _drained(self, free: int, claimed: list[Job]) -> bool:
        """The fetch got fewer jobs than it asked for: the queue had no more to give, so the
        fetcher waits for a wake-up (one that arrived during the fetch is kept) or its poll
        interval instead of claiming again at once, which would send a query that finds
        nothing while the handlers it just started want the CPU."""
        return len(claimed) < self._wanted(free)

    def _claim(self, free: int) -> Plan[list[Job]]:
        """:meth:`_fetch_plan` on the store's connections: committed without waiting for
        its WAL flush unless ``durable_claims`` (a transaction that sets it locally)."""
        plan = self._fetch_plan(free)
        return plan if self.options.durable_claims else self._engine.unflushed(plan)

    def _claims_at(self) -> tuple[str, DriverSettings] | None:
        """Where the fetcher claims on a connection of its own whose session commits without
        waiting for the WAL flush, or None (claims go through the store with :meth:`_claim`).

        One round trip per claim instead of four (``BEGIN``, ``SET LOCAL``, the claim,
        ``COMMIT``): on the wake-up path every round trip is a scheduling delay of client
        and server. Used where the engine has ``asynchronous_commit`` and the store has a
        session of its own to open (the LISTEN target: not behind a transaction pooler, not
        on a caller's connection), without ``durable_claims`` or an emulation guard. A later
        durable commit on any session flushes the WAL up to its own record, so a completion
        still cannot outlive its claim in a crash."""
        store = self._store
        engine = store.engine
        caps = engine.capabilities
        if self.options.durable_claims or engine.emulated or caps.single_connection:
            return None
        target: tuple[str, DriverSettings] | None = store._listen_at
        if not caps.asynchronous_commit or target is None:
            return None
        dsn, settings = target
        unflushed_session = (*settings.server_settings, ("synchronous_commit", "off"))
        return dsn, attrs.evolve(settings, pool_size=1, server_settings=unflushed_session)

    def _stamp(self, woken: int, claiming: int, jobs: list[Job]) -> None:
        """Tell the bench's stage probe (:mod:`.stages`, when on) about a claim."""
        probe = stages.PROBE
        if probe is not None and jobs:
            probe.claimed(self.queue, woken, claiming, [job.id for job in jobs])

    def _refused(self, jobs: list[Job]) -> tuple[list[Job], list[Job]]:
        """The fetched jobs this worker may run, and those it must fail instead: a job that
        sets its own ``heartbeat_seconds``, on a transactional worker whose engine lacks
        ``transactional_heartbeat`` (work() refuses such a queue up front; a job-level
        heartbeat is only seen here, and its heartbeat would abort the handler's
        transaction)."""
        caps = self._store.engine.capabilities
        if not self.options.transactional or caps.transactional_heartbeat:
            return jobs, []
        return (
            [job for job in jobs if not job.heartbeat_seconds],
            [job for job in jobs if job.heartbeat_seconds],
        )

    def _refusal(self) -> dict[str, str]:
        """The stored error of a refused job."""
        engine = self._store.engine.name
        return {
            "name": "InvalidOptions",
            "message": f"heartbeat_seconds: a transactional worker cannot heartbeat this job "
            f"(engine {engine!r} lacks transactional_heartbeat)",
            "stack": "",
        }

    def _calls(self, jobs: list[Job]) -> list[list[Job]]:
        """The handler calls of fetched jobs: one with them all, or one per job (none for
        no jobs)."""
        if self.options.batch:
            return [jobs] if jobs else []
        return [[job] for job in jobs]

    def _begin(self, jobs: list[Job], stopping: bool) -> C:
        """Record a starting handler call (told to stop at once when the worker is)."""
        ctx = self._context(jobs)
        if stopping:
            ctx.cancelled.set()
        with self._lock:
            self._running[job_key(jobs)] = ctx
        return ctx

    def _follow(self, ctx: C, more: list[Job], stopping: bool) -> C:
        """The slot that ran ``ctx`` goes on with the jobs it claimed meanwhile."""
        with self._lock:
            self._running.pop(job_key(ctx.jobs), None)
        return self._begin(more, stopping)

    def _end(self, ctx: C) -> bool:
        """Forget a finished call; True when no call is left running."""
        with self._lock:
            self._running.pop(job_key(ctx.jobs), None)
            return not self._running

    # -- settling --------------------------------------------------------------------------

    def _arguments(self, ctx: C) -> tuple[Any, ...]:
        """What the handler is called with."""
        arg: Any = ctx.jobs if self.options.batch else ctx.jobs[0]
        return (arg, ctx) if self._with_context else (arg,)

    def _settlement(self, ctx: C, result: Any = None, error: Exception | None = None) -> Settlement:
        """How the handler's result (or ``error``) settles the call's jobs; raises what a
        result that cannot be stored raises, which fails the call like the handler's own."""
        ops = self._store._ops
        if error is not None:
            return settle(ops, self.queue, ctx.jobs, batch=False, error=error)
        return settle(ops, self.queue, ctx.jobs, batch=self.options.batch, result=result)

    def _check_settled(self, outcome: Settlement, done: list[int]) -> None:
        """Inside a transactional worker's transaction: raise :class:`JobLost` (rolling it
        back) when the settlement's plans changed fewer jobs than they had to."""
        if sum(done) < outcome.completions + len(outcome.failed):
            raise JobLost(f"jobs of {self.queue!r} were settled elsewhere")

    def _retry_pause(self, exc: Exception, attempt: int) -> float | None:
        """Seconds to wait before running a transactional call again after its transaction
        (run ``attempt``, 0-based) failed with ``exc``; None when the failure stands.

        A serialization failure aborted the whole transaction — the handler's writes and the
        completion — and says nothing about the job: the call runs again from the start, as
        the store's own transactions do, before it counts as the job's failure
        (docs/workers.md, "Transactional workers")."""
        info = self._store.driver.error_info(exc)
        return None if info is None else serialization_retry(info.sqlstate, attempt)

    def _settle_retry(
        self, what: str, jobs: list[Job], exc: Exception, attempt: int, began: float
    ) -> float | None:
        """Seconds to wait before running the settle ``what`` of ``jobs`` again after its
        run ``attempt`` (0-based; the first failed at ``began``) failed with ``exc``; None when
        the failure stands: no connection fault, or the retries are spent (their time is
        bounded well inside the jobs' expiry, :mod:`.backoff`)."""
        pause = settle_pause(exc, attempt)
        budget = min([SETTLE_BUDGET] + [job.expire_seconds / 4 for job in jobs])
        if pause is None or time.monotonic() - began + pause > budget:
            return None
        with self._lock:
            self.settle_retries += 1
        self._event(
            "settle_retry",
            operation=what,
            attempt=attempt + 1,
            jobs=[str(job.id) for job in jobs],
            error=str(exc),
        )
        return pause

    def _settle_failed(self, what: str, jobs: list[Job], exc: BaseException) -> None:
        """A settle failed for good: its jobs stay active until they expire and run again."""
        self._event(
            "settle_error",
            operation=what,
            jobs=[str(job.id) for job in jobs],
            error=str(exc),
            outcome="not settled: the jobs run again once expire_seconds pass",
        )

    def _chains(self, outcome: Settlement, stopping: bool) -> bool:
        """Settle with ``complete_and_fetch`` (the slot claims its next jobs in the same
        statement): every job completes with one output and the worker is not stopping."""
        return outcome.whole is not None and not stopping

    def _handoff_size(self) -> int:
        return self.options.batch_size if self.options.batch else 1

    # -- watching and stopping -------------------------------------------------------------

    def _watch_interval(self) -> float:
        with self._lock:
            beats = [
                j.heartbeat_seconds
                for ctx in self._running.values()
                for j in ctx.jobs
                if j.heartbeat_seconds
            ]
        return min([self.options.watch_interval] + [b / 3 for b in beats])

    def _watched(self) -> tuple[list[C], Plan[set[uuid.UUID]] | None]:
        """The running calls and the plan that heartbeats them (None when none runs)."""
        with self._lock:
            calls = list(self._running.values())
        if not calls:
            return calls, None
        jobs = [job for ctx in calls for job in ctx.jobs]
        return calls, self._engine.watch(self.queue, targets(jobs))

    @staticmethod
    def _cancel_lost(calls: Iterable[C], alive: set[uuid.UUID]) -> None:
        """Tell the handlers whose jobs were cancelled, expired or lost elsewhere."""
        for ctx in calls:
            if not any(job.id in alive for job in ctx.jobs):
                ctx.cancelled.set()

    def _touch_plan(self, jobs: list[Job]) -> Plan[set[uuid.UUID]]:
        return self._engine.watch(self.queue, targets(jobs))

    def _cancel_running(self) -> None:
        with self._lock:
            for ctx in self._running.values():
                ctx.cancelled.set()

    def _left(self) -> list[Job]:
        """The jobs of the calls still running (failed by a stop that timed out), from now
        on released: see :meth:`_late`."""
        with self._lock:
            left = [job for ctx in self._running.values() for job in ctx.jobs]
            self._released.update(job.id for job in left)
        return left

    def _late(self, ctx: C) -> bool:
        """Whether the call outlived ``stop(timeout)``, which failed its jobs as
        ``WorkerStopped``: its result is dropped (a settle would be fenced anyway, and its
        store may be closed), reported once as a ``late_return`` event."""
        with self._lock:
            late = any(job.id in self._released for job in ctx.jobs)
        if late:
            self._event("late_return", jobs=[str(job.id) for job in ctx.jobs])
        return late

    @property
    def running(self) -> int:
        """Handler calls in progress."""
        with self._lock:
            return len(self._running)


__all__ = ["WorkerCore"]
