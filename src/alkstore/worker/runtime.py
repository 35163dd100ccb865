"""A store's worker runtime: its workers, their wake-ups, and the supervisor.

Every store that runs workers runs a supervisor: every ``maintenance_interval`` it tries
to claim the next maintenance pass (one row in the database, claimed by a conditional
``UPDATE``), and the one instance that wins, across any number of processes, runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import attrs

from ..core.contracts import worker_runtime
from ..core.errors import UnsupportedByDriver
from ..core.plans import Plan
from ..core.records import MaintenanceReport
from ..drivers.base import DriverSettings, Notification
from ..operations import Operations
from . import stages
from .backoff import RECONNECT_FIRST, jittered
from .events import WorkerEvent, emit
from .settle import error_of
from .wakeups import Wakeups

if TYPE_CHECKING:
    from .faces import AsyncFace, SyncFace
    from .tasks import AsyncWorker
    from .threads import Worker


COUNT_EVERY = 15.0
"""Seconds the per-queue counters may lag before a supervisor's pass brings them up to date
(docs/dashboard.md, "Counters"): a Prometheus scrape interval, not one scan a second."""
LISTEN_WAIT = 0.1
"""Seconds a listener waits for notifications before checking whether it should stop: the
bound on how long stopping the last worker waits for its listener thread. A wait sends no
query (the driver only reads the socket), so a short one costs the server nothing."""
PROCESS_RECORD = 10.0
"""Seconds between a supervisor's records of its process (``store.worker_processes()``)."""
LISTEN_RETRY = 1.0
"""Seconds, at most, before a lost or failed listener connects again: it tries at once
(a jittered backoff from a few ms, :mod:`.backoff`), and polling covers the gap."""
SUPERVISOR_STOP = 30.0
"""Seconds the last supervised worker's stop waits for the supervisor to finish its pass
and remove the process's record."""


