"""The two faces, :class:`Store` (sync) and :class:`AsyncStore`, and how to open them.

Each method of a face is one line: build the plan with :class:`~.operations.Operations`, run
it with the face's runner. The faces carry the user documentation; the async face's methods
are the same operations as coroutines.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import sys
import threading
import uuid
from collections.abc import Callable, Coroutine, Generator, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any, Literal, Self, Unpack, overload

import attrs

from .core.contracts import Engine
from .core.counters import Counters
from .core.description import ServerInfo
from .core.errors import InvalidOptions, QueueExists, StatementTimeout
from .core.kwargs import ConnectKwargs, JobOptionsKwargs, QueueOptionsKwargs
from .core.options import GroupLimit
from .core.queries import JobPage, JobSearch
from .core.records import Handoff, Job, MaintenanceReport, Queue, QueueStats, WorkerProcess
from .core.schedules import Schedule
from .core.states import JobState
from .core.targets import IdLike
from .core.validation import int_at_least, optional_seconds, schema_name
from .counting import Counting
from .drivers import async_driver, scheme_driver, sync_driver
from .drivers.base import (
    AsyncDriver,
    AsyncSource,
    DriverSettings,
    DriverSpec,
    InProcessSource,
    SyncDriver,
    SyncSource,
)
from .drivers.common import resolve_timeouts
from .engines import engine_class
from .engines.detect import detect_plan
from .messaging import Messaging
from .operations import Operations
from .runner import run_async, run_sync
from .target import AUTO, Target, build_engine, resolve_target
from .waiting import AsyncResultListener, ResultListener, listen_at, wait_async, wait_sync
from .worker import AsyncWorker, Worker, start, start_async
from .worker.handlers import AsyncBatchHandler, AsyncHandler, BatchHandler, Handler
from .worker.options import WorkKwargs
from .worker.runtime import AsyncStoreRuntime, StoreRuntime

Ids = IdLike | Iterable[IdLike]


class Store:
    """A sync handle on one schema through one engine and one driver. Thread-safe."""

    def __init__(
        self,
        engine: Engine,
        driver: SyncDriver,
        source: SyncSource,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.engine = engine
        self.driver = driver
        self._source = source
        self._ops = Operations(engine)
        self._on_close = on_close
        self._serial: dict[str, threading.Lock] = {}

    def _run(self, plan: Any) -> Any:
        if plan.serial is None:
            return run_sync(self._source, self.driver, plan)
        # Plan.serial: one at a time per key (setdefault is atomic: one lock per key).
        with self._serial.setdefault(plan.serial, threading.Lock()):
            return run_sync(self._source, self.driver, plan)

    def close(self) -> None:
        """Stop its workers, then close the connections this store opened (never a
        connection you passed in)."""
        try:
            if "_runtime" in self.__dict__:
                self._runtime.close()
            results = self.__dict__.get("_results")
            if results is not None:
                results.close()
            self._source.close()
        finally:
            if self._on_close is not None:
                self._on_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # schema
    def migrate(self) -> int:
        """Install or upgrade the schema (safe when many processes do it at once).

        Waiting for another process's migration ends at the lock timeout with
        :class:`~alkstore.MigrationLocked` naming the session that holds the lock."""
        try:
            return int([self._run(plan) for plan in self.engine.migrate()][-1])
        except StatementTimeout as exc:
            report = getattr(self.engine, "migration_lock_report", None)
            if report is None:
                raise
            raise self._run(report()) from exc

    def schema_version(self) -> int | None:
        """The schema version recorded in the database, None if not installed."""
        result: int | None = self._run(self.engine.schema_version())
        return result

    # queues
    def create_queue(
        self, name: str, *, exist_ok: bool = False, **options: Unpack[QueueOptionsKwargs]
    ) -> None:
        """Create a queue. Options: see :class:`~alkstore.core.options.QueueOptions`.

        A queue of that name raises :class:`~alkstore.QueueExists`; with ``exist_ok=True`` one
        with the same options (defaults included) is accepted quietly, and one with other
        options raises :class:`~alkstore.QueueOptionsDiffer` naming each that differs. The
        queue is read before the insert, so a caller's open transaction is not aborted by it.
        """
        if exist_ok and self._ops.queue_matches(name, options, self.get_queue(name)):
            return
        try:
            self._run(self._ops.create_queue(name, options))
        except QueueExists:
            # Created concurrently since the read: compare with what won.
            if not exist_ok or not self._ops.queue_matches(name, options, self.get_queue(name)):
                raise

    def update_queue(self, name: str, **changes: Unpack[QueueOptionsKwargs]) -> Queue:
        """Change a queue's settings (not ``policy`` or ``partition``); returns the queue."""
        result: Queue = self._run(self._ops.update_queue(name, changes))
        return result

    def delete_queue(self, name: str) -> None:
        """Delete a queue and every job in it."""
        self._run(self._ops.delete_queue(name))

    def get_queue(self, name: str) -> Queue | None:
        """The queue called ``name``, or None."""
        result: Queue | None = self._run(self._ops.get_queue(name))
        return result

    def queues(self) -> list[Queue]:
        """Every queue, by name."""
        result: list[Queue] = self._run(self._ops.queues())
        return result

    def queue_stats(self, name: str) -> QueueStats:
        """Counts per state and the wait of the oldest fetchable job."""
        result: QueueStats = self._run(self._ops.queue_stats(name))
        return result

    # jobs
    def send(
        self, queue: str, data: Any = None, **options: Unpack[JobOptionsKwargs]
    ) -> uuid.UUID | None:
        """Send one job; returns its id, or None when the queue's policy or the job's throttle
        refused it (docs/queues.md). Options: see :class:`~alkstore.core.options.JobOptions`."""
        result: uuid.UUID | None = self._run(self._ops.send(queue, data, options))
        self._wake(queue)
        return result

    def send_many(self, queue: str, jobs: Iterable[Mapping[str, Any]]) -> list[uuid.UUID | None]:
        """Send many jobs in one statement; each is ``{"data": ..., **options}``. Returns one
        entry per job, in order: its id, or None where a policy or throttle refused it."""
        result: list[uuid.UUID | None] = self._run(self._ops.send_many(queue, jobs))
        self._wake(queue)
        return result

    def fetch(
        self,
        queue: str,
        *,
        batch_size: int = 1,
        group_concurrency: int | Mapping[str, Any] | GroupLimit | None = None,
        ignore_start_after: bool = False,
        include_metadata: bool = False,
    ) -> list[Job]:
        """Claim up to ``batch_size`` jobs, in order priority DESC, created_on, id.

        ``group_concurrency`` (N, or ``{"default": N, "tiers": {"gold": M}}``) caps the active
        jobs of each ``group_id``; ``ignore_start_after`` also takes jobs not due yet
        (docs/queues.md). The jobs are lean (what a worker needs; reading a metadata field
        raises :class:`MetadataNotFetched`) unless ``include_metadata`` (docs/guide.md,
        "Lean jobs").
        """
        plan = self._ops.fetch(
            queue, batch_size, group_concurrency, ignore_start_after, include_metadata
        )
        result: list[Job] = self._run(plan)
        return result

    def pause_queue(self, name: str) -> None:
        """Stop handing out jobs of ``name`` (sends are still accepted) until resumed."""
        self._run(self._ops.set_paused(name, True))

    def resume_queue(self, name: str) -> None:
        """Hand out jobs of ``name`` again after :meth:`pause_queue`."""
        self._run(self._ops.set_paused(name, False))

    def complete(
        self, queue: str, ids: Ids, output: Any = None, *, include_queued: bool = False
    ) -> int:
        """Complete active jobs; a :class:`Job` is fenced to the attempt it was fetched in.
        With ``include_queued=True``, queued jobs (created, retry) are completed too."""
        return int(self._run(self._ops.complete(queue, ids, output, include_queued)))

    def complete_and_fetch(
        self,
        queue: str,
        ids: Ids,
        output: Any = None,
        *,
        batch_size: int = 1,
        group_concurrency: int | Mapping[str, Any] | GroupLimit | None = None,
        include_metadata: bool = False,
    ) -> Handoff:
        """Complete active jobs, then claim up to ``batch_size`` more: a worker's loop step.

        The same as :meth:`complete` followed by :meth:`fetch`, in one statement (one round
        trip and one commit) where the engine can change the job table twice in one
        statement and the claim needs no lock on the queue row (a ``concurrency_limit``,
        ``group_concurrency``, or a keyed policy on an engine without the lock-free keyed
        claim: docs/queues.md), else as those two calls. Returns ``(completed, jobs)``; the
        jobs are lean unless ``include_metadata``.
        """
        plans = self._ops.complete_and_fetch(
            queue, ids, output, batch_size, group_concurrency, include_metadata
        )
        return self._ops.handoff([self._run(plan) for plan in plans])

    def fail(self, queue: str, ids: Ids, error: Any = None) -> int:
        """Fail queued or active jobs: retry while retries remain, else failed (+ dead letter)."""
        return int(self._run(self._ops.fail(queue, ids, error)))

    def snooze(self, queue: str, ids: Ids, seconds: float | dt.timedelta) -> int:
        """Put active jobs back in the queue, due ``seconds`` from now (0 to 365 days),
        without spending an attempt: what ``raise alkstore.Snooze(seconds)`` does in a
        handler. Fenced like :meth:`complete`: a :class:`Job` snoozes only its own attempt.
        Each snooze raises ``retry_limit`` by one. See ``docs/workers.md``, "Snooze"."""
        return self._woke(queue, int(self._run(self._ops.snooze(queue, ids, seconds))))

    def wait(self, queue: str, job_id: IdLike, *, timeout: float) -> Job:
        """The job once it has finished (completed, failed for good or cancelled), with its
        output; :class:`~alkstore.WaitTimeout` (a ``TimeoutError``) after ``timeout``
        seconds, :class:`~alkstore.JobNotFound` when the queue has no such job. Woken by a
        notification where the engine has LISTEN/NOTIFY, else by reading the job again
        with a growing pause (docs/workers.md, "Waiting for a result")."""
        return wait_sync(self, self._results, queue, job_id, timeout)

    @functools.cached_property
    def _results(self) -> ResultListener | None:
        where = listen_at(self)
        return None if where is None else ResultListener(self, where)

    def cancel(self, queue: str, ids: Ids) -> int:
        """Cancel queued or active jobs."""
        return int(self._run(self._ops.cancel(queue, ids)))

    def resume(self, queue: str, ids: Ids) -> int:
        """Resume cancelled jobs."""
        return self._woke(queue, int(self._run(self._ops.resume(queue, ids))))

    def retry(self, queue: str, ids: Ids) -> int:
        """Give failed jobs one more attempt."""
        return self._woke(queue, int(self._run(self._ops.retry(queue, ids))))

    def delete_jobs(self, queue: str, ids: Ids) -> int:
        """Delete jobs in any state."""
        return int(self._run(self._ops.delete_jobs(queue, ids)))

    def worker_processes(self) -> list[WorkerProcess]:
        """The processes running workers on this schema, as their supervisors recorded
        themselves (every 10 s or so; a process that stopped its workers is gone, one that
        died drops out within 40 s), by owner (``host:pid:suffix``). Workers started with
        ``maintenance=False`` run no supervisor and are not listed. Read-only."""
        result: list[WorkerProcess] = self._run(self._ops.worker_processes())
        return result

    def purge_jobs(
        self, queue: str, states: Iterable[JobState | str], *, batch_size: int = 10_000
    ) -> int:
        """Delete every job of ``queue`` in ``states`` (at least one; ``active`` ones only if
        named: their workers' settles then find nothing), ``batch_size`` rows per statement,
        each batch committed on its own, until one deletes nothing; returns how many were
        deleted. A job that leaves the states meanwhile (fetched, settled) is kept. The
        deleted jobs' events are counted first (docs/dashboard.md, "Counters")."""
        plan = self._ops.purge_batch(queue, states, batch_size)
        total = 0
        while deleted := int(self._run(plan)):
            total += deleted
        return total

    def touch(self, queue: str, ids: Ids) -> int:
        """Heartbeat active jobs."""
        return int(self._run(self._ops.touch(queue, ids)))

    def get_job(self, queue: str, job_id: IdLike) -> Job | None:
        """One job, or None."""
        result: Job | None = self._run(self._ops.get_job(queue, job_id))
        return result

    def redrive(self, dlq: str, *, to: str | None = None, limit: int = 1000) -> int:
        """Move queued dead-letter jobs back to their source queue (or ``to``)."""
        return int(self._run(self._ops.redrive(dlq, to, limit)))

    def list_jobs(
        self,
        queue: str,
        *,
        states: Iterable[JobState | str] = (),
        limit: int = 100,
        after: IdLike | None = None,
    ) -> list[Job]:
        """Up to ``limit`` jobs of ``queue`` in ``states`` (every state when empty), in id
        order (roughly the order they were sent in); read-only. The next page:
        ``after=page[-1].id``. An unknown queue raises :class:`~alkstore.QueueNotFound`."""
        result: list[Job] = self._run(self._ops.list_jobs(queue, states, limit, after))
        return result

    def search_jobs(
        self,
        queue: str,
        *,
        states: Iterable[JobState | str] = (),
        key: str | None = None,
        text: str | None = None,
        after: IdLike | None = None,
        limit: int = 100,
        scan: int = 10_000,
    ) -> JobPage:
        """A page of ``queue``'s jobs in id order with that ``singleton_key`` (``key``) and
        whose data's JSON text contains ``text`` (case-insensitive), looking at no more than
        ``scan`` jobs after ``after``; the next page: ``after=page.next_after`` (None: no
        job left). Read-only; a page may hold fewer than ``limit`` jobs and still have a
        next one (docs/dashboard.md)."""
        search = JobSearch(states=states, key=key, text=text, after=after, limit=limit, scan=scan)
        result: JobPage = self._run(self._ops.search_jobs(queue, search))
        return result

    # finding and editing jobs (docs/queues.md, "Finding and editing jobs")
    def find_jobs(
        self,
        queue: str,
        *,
        id: IdLike | None = None,
        key: str | None = None,
        data: Mapping[str, Any] | None = None,
        queued: bool = False,
    ) -> list[Job]:
        """The jobs of ``queue`` (oldest first) with that ``id``, that ``singleton_key``
        (``key``), whose data contains every top-level key of ``data`` with its value
        (``jsonb @>``), and with ``queued=True`` only those waiting (created, retry)."""
        plan = self._ops.find_jobs(queue, id=id, key=key, data=data, queued=queued)
        result: list[Job] = self._run(plan)
        return result

    def update(
        self,
        queue: str,
        data: Any,
        *,
        id: IdLike | None = None,
        singleton_key: str | None = None,
        match: str = "newest",
    ) -> int:
        """Replace the ``data`` of a queued job (created or retry): the one with ``id``, or
        of the jobs with ``singleton_key`` the ``"newest"``, the ``"oldest"`` or ``"all"``.
        Returns how many jobs changed (0: none queued matched)."""
        plan = self._ops.update(queue, data, id=id, singleton_key=singleton_key, match=match)
        return int(self._run(plan))

    def upsert(
        self,
        queue: str,
        data: Any = None,
        *,
        id: IdLike | None = None,
        singleton_key: str | None = None,
        match: str = "newest",
        **options: Any,
    ) -> uuid.UUID | None:
        """:meth:`update` of the queued job chosen by ``id``/``singleton_key``/``match``, or
        when none is queued, :meth:`send` of a new job with that ``id`` and
        ``singleton_key`` and the send ``options`` (which an update leaves alone), in one
        transaction. Returns the id of the job updated or sent, or None when the queue's
        policy or throttle refused the send (docs/queues.md)."""
        plan = self._ops.upsert(
            queue, data, id=id, singleton_key=singleton_key, match=match, options=options
        )
        result: uuid.UUID | None = self._run(plan)
        self._wake(queue)
        return result

    # flows (docs/queues.md, "Flows")
    def flow(self, steps: Sequence[Mapping[str, Any]]) -> dict[str, uuid.UUID]:
        """Send jobs that depend on each other, atomically; returns ref -> job id.

        Each step is ``{"ref": ..., "queue": ..., "data": ..., "depends_on": [refs],
        **send options}``. A job with ``depends_on`` waits until every job it names has
        completed, and is released by the very completion of the last one (its
        ``start_after`` then counts from that moment). A failed or cancelled parent leaves
        it waiting. Refs must be unique and acyclic (checked before anything is written)."""
        plan, queues = self._ops.flow(steps)
        result: dict[str, uuid.UUID] = self._run(plan)
        for queue in queues:
            self._wake(queue)
        return result

    def get_dependencies(self, queue: str, job_id: IdLike) -> list[Job]:
        """The jobs that job ``job_id`` waits (or waited) for, oldest first."""
        result: list[Job] = self._run(self._ops.get_dependencies(queue, job_id))
        return result

    def get_dependents(self, queue: str, job_id: IdLike) -> list[Job]:
        """The jobs that wait (or waited) for job ``job_id``, oldest first."""
        result: list[Job] = self._run(self._ops.get_dependents(queue, job_id))
        return result

    def maintain(self, *, count_every: float = 0.0) -> MaintenanceReport:
        """Run one maintenance pass: expiry, heartbeat timeouts, retention, deletion, and
        the per-queue counters brought up to date (where the engine keeps them) unless they
        are less than ``count_every`` seconds behind (workers' passes use
        :data:`~alkstore.worker.runtime.COUNT_EVERY`)."""
        counts = {field: self._run(plan) for field, plan in self._ops.maintenance()}
        if self._counting.kept:
            until = self._run(self._counting.horizon())
            self._run(self._counting.tally(until, count_every))
        self._run(self.engine.mark_maintained())
        return self._ops.report(counts)

    @functools.cached_property
    def _counting(self) -> Counting:
        return Counting(self.engine)

    def counters(self) -> Counters:
        """Every queue's job counters, as the last maintenance pass left them
        (docs/dashboard.md, "Counters"); :class:`UnsupportedByEngine` on the in-memory
        engine."""
        result: Counters = self._run(self._counting.counters())
        return result

    # workers
    @overload
    def work(
        self,
        queue: str,
        handler: Handler,
        *,
        batch: Literal[False] = ...,
        concurrency: int = ...,
        **options: Unpack[WorkKwargs],
    ) -> Worker: ...

    @overload
    def work(
        self,
        queue: str,
        handler: BatchHandler,
        *,
        batch: Literal[True],
        batch_size: int = ...,
        concurrency: int = ...,
        **options: Unpack[WorkKwargs],
    ) -> Worker: ...

    def work(self, queue: str, handler: Callable[..., Any], **options: Any) -> Worker:
        """Start a worker on ``queue`` now, in background threads; returns it (stop it with
        ``worker.stop()`` or a ``with`` block). See ``docs/workers.md``.

        ``handler(job)`` returns the job's output; an exception fails the job with
        ``{"name", "message", "stack"}``; ``handler(job, ctx)`` also gets a
        :class:`~alkstore.JobContext`. With ``batch=True`` it gets ``list[Job]`` (up to
        ``batch_size``). An ``async def`` handler is refused: run it on an
        :class:`AsyncStore`, or as a task (docs/tasks.md). Options
        (:class:`~alkstore.worker.WorkOptions`): ``concurrency``, ``transactional``,
        ``poll_interval``, ``watch_interval``, ``maintenance``, ``maintenance_interval``,
        ``warning_size``, ``slow_query_seconds``, ``on_event``, ``group_concurrency``,
        ``durable_claims``.
        """
        return start(self, queue, handler, options)

    _listen_at: tuple[str, DriverSettings] | None = None
    """Where the worker runtime opens its LISTEN connection (None: a caller's connection)."""

    @functools.cached_property
    def _runtime(self) -> StoreRuntime:
        return StoreRuntime(self)

    def _wake(self, queue: str) -> None:
        if "_runtime" in self.__dict__:
            self._runtime.wakeups.wake(queue)

    def _woke(self, queue: str, changed: int) -> int:
        if changed:
            self._wake(queue)
        return changed

    # the caller's transaction
    def using(self, conn: Any) -> Store:
        """This store on ``conn``, a connection of this store's driver that you own: every
        call of the store it returns runs on ``conn``, inside the transaction you have open
        there, so a job is sent (or completed, or a queue created) if and only if your
        transaction commits. See ``docs/drivers.md``, "Your transaction: store.using(conn)".

        Cheap enough to call per request: no I/O, no schema check and no session setup (your
        session keeps its settings). ``conn`` may come from your own pool; return it to the
        pool when you are done, as you would anyway. A pool is refused: it has no
        transaction of yours to join. Closing the returned store never closes ``conn``.
        """
        source: SyncSource = _callers_source(self.driver, conn, face="sync")
        if self.engine.emulated:
            from .engines.emulation import guard_sync

            source = guard_sync(source, _guard_profile(self.engine))
        return Store(self.engine, self.driver, source)

    # cron and pub/sub
    @functools.cached_property
    def _messaging(self) -> Messaging:
        return Messaging(self.engine)

    def schedule(
        self,
        name: str,
        cron: str,
        data: Any = None,
        *,
        tz: str = "UTC",
        key: str = "",
        missed: str = "skip",
        **send_options: Any,
    ) -> None:
        """Send a job with ``data`` to queue ``name`` at every slot of ``cron`` (in ``tz``),
        exactly one per slot however many processes run workers; ``key`` tells several
        schedules of one queue apart. ``missed="once"`` fires the latest slot missed while
        no worker ran, ``"skip"`` does not. Replaces the schedule ``(name, key)``."""
        plan = self._messaging.schedule(
            name, cron, data, tz=tz, key=key, missed=missed, options=send_options
        )
        self._run(plan)

    def unschedule(self, name: str, key: str = "") -> bool:
        """Remove the schedule ``(name, key)``; True if there was one."""
        return bool(self._run(self._messaging.unschedule(name, key)))

    def schedules(self) -> list[Schedule]:
        """Every schedule, by name and key."""
        result: list[Schedule] = self._run(self._messaging.schedules())
        return result

    def pause_schedule(self, name: str, key: str = "") -> bool:
        """Stop the schedule ``(name, key)`` from firing until :meth:`resume_schedule`
        (:meth:`trigger_schedule` still sends its job). False if it was paused already;
        :class:`~alkstore.ScheduleNotFound` if there is no such schedule."""
        return bool(self._run(self._messaging.pause_schedule(name, key)))

    def resume_schedule(self, name: str, key: str = "") -> bool:
        """Let the paused schedule ``(name, key)`` fire again from its next slot: the slots
        that passed while it was paused are not fired, whatever its ``missed``. False if it
        was not paused; :class:`~alkstore.ScheduleNotFound` if there is no such schedule."""
        return bool(self._run(self._messaging.resume_schedule(name, key)))

    def trigger_schedule(self, name: str, key: str = "") -> uuid.UUID | None:
        """Send the job of the schedule ``(name, key)`` now (a run of its own, with a fresh
        id: the next slot still fires; a paused schedule stays paused). Returns the job's
        id, or None when the queue's policy refused it (as :meth:`send`);
        :class:`~alkstore.ScheduleNotFound` if there is no such schedule."""
        sent: uuid.UUID | None = self._run(self._messaging.trigger_schedule(name, key))
        if sent is not None:
            self._wake(name)
        return sent

    def fire_schedules(self, *, now: dt.datetime | None = None) -> int:
        """Send the jobs of the due slots now (workers' supervisors do this every pass);
        ``now`` overrides the database's clock. Returns how many jobs were sent."""
        fired = int(self._run(self._messaging.fire_schedules(now)))
        if fired and "_runtime" in self.__dict__:
            for queue in self._runtime.wakeups.queues():
                self._wake(queue)
        return fired

    def subscribe(self, event: str, queue: str) -> None:
        """Make :meth:`publish` of ``event`` send a job to ``queue``."""
        self._run(self._messaging.subscribe(event, queue))

    def unsubscribe(self, event: str, queue: str) -> bool:
        """Stop sending ``event`` to ``queue``; True if it was subscribed."""
        return bool(self._run(self._messaging.unsubscribe(event, queue)))

    def publish(self, event: str, data: Any = None, **send_options: Any) -> list[uuid.UUID]:
        """Send one job with ``data`` to every queue subscribed to ``event``, in one statement
        (every queue gets its job or, on an error, none does); returns their ids in the
        order of the queues' names."""
        sent: list[tuple[str, uuid.UUID]] = self._run(
            self._messaging.publish(event, data, send_options)
        )
        for queue in {q for q, _ in sent}:
            self._wake(queue)
        return [job_id for _, job_id in sent]


