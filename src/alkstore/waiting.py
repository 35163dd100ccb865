"""``wait``: block until a job finishes, woken by its notification where the engine has one.

Where the engine notifies results (``Capabilities.notifies_results``: not sharded Citus)
and the store has a connection to listen on (not behind a transaction pooler without
``listen_dsn``, not a caller's connection, not PGlite's one shared session), a store keeps one
listener on its schema's result channel while anything waits, and each wait marks its job
``waited``: the statement that finishes such a job notifies (schema version 15; a job nobody
waits for sends nothing). Every wait also reads its job again after a backoff, which covers a
notification lost with a listener's connection and is the only wake-up elsewhere
(docs/workers.md, "Waiting for a result").
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from .core.contracts import ResultWatch, result_watch
from .core.errors import InvalidOptions, JobNotFound, UnsupportedByDriver, WaitTimeout
from .core.plans import Plan
from .core.records import Job
from .core.states import FINISHED
from .core.targets import IdLike, targets
from .core.validation import MAX_DELAY, check_queue_name
from .drivers.base import DriverSettings, Notification

if TYPE_CHECKING:
    from .operations import Operations
    from .store import AsyncStore, Store

ListenAt = tuple[ResultWatch, str, DriverSettings]
"""The engine whose result channel waits listen on, and the DSN and settings to reach it."""

POLL_FIRST = 0.005
"""Seconds before the first read again of a job that has not finished."""
POLL_FACTOR = 1.5
"""How much longer each further pause is."""
POLL_MAX = 0.5
"""The longest pause between two reads where no notification wakes the wait."""
POLL_MAX_NOTIFIED = 2.0
"""The longest pause where a notification wakes the wait (reads then only cover a lost
notification)."""
LISTEN_WAIT = 0.1
"""Seconds a listener waits for notifications before checking whether anything still waits."""
LISTEN_LINGER = 30.0
"""Seconds a store's result listener stays connected after its last wait ended: waits that
follow one another reuse it instead of each connecting again."""
LISTEN_RETRY = 1.0
"""Seconds before a lost or failed listener connects again (reads cover the gap)."""


def check_timeout(timeout: object) -> float:
    """``wait``'s ``timeout``: seconds, more than 0 and at most 365 days."""
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or not 0 < timeout <= MAX_DELAY
    ):
        raise InvalidOptions(
            "timeout", timeout, f"must be a number of seconds above 0, at most {MAX_DELAY}"
        )
    return float(timeout)


def pauses() -> Iterator[float]:
    """The pauses between reads of a job not yet finished: growing, then steady (each wait
    also caps them, at :data:`POLL_MAX` or :data:`POLL_MAX_NOTIFIED`)."""
    pause = POLL_FIRST
    while True:
        yield pause
        pause = min(pause * POLL_FACTOR, POLL_MAX_NOTIFIED)


class Waiting:
    """One ``wait`` call: its job, deadline and reads (shared by both faces)."""

    def __init__(self, queue: str, job_id: IdLike, timeout: object) -> None:
        self.queue = check_queue_name(queue)
        (self.job_id,) = targets(job_id).ids
        self.timeout = check_timeout(timeout)
        self.deadline = time.monotonic() + self.timeout
        self.listened: ResultWatch | None = None
        """The engine, once a listener listens for this job's notification."""
        self._pauses = pauses()

    def read(self, ops: Operations) -> Plan[Job | None]:
        """The plan that reads the job (marking it waited when a listener will be told)."""
        if self.listened is not None:
            return self.listened.watch_result(self.queue, self.job_id)
        return ops.get_job(self.queue, self.job_id)

    def outcome(self, job: Job | None) -> Job | float:
        """The finished job, or the seconds to pause before reading it again; raises
        :class:`JobNotFound` or, past the deadline, :class:`WaitTimeout`."""
        if job is None:
            raise JobNotFound(self.queue, self.job_id)
        if job.state in FINISHED:
            return job
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WaitTimeout(self.queue, self.job_id, self.timeout, job)
        cap = POLL_MAX if self.listened is None else POLL_MAX_NOTIFIED
        return min(left, cap, next(self._pauses))


