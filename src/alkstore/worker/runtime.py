"""A store's worker runtime: its workers, their wake-ups, and the supervisor.

Every store that runs workers runs a supervisor: every half ``maintenance_interval`` it tries
to claim the next maintenance pass (one row in the database, claimed by a conditional
``UPDATE``), and the one instance that wins, across any number of processes, runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
import uuid
from typing import TYPE_CHECKING, Any

import attrs

from ..core.records import MaintenanceReport
from ..engines.postgres.runtime import claim_pass
from .events import WorkerEvent, emit
from .settle import error_of
from .wakeups import Wakeups

if TYPE_CHECKING:
    from ..store import AsyncStore, Store
    from .tasks import AsyncWorker
    from .threads import Worker


def owner_name() -> str:
    """Who holds a claim: host, process and a random suffix (several stores per process)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class _Base:
    def __init__(self) -> None:
        self.wakeups = Wakeups()
        self.owner = owner_name()
        self._lock = threading.Lock()
        self._workers: list[Any] = []

    def _supervised(self) -> list[Any]:
        with self._lock:
            return [w for w in self._workers if w.options.maintenance]

    def _interval(self) -> float:
        workers = self._supervised()
        return min(w.options.maintenance_interval for w in workers) if workers else 1.0

    def _event(self, kind: str, **detail: Any) -> None:
        workers = self._supervised()
        callbacks = {id(w.options.on_event): w.options.on_event for w in workers}
        for callback in callbacks.values() or [None]:
            emit(callback, WorkerEvent(kind, None, detail))

    def _fired(self, count: int) -> None:
        if count:
            self._event("schedule_fired", jobs=count)

    def _report(self, report: MaintenanceReport) -> None:
        if report != MaintenanceReport():
            self._event("maintenance", **{k: v for k, v in attrs.asdict(report).items() if v})


class StoreRuntime(_Base):
    """The runtime of a :class:`~alkstore.Store`: a supervisor thread while workers run."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self._store = store
        self._supervisor: threading.Thread | None = None
        self._quit = threading.Event()

    def attach(self, worker: Worker) -> None:
        """Register a starting worker (and start the supervisor it asks for)."""
        self.wakeups.add(worker.queue, worker.wake)
        with self._lock:
            self._workers.append(worker)
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
        if last and thread is not None:
            self._quit.set()
            thread.join(timeout=30)

    def close(self) -> None:
        """Stop every worker (the store is closing)."""
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            worker.stop()

    def _supervise(self) -> None:
        while not self._quit.wait(self._interval() / 2):
            try:
                self.run_pass()
            except Exception as exc:
                self._event("maintenance_error", error=error_of(exc)["message"])

    def run_pass(self) -> bool:
        """Claim and, if won, run one maintenance pass; True if this instance ran it."""
        store = self._store
        if not store._run(claim_pass(store.engine, self._interval(), self.owner)):
            return False
        self._report(store.maintain())
        self._fired(store.fire_schedules())
        return True


class AsyncStoreRuntime(_Base):
    """The runtime of an :class:`~alkstore.AsyncStore`: a supervisor task while workers run."""

    def __init__(self, store: AsyncStore) -> None:
        super().__init__()
        self._store = store
        self._supervisor: asyncio.Task[None] | None = None

    def attach(self, worker: AsyncWorker) -> None:
        """Register a starting worker (and start the supervisor it asks for)."""
        self.wakeups.add(worker.queue, worker.wake)
        with self._lock:
            self._workers.append(worker)
        if worker.options.maintenance and self._supervisor is None:
            self._supervisor = asyncio.get_running_loop().create_task(self._supervise())

    async def detach(self, worker: AsyncWorker) -> None:
        """Forget a stopped worker; the supervisor stops with the last that wanted it."""
        self.wakeups.remove(worker.queue, worker.wake)
        with self._lock:
            self._workers.remove(worker)
            last = not any(w.options.maintenance for w in self._workers)
        task = self._supervisor
        if last and task is not None:
            self._supervisor = None
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self) -> None:
        """Stop every worker (the store is closing)."""
        with self._lock:
            workers = list(self._workers)
        for worker in workers:
            await worker.stop()

    async def _supervise(self) -> None:
        while True:
            await asyncio.sleep(self._interval() / 2)
            try:
                await self.run_pass()
            except Exception as exc:
                self._event("maintenance_error", error=error_of(exc)["message"])

    async def run_pass(self) -> bool:
        """See :meth:`StoreRuntime.run_pass`."""
        store = self._store
        if not await store._run(claim_pass(store.engine, self._interval(), self.owner)):
            return False
        self._report(await store.maintain())
        self._fired(await store.fire_schedules())
        return True