class AsyncStore:
    """The async face: the methods of :class:`Store` as coroutines. Task-safe."""

    def __init__(
        self,
        engine: Engine,
        driver: AsyncDriver,
        source: AsyncSource,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.engine = engine
        self.driver = driver
        self._source = source
        self._ops = Operations(engine)
        self._on_close = on_close
        self._serial: dict[str, asyncio.Lock] = {}

    async def _run(self, plan: Any) -> Any:
        if plan.serial is None:
            return await run_async(self._source, self.driver, plan)
        async with self._serial.setdefault(plan.serial, asyncio.Lock()):
            return await run_async(self._source, self.driver, plan)

    async def close(self) -> None:
        """See :meth:`Store.close`."""
        try:
            if "_runtime" in self.__dict__:
                await self._runtime.close()
            results = self.__dict__.get("_results")
            if results is not None:
                await results.close()
            await self._source.close()
        finally:
            if self._on_close is not None:
                self._on_close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def migrate(self) -> int:
        """See :meth:`Store.migrate`."""
        try:
            return int([await self._run(plan) for plan in self.engine.migrate()][-1])
        except StatementTimeout as exc:
            report = getattr(self.engine, "migration_lock_report", None)
            if report is None:
                raise
            raise await self._run(report()) from exc

    async def schema_version(self) -> int | None:
        """See :meth:`Store.schema_version`."""
        result: int | None = await self._run(self.engine.schema_version())
        return result

    async def create_queue(
        self, name: str, *, exist_ok: bool = False, **options: Unpack[QueueOptionsKwargs]
    ) -> None:
        """See :meth:`Store.create_queue`."""
        if exist_ok and self._ops.queue_matches(name, options, await self.get_queue(name)):
            return
        try:
            await self._run(self._ops.create_queue(name, options))
        except QueueExists:
            if not exist_ok or not self._ops.queue_matches(
                name, options, await self.get_queue(name)
            ):
                raise

    async def update_queue(self, name: str, **changes: Unpack[QueueOptionsKwargs]) -> Queue:
        """See :meth:`Store.update_queue`."""
        result: Queue = await self._run(self._ops.update_queue(name, changes))
        return result

    async def delete_queue(self, name: str) -> None:
        """See :meth:`Store.delete_queue`."""
        await self._run(self._ops.delete_queue(name))

    async def get_queue(self, name: str) -> Queue | None:
        """See :meth:`Store.get_queue`."""
        result: Queue | None = await self._run(self._ops.get_queue(name))
        return result

    async def queues(self) -> list[Queue]:
        """See :meth:`Store.queues`."""
        result: list[Queue] = await self._run(self._ops.queues())
        return result

    async def queue_stats(self, name: str) -> QueueStats:
        """See :meth:`Store.queue_stats`."""
        result: QueueStats = await self._run(self._ops.queue_stats(name))
        return result

    async def send(
        self, queue: str, data: Any = None, **options: Unpack[JobOptionsKwargs]
    ) -> uuid.UUID | None:
        """See :meth:`Store.send`."""
        result: uuid.UUID | None = await self._run(self._ops.send(queue, data, options))
        self._wake(queue)
        return result

    async def send_many(
        self, queue: str, jobs: Iterable[Mapping[str, Any]]
    ) -> list[uuid.UUID | None]:
        """See :meth:`Store.send_many`."""
        result: list[uuid.UUID | None] = await self._run(self._ops.send_many(queue, jobs))
        self._wake(queue)
        return result

    async def fetch(
        self,
        queue: str,
        *,
        batch_size: int = 1,
        group_concurrency: int | Mapping[str, Any] | GroupLimit | None = None,
        ignore_start_after: bool = False,
        include_metadata: bool = False,
    ) -> list[Job]:
        """See :meth:`Store.fetch`."""
        plan = self._ops.fetch(
            queue, batch_size, group_concurrency, ignore_start_after, include_metadata
        )
        result: list[Job] = await self._run(plan)
        return result

    async def pause_queue(self, name: str) -> None:
        """See :meth:`Store.pause_queue`."""
        await self._run(self._ops.set_paused(name, True))

    async def resume_queue(self, name: str) -> None:
        """See :meth:`Store.resume_queue`."""
        await self._run(self._ops.set_paused(name, False))

    async def complete(
        self, queue: str, ids: Ids, output: Any = None, *, include_queued: bool = False
    ) -> int:
        """See :meth:`Store.complete`."""
        return int(await self._run(self._ops.complete(queue, ids, output, include_queued)))

    async def complete_and_fetch(
        self,
        queue: str,
        ids: Ids,
        output: Any = None,
        *,
        batch_size: int = 1,
        group_concurrency: int | Mapping[str, Any] | GroupLimit | None = None,
        include_metadata: bool = False,
    ) -> Handoff:
        """See :meth:`Store.complete_and_fetch`."""
        plans = self._ops.complete_and_fetch(
            queue, ids, output, batch_size, group_concurrency, include_metadata
        )
        return self._ops.handoff([await self._run(plan) for plan in plans])

    async def fail(self, queue: str, ids: Ids, error: Any = None) -> int:
        """See :meth:`Store.fail`."""
        return int(await self._run(self._ops.fail(queue, ids, error)))

    async def snooze(self, queue: str, ids: Ids, seconds: float | dt.timedelta) -> int:
        """See :meth:`Store.snooze`."""
        return self._woke(queue, int(await self._run(self._ops.snooze(queue, ids, seconds))))

    async def wait(self, queue: str, job_id: IdLike, *, timeout: float) -> Job:
        """See :meth:`Store.wait`."""
        return await wait_async(self, self._results, queue, job_id, timeout)

    @functools.cached_property
    def _results(self) -> AsyncResultListener | None:
        where = listen_at(self)
        return None if where is None else AsyncResultListener(self, where)

    async def cancel(self, queue: str, ids: Ids) -> int:
        """See :meth:`Store.cancel`."""
        return int(await self._run(self._ops.cancel(queue, ids)))

    async def resume(self, queue: str, ids: Ids) -> int:
        """See :meth:`Store.resume`."""
        return self._woke(queue, int(await self._run(self._ops.resume(queue, ids))))

    async def retry(self, queue: str, ids: Ids) -> int:
        """See :meth:`Store.retry`."""
        return self._woke(queue, int(await self._run(self._ops.retry(queue, ids))))

    async def delete_jobs(self, queue: str, ids: Ids) -> int:
        """See :meth:`Store.delete_jobs`."""
        return int(await self._run(self._ops.delete_jobs(queue, ids)))

    async def worker_processes(self) -> list[WorkerProcess]:
        """See :meth:`Store.worker_processes`."""
        result: list[WorkerProcess] = await self._run(self._ops.worker_processes())
        return result

    async def purge_jobs(
        self, queue: str, states: Iterable[JobState | str], *, batch_size: int = 10_000
    ) -> int:
        """See :meth:`Store.purge_jobs`."""
        plan = self._ops.purge_batch(queue, states, batch_size)
        total = 0
        while deleted := int(await self._run(plan)):
            total += deleted
        return total

    async def touch(self, queue: str, ids: Ids) -> int:
        """See :meth:`Store.touch`."""
        return int(await self._run(self._ops.touch(queue, ids)))

    async def get_job(self, queue: str, job_id: IdLike) -> Job | None:
        """See :meth:`Store.get_job`."""
        result: Job | None = await self._run(self._ops.get_job(queue, job_id))
        return result

    async def redrive(self, dlq: str, *, to: str | None = None, limit: int = 1000) -> int:
        """See :meth:`Store.redrive`."""
        return int(await self._run(self._ops.redrive(dlq, to, limit)))

    async def list_jobs(
        self,
        queue: str,
        *,
        states: Iterable[JobState | str] = (),
        limit: int = 100,
        after: IdLike | None = None,
    ) -> list[Job]:
        """See :meth:`Store.list_jobs`."""
        result: list[Job] = await self._run(self._ops.list_jobs(queue, states, limit, after))
        return result

    async def search_jobs(
        self,
        queue: str,
        *,
        states: Iterable[JobState | str] = (),
        key: str | None = None,
        text: str | None = None,
        after: IdLike | None = None,
        limit: int = 100,
        scan: int = 10_000,
    ) -> JobPage:
        """See :meth:`Store.search_jobs`."""
        search = JobSearch(states=states, key=key, text=text, after=after, limit=limit, scan=scan)
        result: JobPage = await self._run(self._ops.search_jobs(queue, search))
        return result

    async def find_jobs(
        self,
        queue: str,
        *,
        id: IdLike | None = None,
        key: str | None = None,
        data: Mapping[str, Any] | None = None,
        queued: bool = False,
    ) -> list[Job]:
        """See :meth:`Store.find_jobs`."""
        plan = self._ops.find_jobs(queue, id=id, key=key, data=data, queued=queued)
        result: list[Job] = await self._run(plan)
        return result

    async def update(
        self,
        queue: str,
        data: Any,
        *,
        id: IdLike | None = None,
        singleton_key: str | None = None,
        match: str = "newest",
    ) -> int:
        """See :meth:`Store.update`."""
        plan = self._ops.update(queue, data, id=id, singleton_key=singleton_key, match=match)
        return int(await self._run(plan))

    async def upsert(
        self,
        queue: str,
        data: Any = None,
        *,
        id: IdLike | None = None,
        singleton_key: str | None = None,
        match: str = "newest",
        **options: Any,
    ) -> uuid.UUID | None:
        """See :meth:`Store.upsert`."""
        plan = self._ops.upsert(
            queue, data, id=id, singleton_key=singleton_key, match=match, options=options
        )
        result: uuid.UUID | None = await self._run(plan)
        self._wake(queue)
        return result

    async def flow(self, steps: Sequence[Mapping[str, Any]]) -> dict[str, uuid.UUID]:
        """See :meth:`Store.flow`."""
        plan, queues = self._ops.flow(steps)
        result: dict[str, uuid.UUID] = await self._run(plan)
        for queue in queues:
            self._wake(queue)
        return result

    async def get_dependencies(self, queue: str, job_id: IdLike) -> list[Job]:
        """See :meth:`Store.get_dependencies`."""
        result: list[Job] = await self._run(self._ops.get_dependencies(queue, job_id))
        return result

    async def get_dependents(self, queue: str, job_id: IdLike) -> list[Job]:
        """See :meth:`Store.get_dependents`."""
        result: list[Job] = await self._run(self._ops.get_dependents(queue, job_id))
        return result

    async def maintain(self, *, count_every: float = 0.0) -> MaintenanceReport:
        """See :meth:`Store.maintain`."""
        counts = {field: await self._run(plan) for field, plan in self._ops.maintenance()}
        if self._counting.kept:
            until = await self._run(self._counting.horizon())
            await self._run(self._counting.tally(until, count_every))
        await self._run(self.engine.mark_maintained())
        return self._ops.report(counts)

    @functools.cached_property
    def _counting(self) -> Counting:
        return Counting(self.engine)

    async def counters(self) -> Counters:
        """See :meth:`Store.counters`."""
        result: Counters = await self._run(self._counting.counters())
        return result

    @overload
    async def work(
        self,
        queue: str,
        handler: AsyncHandler,
        *,
        batch: Literal[False] = ...,
        concurrency: int = ...,
        **options: Unpack[WorkKwargs],
    ) -> AsyncWorker: ...

    @overload
    async def work(
        self,
        queue: str,
        handler: AsyncBatchHandler,
        *,
        batch: Literal[True],
        batch_size: int = ...,
        concurrency: int = ...,
        **options: Unpack[WorkKwargs],
    ) -> AsyncWorker: ...

    async def work(self, queue: str, handler: Callable[..., Any], **options: Any) -> AsyncWorker:
        """See :meth:`Store.work`: here the worker runs as tasks of the running event loop,
        ``handler`` is a coroutine function (or a plain one, run on the loop: keep it short),
        and ``ctx`` an :class:`~alkstore.AsyncJobContext`."""
        return await start_async(self, queue, handler, options)

    _listen_at: tuple[str, DriverSettings] | None = None
    """See :attr:`Store._listen_at`."""

    @functools.cached_property
    def _runtime(self) -> AsyncStoreRuntime:
        return AsyncStoreRuntime(self)

    def _wake(self, queue: str) -> None:
        if "_runtime" in self.__dict__:
            self._runtime.wakeups.wake(queue)

    def _woke(self, queue: str, changed: int) -> int:
        if changed:
            self._wake(queue)
        return changed

    def using(self, conn: Any) -> AsyncStore:
        """See :meth:`Store.using`: ``conn`` is an async connection of this store's driver
        (a ``psycopg.AsyncConnection``, or an ``asyncpg`` connection, also one acquired from
        an ``asyncpg`` pool). Returns at once: nothing is awaited."""
        source: AsyncSource = _callers_source(self.driver, conn, face="async")
        if self.engine.emulated:
            from .engines.emulation import guard_async

            source = guard_async(source, _guard_profile(self.engine))
        return AsyncStore(self.engine, self.driver, source)

    @functools.cached_property
    def _messaging(self) -> Messaging:
        return Messaging(self.engine)

    async def schedule(
        self,
        name: str,
        cron: str,
        data: Any = None,
        *,
        tz: str = "UTC",
        key: str = "",
        missed: str = "skip",
        **send_options: Any,
    ) -> None:
        """See :meth:`Store.schedule`."""
        plan = self._messaging.schedule(
            name, cron, data, tz=tz, key=key, missed=missed, options=send_options
        )
        await self._run(plan)

    async def unschedule(self, name: str, key: str = "") -> bool:
        """See :meth:`Store.unschedule`."""
        return bool(await self._run(self._messaging.unschedule(name, key)))

    async def schedules(self) -> list[Schedule]:
        """See :meth:`Store.schedules`."""
        result: list[Schedule] = await self._run(self._messaging.schedules())
        return result

    async def pause_schedule(self, name: str, key: str = "") -> bool:
        """See :meth:`Store.pause_schedule`."""
        return bool(await self._run(self._messaging.pause_schedule(name, key)))

    async def resume_schedule(self, name: str, key: str = "") -> bool:
        """See :meth:`Store.resume_schedule`."""
        return bool(await self._run(self._messaging.resume_schedule(name, key)))

    async def trigger_schedule(self, name: str, key: str = "") -> uuid.UUID | None:
        """See :meth:`Store.trigger_schedule`."""
        sent: uuid.UUID | None = await self._run(self._messaging.trigger_schedule(name, key))
        if sent is not None:
            self._wake(name)
        return sent

    async def fire_schedules(self, *, now: dt.datetime | None = None) -> int:
        """See :meth:`Store.fire_schedules`."""
        fired = int(await self._run(self._messaging.fire_schedules(now)))
        if fired and "_runtime" in self.__dict__:
            for queue in self._runtime.wakeups.queues():
                self._wake(queue)
        return fired

    async def subscribe(self, event: str, queue: str) -> None:
        """See :meth:`Store.subscribe`."""
        await self._run(self._messaging.subscribe(event, queue))

    async def unsubscribe(self, event: str, queue: str) -> bool:
        """See :meth:`Store.unsubscribe`."""
        return bool(await self._run(self._messaging.unsubscribe(event, queue)))

    async def publish(self, event: str, data: Any = None, **send_options: Any) -> list[uuid.UUID]:
        """See :meth:`Store.publish`."""
        sent: list[tuple[str, uuid.UUID]] = await self._run(
            self._messaging.publish(event, data, send_options)
        )
        for queue in {q for q, _ in sent}:
            self._wake(queue)
        return [job_id for _, job_id in sent]


POOLERS = ("pgbouncer",)
"""Values of the ``pooler`` connect option."""


def _pooler(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and value not in POOLERS:
        raise InvalidOptions(attribute.name, value, f"must be None or one of {POOLERS}")


def _listen_dsn(_inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not (
        isinstance(value, str) and value.startswith(("postgresql://", "postgres://"))
    ):
        raise InvalidOptions(attribute.name, value, "must be None or a postgresql:// URI")


@attrs.frozen(kw_only=True)
class ConnectOptions:
    """The arguments of :func:`connect` / :func:`connect_async`, checked before any I/O."""

    engine: str | None = None
    driver: str = "psycopg"
    schema: str = attrs.field(default="alkstore", validator=schema_name)
    pool_size: int = attrs.field(default=10, validator=int_at_least(1))
    migrate: bool = True
    emulate: bool = False
    engine_options: Mapping[str, Any] = attrs.field(factory=dict)
    pooler: str | None = attrs.field(default=None, validator=_pooler)
    listen_dsn: str | None = attrs.field(default=None, validator=_listen_dsn)
    connect_timeout: float | None = attrs.field(default=None, validator=optional_seconds)
    statement_timeout: float | None = attrs.field(default=None, validator=optional_seconds)
    lock_timeout: float | None = attrs.field(default=None, validator=optional_seconds)

    def listen_at(self, target: Target) -> tuple[str, DriverSettings] | None:
        """Where the worker runtime opens its LISTEN connection: ``listen_dsn`` (straight to
        the server, so without the pooler's restrictions), else the store's own DSN unless
        that is a transaction pooler (which hands a listening session to other clients
        between transactions) or a caller's connection (docs/workers.md, "Wake-ups behind a
        pooler")."""
        if self.listen_dsn is not None:
            return self.listen_dsn, attrs.evolve(self, pooler=None).settings(target)
        if target.dsn is None or self.pooler is not None:
            return None
        return target.dsn, self.settings(target)

    def migrated(self) -> tuple[str, Mapping[str, Any]] | None:
        """The schema and engine options :func:`connect` migrates, or None (``migrate=False``)."""
        return (self.schema, self.engine_options) if self.migrate else None

    def check_listen(self, engine: Engine) -> None:
        """Refuse ``listen_dsn`` where the engine cannot LISTEN from a session of its own."""
        caps = engine.capabilities
        if self.listen_dsn is not None and (not caps.listen_notify or caps.single_connection):
            lacks = "listen_notify" if not caps.listen_notify else "several sessions"
            raise InvalidOptions(
                "listen_dsn", self.listen_dsn, f"engine {engine.name!r} lacks {lacks}"
            )

    def settings(self, target: Target) -> DriverSettings:
        """Driver settings: one connection on single-session engines, and no prepared
        statements there unless the store is the session's only client (a ``pglite://``
        bridge it started, which forgets them when a client disconnects); behind a
        transaction pooler no prepared statements and no session setup either
        (docs/engines.md, "PostgreSQL versions and PgBouncer"); the timeouts resolved from
        these options, the DSN and the defaults (docs/deployment.md, "Timeouts")."""
        name = "postgres" if target.requested == AUTO else target.requested
        engine = engine_class(name)
        single = engine.description.capabilities.single_connection
        pooled = self.pooler is not None
        timeouts = resolve_timeouts(
            target.dsn or "",
            connect_timeout=self.connect_timeout,
            statement_timeout=self.statement_timeout,
            lock_timeout=self.lock_timeout,
            server_side=not (single or pooled),
        )
        return DriverSettings(
            pool_size=1 if single else self.pool_size,
            prepared_statements=not pooled and (not single or target.sole_client),
            session_setup=() if pooled else engine.session_setup,
            connect_timeout=timeouts.connect,
            server_settings=timeouts.server_settings,
            call_timeout=timeouts.call,
        )

    def engine_for(self, target: Target, detected: ServerInfo | None) -> Engine:
        """The engine instance for what was asked and what the server turned out to be."""
        return build_engine(
            target.requested,
            detected,
            self.schema,
            emulate=self.emulate,
            options=self.engine_options,
        )


def _adopted(drv: SyncDriver | AsyncDriver, target: Target) -> Any:
    adopted = drv.adopt(target.native)
    if adopted is None:
        raise TypeError(f"{type(target.native).__name__} is not a {drv.name} connection or pool")
    return adopted


def _guard_profile(engine: Engine) -> Any:
    from .engines.emulation import PROFILES

    return PROFILES[str(engine.description.emulation_profile)]


_POOL_CLASSES = (
    ("psycopg_pool", "ConnectionPool"),
    ("psycopg_pool", "AsyncConnectionPool"),
    ("asyncpg.pool", "Pool"),
)
"""Pools :meth:`Store.using` refuses (looked up only where their library is imported)."""


def _is_pool(native: Any) -> bool:
    for module, name in _POOL_CLASSES:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and isinstance(native, cls):
            return True
    return False


def _callers_source(drv: SyncDriver | AsyncDriver, conn: Any, *, face: str) -> Any:
    """``conn`` as a source for :meth:`Store.using` (the face puts the emulation guard in
    front when the engine is emulated)."""
    if _is_pool(conn):
        raise InvalidOptions(
            "conn",
            type(conn).__name__,
            "using() joins the transaction open on a connection, and a pool has none: "
            "borrow a connection from the pool (psycopg_pool: pool.connection(), asyncpg: "
            "pool.acquire()) and pass that",
        )
    source = drv.adopt(conn)
    if source is None:
        raise InvalidOptions(
            "conn",
            type(conn).__name__,
            f"is not a connection of this {face} store's driver {drv.name!r}",
        )
    return source


IN_PROCESS_OPTIONS = frozenset({"engine", "schema", "migrate", "driver", "emulate"})
"""The ``connect`` options a database in this process (``memory://``) takes; the others
configure a server connection."""


def _in_process_options(spec: DriverSpec, options: Mapping[str, Any]) -> ConnectOptions:
    """The options of a ``connect`` to a database in this process (its scheme names the
    driver, and the engine of that name): an option that configures a server is refused."""
    scheme = spec.name
    unknown = sorted(set(options) - IN_PROCESS_OPTIONS)
    if unknown:
        name = unknown[0]
        raise InvalidOptions(name, options[name], f"does not apply to {scheme}:// (no server)")
    if options.get("emulate", False) is not False:
        raise InvalidOptions("emulate", options["emulate"], f"{scheme}:// emulates no server")
    if options.get("engine", scheme) != scheme:
        raise InvalidOptions(
            "engine", options["engine"], f"a {scheme}:// URI needs engine={scheme!r}"
        )
    if options.get("driver", scheme) != scheme:
        raise InvalidOptions("driver", options["driver"], f"{scheme}:// runs in-process: no driver")
    schema, migrate = options.get("schema", "alkstore"), options.get("migrate", True)
    return ConnectOptions(engine=scheme, schema=schema, migrate=migrate)


def _in_process_engine(source: object, opts: ConnectOptions) -> Engine:
    """The engine ``opts`` names, on the database ``source`` opened."""
    options = source.engine_options() if isinstance(source, InProcessSource) else {}
    return engine_class(opts.engine or "").configure(opts.schema, options)


def _connect_in_process(dsn: str, spec: DriverSpec, opts: ConnectOptions) -> Store:
    """:func:`connect` of a database in this process (``memory://``)."""
    drv = spec.load()
    assert isinstance(drv, SyncDriver)
    source = drv.open(dsn, DriverSettings())
    try:
        engine = _in_process_engine(source, opts)
    except BaseException:
        source.close()
        raise
    store = Store(engine, drv, source)
    try:
        store.migrate() if opts.migrate else store._run(engine.check_version())
    except BaseException:
        store.close()
        raise
    return store


async def _open_in_process_async(dsn: str, spec: DriverSpec, opts: ConnectOptions) -> AsyncStore:
    """:func:`connect_async` of a database in this process (``memory://``)."""
    drv = spec.load()
    assert isinstance(drv, AsyncDriver)
    source = await drv.open(dsn, DriverSettings())
    try:
        engine = _in_process_engine(source, opts)
    except BaseException:
        await source.close()
        raise
    store = AsyncStore(engine, drv, source)
    try:
        await (store.migrate() if opts.migrate else store._run(engine.check_version()))
    except BaseException:
        await store.close()
        raise
    return store


def connect(dsn: Any, **options: Unpack[ConnectKwargs]) -> Store:
    """Open a :class:`Store` (use it in a ``with`` block, or call ``close()``).

    ``dsn`` is a PostgreSQL URI, ``pglite://`` (in memory) or ``pglite:///dir`` (embedded,
    persistent), ``memory://`` or ``memory://NAME`` (the in-memory engine, in this process,
    for unit tests: docs/engines.md), or a connection of the chosen driver that you own
    (statements join its open transaction), or a pool of it (the store borrows from it; each
    call commits on its own, never joining a transaction of yours: use :meth:`Store.using`
    for that). Keyword options (:class:`ConnectOptions`):

    - ``engine``: ``postgres`` (default), ``cockroachdb``, ``yugabytedb``, ``citus``,
      ``pglite`` (default for a pglite URI), ``auto`` (detected from the server), or a
      third-party engine's entry-point name; ``engine_options`` passes engine settings
      (``{"distributed": True}`` for sharded Citus);
    - ``driver``: ``psycopg`` (default) or ``pg8000``; ``schema`` (default ``alkstore``);
      ``pool_size`` (default 10);
    - ``emulate``: run a distributed engine on stock PostgreSQL behind a guard that rejects
      what its real server would;
    - ``migrate``: install or upgrade the schema now (default); either way a database newer
      than this library is refused with :class:`SchemaVersionError`;
    - ``pooler``: ``"pgbouncer"`` when ``dsn`` is a pooler in transaction pooling mode
      (PgBouncer's ``pool_mode = transaction``): no prepared statements and no per-session
      settings, which would not follow the store from one transaction to the next;
    - ``listen_dsn``: a ``postgresql://`` URI straight to the server (not through the pooler)
      where the store's workers LISTEN for wake-ups; needed behind a transaction pooler
      (without it they poll there) and for a store on a caller's connection or pool.
    - ``connect_timeout`` (default: the DSN's, else 10 s), ``statement_timeout`` (default:
      the DSN's, else 60 s; 0 for none) and ``lock_timeout`` (the DSN's, else 30 s), in
      seconds: a call whose server does not answer within the larger of the last two plus
      5 s is abandoned with :class:`~alkstore.DeadlineExceeded` (docs/deployment.md).
    """
    in_process = scheme_driver(dsn, is_async=False)
    if in_process is not None:
        return _connect_in_process(dsn, in_process, _in_process_options(in_process, options))
    opts = ConnectOptions(**options)
    target = resolve_target(dsn, opts.engine, opts.migrated())
    try:
        drv = sync_driver(opts.driver)
        if target.dsn is None:
            source: SyncSource = _adopted(drv, target)
        else:
            source = drv.open(target.dsn, opts.settings(target))
    except BaseException:
        target.close()
        raise
    try:
        detected = None
        if target.needs_detection:
            detected = run_sync(source, drv, detect_plan())
        chosen = opts.engine_for(target, detected)
        opts.check_listen(chosen)
        if opts.emulate:
            from .engines.emulation import guard_sync

            source = guard_sync(source, _guard_profile(chosen))
    except BaseException:
        source.close()
        target.close()
        raise
    store = Store(chosen, drv, source, on_close=target.close)
    store._listen_at = opts.listen_at(target)
    try:
        store.migrate() if opts.migrate else store._run(chosen.check_version())
    except BaseException:
        store.close()
        raise
    if opts.migrate:
        target.after_migrate()
    return store


async def _open_async(dsn: Any, opts: ConnectOptions) -> AsyncStore:
    target = resolve_target(dsn, opts.engine, opts.migrated())
    try:
        drv = async_driver(opts.driver)
        if target.dsn is None:
            source: AsyncSource = _adopted(drv, target)
        else:
            source = await drv.open(target.dsn, opts.settings(target))
    except BaseException:
        target.close()
        raise
    try:
        detected = None
        if target.needs_detection:
            detected = await run_async(source, drv, detect_plan())
        chosen = opts.engine_for(target, detected)
        opts.check_listen(chosen)
        if opts.emulate:
            from .engines.emulation import guard_async

            source = guard_async(source, _guard_profile(chosen))
    except BaseException:
        await source.close()
        target.close()
        raise
    store = AsyncStore(chosen, drv, source, on_close=target.close)
    store._listen_at = opts.listen_at(target)
    try:
        await (store.migrate() if opts.migrate else store._run(chosen.check_version()))
    except BaseException:
        await store.close()
        raise
    if opts.migrate:
        await asyncio.to_thread(target.after_migrate)
    return store


class AsyncConnector:
    """What :func:`connect_async` returns: await it, or use it in ``async with``."""

    def __init__(self, opener: Callable[[], Coroutine[Any, Any, AsyncStore]]) -> None:
        self._opener = opener
        self._store: AsyncStore | None = None

    def __await__(self) -> Generator[Any, None, AsyncStore]:
        return self._opener().__await__()

    async def __aenter__(self) -> AsyncStore:
        self._store = await self._opener()
        return self._store

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._store is not None:
            await self._store.close()


def connect_async(dsn: Any, **options: Unpack[ConnectKwargs]) -> AsyncConnector:
    """Open an :class:`AsyncStore` (``driver``: ``psycopg`` or ``asyncpg``); see :func:`connect`.

    ``store = await connect_async(...)`` or ``async with connect_async(...) as store:``.
    The options are checked now, before anything is awaited.
    """
    in_process = scheme_driver(dsn, is_async=True)
    if in_process is not None:
        checked = _in_process_options(in_process, options)
        return AsyncConnector(lambda: _open_in_process_async(dsn, in_process, checked))
    opts = ConnectOptions(**options)
    return AsyncConnector(lambda: _open_async(dsn, opts))