def listen_at(store: Store | AsyncStore) -> ListenAt | None:
    """The engine whose result channel a store's waits listen on, and where; None where
    they only poll."""
    engine = result_watch(store.engine)
    caps = store.engine.capabilities
    if engine is None or not caps.notifies_results or caps.single_connection:
        return None
    if store._listen_at is None:
        return None
    return (engine, *store._listen_at)


class _Hub:
    """Job id -> the wake-ups of the waits for it (thread-safe), and the state of the
    store's listener: running (a thread or task) while anything waits, and listening."""

    def __init__(self, where: ListenAt) -> None:
        self.engine, self._dsn, self._settings = where
        self.lock = threading.Lock()
        self.waiting: dict[uuid.UUID, list[Any]] = {}
        self.running: Any = None
        """The listener's thread or task, None when there is none."""
        self.listening = False
        """True while the listener is listening: a wait then marks its job."""
        self.unsupported = False
        """Set when the driver cannot listen (pg8000), or the store closed: waits only read
        again."""
        self._quiet_since = time.monotonic()
        """When the last wait ended (while none waits)."""

    def _add(self, job_id: uuid.UUID, wake: Any, start: Callable[[], Any]) -> None:
        """Register ``wake``; ``start()`` the listener (returning its thread or task) when
        none runs."""
        with self.lock:
            self.waiting.setdefault(job_id, []).append(wake)
            if self.running is None and not self.unsupported:
                self.running = start()

    def _idle(self, *, unsupported: bool = False) -> bool:
        """True (and the listener forgotten) once nothing has waited for
        :data:`LISTEN_LINGER` seconds, or the driver cannot listen."""
        with self.lock:
            self.unsupported = self.unsupported or unsupported
            lingering = time.monotonic() - self._quiet_since < LISTEN_LINGER
            if (self.waiting or lingering) and not self.unsupported:
                return False
            self.running = None
            self.listening = False
            return True

    def _listened(self) -> list[Any]:
        """Note that the listener listens; every wake-up (notifications may have been lost
        before)."""
        with self.lock:
            self.listening = True
            return [wake for wakes in self.waiting.values() for wake in wakes]

    def _woken(self, notes: list[Notification]) -> list[Any]:
        """The wake-ups of the jobs ``notes`` name."""
        found: list[Any] = []
        with self.lock:
            for note in notes:
                try:
                    found += self.waiting.get(uuid.UUID(note.payload), ())
                except ValueError:
                    continue
        return found

    def remove(self, job_id: uuid.UUID, wake: Any) -> None:
        """Forget one wait."""
        with self.lock:
            found = self.waiting.get(job_id, [])
            if wake in found:
                found.remove(wake)
            if not found:
                self.waiting.pop(job_id, None)
            if not self.waiting:
                self._quiet_since = time.monotonic()


class ResultListener(_Hub):
    """A sync store's result listener: a thread while anything waits."""

    def __init__(self, store: Store, where: ListenAt) -> None:
        super().__init__(where)
        self._store = store

    def add(self, job_id: uuid.UUID) -> threading.Event:
        """A wake-up set when ``job_id`` may have finished (starts the listener)."""
        wake = threading.Event()
        self._add(job_id, wake, self._start)
        return wake

    def close(self) -> None:
        """Stop the listener (the store is closing); later waits only read again."""
        with self.lock:
            running = self.running
        self._idle(unsupported=True)
        if isinstance(running, threading.Thread) and running is not threading.current_thread():
            running.join(timeout=LISTEN_RETRY + LISTEN_WAIT * 10)

    def _start(self) -> threading.Thread:
        thread = threading.Thread(target=self._listen, name="alkstore-results", daemon=True)
        thread.start()
        return thread

    def _listen(self) -> None:
        name = self.engine.result_channel()
        while not self._idle():
            try:
                listener = self._store.driver.open_listener(self._dsn, self._settings)
            except UnsupportedByDriver:
                self._idle(unsupported=True)
                return
            except Exception:
                time.sleep(LISTEN_RETRY)
                continue
            try:
                listener.listen(name)
                for wake in self._listened():
                    wake.set()
                while not self._idle():
                    for wake in self._woken(listener.wait(LISTEN_WAIT)):
                        wake.set()
            except Exception:
                self.listening = False
                time.sleep(LISTEN_RETRY)
            finally:
                listener.close()