def owner_name() -> str:
    """Who holds a claim: host, process and a random suffix (several stores per process)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class _Base:
    def __init__(self) -> None:
        self.wakeups = Wakeups()
        self.owner = owner_name()
        self._lock = threading.Lock()
        self._workers: list[Any] = []

    def _listen_target(self, store: Any) -> tuple[str, DriverSettings] | None:
        """Where to LISTEN (``listen_dsn``, else the store's DSN), where the engine has
        ``listen_notify`` and several sessions (PGlite's one shared session wakes in-process
        only). A store that could listen but has nowhere to (behind a transaction pooler,
        or on a caller's connection, without ``listen_dsn``) says so with a
        ``listen_unavailable`` event: its workers poll."""
        caps = store.engine.capabilities
        if not caps.listen_notify or caps.single_connection:
            return None
        target: tuple[str, DriverSettings] | None = store._listen_at
        if target is None:
            self._event(
                "listen_unavailable",
                error="no connection to LISTEN on (a transaction pooler or a caller's "
                "connection): pass listen_dsn to connect() for wake-ups; workers poll",
            )
        return target

    def _woken(self, notes: list[Notification]) -> None:
        probe = stages.PROBE
        for queue in {note.payload for note in notes}:
            if probe is not None:
                probe.notified(queue)
            self.wakeups.wake(queue)

    def _wake_all(self) -> None:
        """After (re)connecting a listener: notifications sent meanwhile were lost."""
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            worker.wake()

    def _record(self, ops: Operations) -> Plan[None]:
        """The plan recording this process (:class:`~alkstore.WorkerProcess`): expiring
        after three missed records."""
        with self._lock:
            workers = list(self._workers)
        ttl = 3 * PROCESS_RECORD + self._interval()
        info = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "queues": sorted({w.queue for w in workers}),
            "workers": len(workers),
            "ttl": ttl,
        }
        return ops.record_process(self.owner, ttl, json.dumps(info))

    def _supervised(self) -> list[Any]:
        with self._lock:
            return [w for w in self._workers if w.options.maintenance]

    def _interval(self) -> float:
        workers = self._supervised()
        return min(w.options.maintenance_interval for w in workers) if workers else 1.0

    def _event(self, kind: str, **detail: Any) -> None:
        with self._lock:
            workers = list(self._workers)
        callbacks = {id(w.options.on_event): w.options.on_event for w in workers}
        for callback in callbacks.values() or [None]:
            emit(callback, WorkerEvent(kind, None, detail))

    def _warning_sizes(self) -> dict[str, int]:
        """Queue -> the smallest ``warning_size`` its workers set."""
        with self._lock:
            workers = list(self._workers)
        sizes: dict[str, int] = {}
        for w in workers:
            size = w.options.warning_size
            if size is not None:
                sizes[w.queue] = min(size, sizes.get(w.queue, size))
        return sizes

    def _backlog(self, queue: str, size: int, queued: int) -> None:
        if queued > size:
            with self._lock:
                workers = [w for w in self._workers if w.queue == queue]
            callbacks = {id(w.options.on_event): w.options.on_event for w in workers}
            detail = {"queued": queued, "warning_size": size}
            for callback in callbacks.values():
                emit(callback, WorkerEvent("backlog", queue, detail))

    def _fired(self, count: int) -> None:
        if count:
            self._event("schedule_fired", jobs=count)

    def _report(self, report: MaintenanceReport) -> None:
        if report != MaintenanceReport():
            self._event("maintenance", **{k: v for k, v in attrs.asdict(report).items() if v})


class StoreRuntime(_Base):
    """The runtime of a :class:`~alkstore.Store`: a supervisor thread while workers run."""

    def __init__(self, store: SyncFace) -> None:
        super().__init__()
        self._store = store
        self._supervisor: threading.Thread | None = None
        self._quit = threading.Event()
        self._listener: threading.Thread | None = None
        self._unlisten = threading.Event()

    def attach(self, worker: Worker) -> None:
        """Register a starting worker (and start the supervisor it asks for)."""
        self.wakeups.add(worker.queue, worker.wake)
        with self._lock:
            self._workers.append(worker)
        target = self._listen_target(self._store)
        with self._lock:
            listen = target is not None and self._listener is None
            if listen:
                assert target is not None
                self._unlisten.clear()
                self._listener = threading.Thread(
                    target=self._listen, args=target, name="alkstore-listener", daemon=True
                )
                self._listener.start()
            start = worker.options.maintenance and self._supervisor is None
            if start:
                self._quit.clear()
                self._supervisor = threading.Thread(
                    target=self._supervise, name="alkstore-supervisor", daemon=True
                )
        if start:
            assert self._supervisor is not None
            self._supervisor.start()

    def detach(self, worker: Worker) -> None:
        """Forget a stopped worker; the supervisor stops with the last that wanted it."""
        self.wakeups.remove(worker.queue, worker.wake)
        with self._lock:
            self._workers.remove(worker)
            thread = self._supervisor
            last = thread is not None and not any(w.options.maintenance for w in self._workers)
            if last:
                self._supervisor = None
            listener = self._listener if not self._workers else None
            if listener is not None:
                self._listener = None
        if last and thread is not None:
            self._quit.set()
            thread.join(timeout=SUPERVISOR_STOP)
        if listener is not None:
            self._unlisten.set()
            listener.join(timeout=30)

    def _listen(self, dsn: str, settings: DriverSettings) -> None:
        name = worker_runtime(self._store.engine).channel()
        failures = 0
        while not self._unlisten.is_set():
            try:
                listener = self._store.driver.open_listener(dsn, settings)
            except UnsupportedByDriver as exc:
                self._event("listen_unsupported", error=str(exc))
                return
            except Exception as exc:
                self._event("listen_error", error=error_of(exc)["message"])
                self._unlisten.wait(jittered(failures, RECONNECT_FIRST, LISTEN_RETRY))
                failures += 1
                continue
            try:
                listener.listen(name)
                failures = 0
                self._wake_all()
                while not self._unlisten.is_set():
                    self._woken(listener.wait(LISTEN_WAIT))
            except Exception as exc:
                self._event("listen_error", error=error_of(exc)["message"])
                self._unlisten.wait(jittered(failures, RECONNECT_FIRST, LISTEN_RETRY))
                failures += 1
            finally:
                listener.close()

    def close(self) -> None:
        """Stop every worker (the store is closing)."""
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            worker.stop()

    def _supervise(self) -> None:
        ops = Operations(self._store.engine)
        next_record = 0.0
        while True:
            if time.monotonic() >= next_record:  # the process's record (alkstore workers)
                next_record = time.monotonic() + PROCESS_RECORD
                self._guarded(lambda: self._store._run(self._record(ops)))
            if self._quit.wait(self._interval()):
                break
            self._guarded(self.run_pass)
        self._guarded(lambda: self._store._run(ops.forget_process(self.owner)))

    def _guarded(self, call: Callable[[], object]) -> None:
        try:
            call()
        except Exception as exc:
            self._event("maintenance_error", error=error_of(exc)["message"])

    def run_pass(self) -> bool:
        """Claim and, if won, run one maintenance pass; True if this instance ran it."""
        store = self._store
        if not store._run(worker_runtime(store.engine).claim_pass(self._interval(), self.owner)):
            return False
        self._report(store.maintain(count_every=COUNT_EVERY))
        self._fired(store.fire_schedules())
        for queue, size in self._warning_sizes().items():
            self._backlog(queue, size, store.queue_stats(queue).queued)
        return True


class AsyncStoreRuntime(_Base):
    """The runtime of an :class:`~alkstore.AsyncStore`: a supervisor task while workers run."""

    def __init__(self, store: AsyncFace) -> None:
        super().__init__()
        self._store = store
        self._supervisor: asyncio.Task[None] | None = None
        self._quit = asyncio.Event()
        self._listener: asyncio.Task[None] | None = None

    def attach(self, worker: AsyncWorker) -> None:
        """Register a starting worker (and start the supervisor it asks for)."""
        self.wakeups.add(worker.queue, worker.wake)
        with self._lock:
            self._workers.append(worker)
        target = self._listen_target(self._store)
        if target is not None and self._listener is None:
            self._listener = asyncio.get_running_loop().create_task(self._listen(*target))
        if worker.options.maintenance and self._supervisor is None:
            self._quit = asyncio.Event()
            self._supervisor = asyncio.get_running_loop().create_task(self._supervise(self._quit))

    async def detach(self, worker: AsyncWorker) -> None:
        """Forget a stopped worker; the supervisor stops with the last that wanted it."""
        self.wakeups.remove(worker.queue, worker.wake)
        with self._lock:
            self._workers.remove(worker)
            last = not any(w.options.maintenance for w in self._workers)
        task = self._supervisor
        if last and task is not None:
            self._supervisor = None
            # Asked to quit between passes rather than cancelled: a cancelled query can leave
            # the connection unusable for the process record's removal that follows.
            self._quit.set()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(task, SUPERVISOR_STOP)
        listener = self._listener
        if listener is not None and not self._workers:
            self._listener = None
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener

    async def _listen(self, dsn: str, settings: DriverSettings) -> None:
        name = worker_runtime(self._store.engine).channel()
        failures = 0
        while True:
            try:
                listener = await self._store.driver.open_listener(dsn, settings)
            except UnsupportedByDriver as exc:
                self._event("listen_unsupported", error=str(exc))
                return
            except Exception as exc:
                self._event("listen_error", error=error_of(exc)["message"])
                await asyncio.sleep(jittered(failures, RECONNECT_FIRST, LISTEN_RETRY))
                failures += 1
                continue
            try:
                await listener.listen(name)
                failures = 0
                self._wake_all()
                while True:
                    self._woken(await listener.wait(LISTEN_WAIT))
            except Exception as exc:
                self._event("listen_error", error=error_of(exc)["message"])
                await asyncio.sleep(jittered(failures, RECONNECT_FIRST, LISTEN_RETRY))
                failures += 1
            finally:
                await listener.close()

    async def close(self) -> None:
        """Stop every worker (the store is closing)."""
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            await worker.stop()

    async def _supervise(self, stop: asyncio.Event) -> None:
        ops = Operations(self._store.engine)
        next_record = 0.0
        try:
            while True:
                if time.monotonic() >= next_record:  # the process's record (alkstore workers)
                    next_record = time.monotonic() + PROCESS_RECORD
                    await self._guarded(self._store._run(self._record(ops)))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self._interval())
                    break
                await self._guarded(self.run_pass())
        finally:  # the last supervised worker stopped (or the task was cancelled)
            await self._guarded(self._store._run(ops.forget_process(self.owner)))

    async def _guarded(self, call: Awaitable[Any]) -> None:
        try:
            await call
        except Exception as exc:
            self._event("maintenance_error", error=error_of(exc)["message"])

    async def run_pass(self) -> bool:
        """See :meth:`StoreRuntime.run_pass`."""
        store = self._store
        if not await store._run(
            worker_runtime(store.engine).claim_pass(self._interval(), self.owner)
        ):
            return False
        self._report(await store.maintain(count_every=COUNT_EVERY))
        self._fired(await store.fire_schedules())
        for queue, size in self._warning_sizes().items():
            self._backlog(queue, size, (await store.queue_stats(queue)).queued)
        return True