class AsyncResultListener(_Hub):
    """An async store's result listener: a task while anything waits."""

    def __init__(self, store: AsyncStore, where: ListenAt) -> None:
        super().__init__(where)
        self._store = store

    def add(self, job_id: uuid.UUID) -> asyncio.Event:
        """A wake-up set when ``job_id`` may have finished (starts the listener)."""
        wake = asyncio.Event()
        self._add(job_id, wake, lambda: asyncio.get_running_loop().create_task(self._listen()))
        return wake

    async def close(self) -> None:
        """Stop the listener (the store is closing); later waits only read again."""
        with self.lock:
            running = self.running
        self._idle(unsupported=True)
        if isinstance(running, asyncio.Task):
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running

    async def _listen(self) -> None:
        name = self.engine.result_channel()
        while not self._idle():
            try:
                listener = await self._store.driver.open_listener(self._dsn, self._settings)
            except UnsupportedByDriver:
                self._idle(unsupported=True)
                return
            except Exception:
                await asyncio.sleep(LISTEN_RETRY)
                continue
            try:
                await listener.listen(name)
                for wake in self._listened():
                    wake.set()
                while not self._idle():
                    for wake in self._woken(await listener.wait(LISTEN_WAIT)):
                        wake.set()
            except Exception:
                self.listening = False
                await asyncio.sleep(LISTEN_RETRY)
            finally:
                await listener.close()


def wait_sync(
    store: Store, listener: ResultListener | None, queue: str, job_id: IdLike, timeout: object
) -> Job:
    """See :meth:`alkstore.Store.wait`."""
    waiting = Waiting(queue, job_id, timeout)
    if listener is None:
        while True:
            found = waiting.outcome(store._run(waiting.read(store._ops)))
            if isinstance(found, Job):
                return found
            time.sleep(found)
    wake = listener.add(waiting.job_id)
    try:
        while True:
            waiting.listened = listener.engine if listener.listening else None
            found = waiting.outcome(store._run(waiting.read(store._ops)))
            if isinstance(found, Job):
                return found
            wake.wait(found)
            wake.clear()
    finally:
        listener.remove(waiting.job_id, wake)


async def wait_async(
    store: AsyncStore,
    listener: AsyncResultListener | None,
    queue: str,
    job_id: IdLike,
    timeout: object,
) -> Job:
    """See :meth:`alkstore.AsyncStore.wait`."""
    waiting = Waiting(queue, job_id, timeout)
    if listener is None:
        while True:
            found = waiting.outcome(await store._run(waiting.read(store._ops)))
            if isinstance(found, Job):
                return found
            await asyncio.sleep(found)
    wake = listener.add(waiting.job_id)
    try:
        while True:
            waiting.listened = listener.engine if listener.listening else None
            found = waiting.outcome(await store._run(waiting.read(store._ops)))
            if isinstance(found, Job):
                return found
            await _within(wake.wait(), found)
            wake.clear()
    finally:
        listener.remove(waiting.job_id, wake)


async def _within(waited: Any, seconds: float) -> None:
    """Await ``waited`` for at most ``seconds`` (a timeout is not an error here)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(waited, seconds)
