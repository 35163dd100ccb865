"""Small connection pools for the drivers whose library has none that fits.

pg8000 has no pool at all. psycopg has psycopg_pool, but its contract differs from the one
alkstore's sources promise, so the psycopg driver uses these pools too (a caller's own
psycopg_pool pool can still be adopted):

* here a borrower that finds a free slot opens the connection itself, within
  ``connect_timeout``, and gets the connection error if that fails; psycopg_pool opens
  connections on background worker threads, retries failures for ``reconnect_timeout``, and
  the waiting caller only ever sees a ``PoolTimeout``;
* here waiting for a *busy* pool has no deadline (a job queue's sessions may be held for
  a long time); in psycopg_pool one ``timeout`` bounds both the wait and the connect;
* no worker threads or maintenance tasks, so a store that is never used costs nothing.

asyncpg's own pool already behaves this way (connections are opened lazily, in the
acquiring task, with a connect timeout) and the asyncpg driver uses it.

The pools are generic over the connection type: a driver supplies how to open, close and
check a connection. Connections are reused newest-first (the warmest one). A connection is
discarded instead of kept when the borrower says so (it saw the connection break) or when the
driver's ``reusable`` check fails (closed, or left inside a transaction). When an idle
connection is borrowed, that check runs again with the driver's ``alive`` check (one
non-blocking poll of the socket, :func:`quiet`), so one whose server session ended while it
sat idle (a terminated backend, a restarted server) is replaced before a statement is sent on
it. The poll is not repeated when a connection comes back: it is made once per borrowing.
"""

from __future__ import annotations

import asyncio
import select
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Generic, TypeVar

from ..core.errors import AlkstoreError

C = TypeVar("C")


class PoolClosed(AlkstoreError, RuntimeError):
    """The pool was closed: it hands out no more connections."""

    def __init__(self) -> None:
        super().__init__("the connection pool is closed")


class Lease(Generic[C]):
    """A borrowed connection; set :attr:`discard` to have it closed instead of kept."""

    __slots__ = ("connection", "discard")

    def __init__(self, connection: C) -> None:
        self.connection = connection
        """The borrowed connection."""
        self.discard = False
        """Close the connection on return (the borrower saw it break)."""


class SyncPool(Generic[C]):
    """At most ``size`` connections, opened on demand by the borrowing thread."""

    def __init__(
        self,
        connect: Callable[[], C],
        close: Callable[[C], None],
        reusable: Callable[[C], bool],
        size: int,
        alive: Callable[[C], bool] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"pool size must be at least 1, not {size}")
        self._connect = connect
        self._close = close
        self._reusable = reusable
        self._alive = alive
        self._size = size
        self._idle: list[C] = []
        self._open = 0  # connections open or being opened, idle or lent out
        self._closed = False
        self._cond = threading.Condition()

    @property
    def size(self) -> int:
        """The most connections open at once."""
        return self._size

    @contextmanager
    def lease(self) -> Iterator[Lease[C]]:
        """Borrow a connection for the ``with`` block; blocks while all are lent out.

        Opening a new connection raises what the driver's ``connect`` raises (its own
        connect timeout applies); waiting for a busy pool has no deadline.
        """
        lease = Lease(self._borrow())
        try:
            yield lease
        finally:
            self._give_back(lease)

    def _borrow(self) -> C:
        while (conn := self._take_idle()) is not None:
            if _idle_usable(self._reusable, self._alive, conn):
                return conn
            with self._cond:
                self._open -= 1
            _safe_close(self._close, conn)
        try:
            return self._connect()
        except BaseException:
            with self._cond:
                self._open -= 1
                self._cond.notify()
            raise

    def _take_idle(self) -> C | None:
        """An idle connection, or None once a slot for a new one is reserved."""
        with self._cond:
            while True:
                if self._closed:
                    raise PoolClosed()
                if self._idle:
                    return self._idle.pop()
                if self._open < self._size:
                    self._open += 1
                    return None
                self._cond.wait()

    def _give_back(self, lease: Lease[C]) -> None:
        conn = lease.connection
        keep = not lease.discard and _safe_check(self._reusable, conn)
        with self._cond:
            if keep and not self._closed:
                self._idle.append(conn)
                self._cond.notify()
                return
            self._open -= 1
            self._cond.notify()
        _safe_close(self._close, conn)

    def close(self) -> None:
        """Close idle connections now and lent ones when they come back; wake all waiters."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._cond.notify_all()
        for conn in idle:
            _safe_close(self._close, conn)


class AsyncPool(Generic[C]):
    """At most ``size`` connections, opened on demand by the borrowing task."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[C]],
        close: Callable[[C], Awaitable[None]],
        reusable: Callable[[C], bool],
        size: int,
        alive: Callable[[C], bool] | None = None,
    ) -> None:
        if size < 1:
            raise ValueError(f"pool size must be at least 1, not {size}")
        self._connect = connect
        self._close = close
        self._reusable = reusable
        self._alive = alive
        self._size = size
        self._idle: list[C] = []
        self._open = 0
        self._closed = False
        self._cond = asyncio.Condition()
        self._waiting = 0
        """Borrowers waiting for a connection: only then does a return wake anyone."""

    @property
    def size(self) -> int:
        """The most connections open at once."""
        return self._size

    @asynccontextmanager
    async def lease(self) -> AsyncIterator[Lease[C]]:
        """Borrow a connection for the ``async with`` block; waits while all are lent out.

        Opening a new connection raises what the driver's ``connect`` raises (its own
        connect timeout applies); waiting for a busy pool has no deadline.
        """
        lease = Lease(await self._borrow())
        try:
            yield lease
        finally:
            await self._give_back(lease)

    async def _borrow(self) -> C:
        while (conn := await self._take_idle()) is not None:
            if _idle_usable(self._reusable, self._alive, conn):
                return conn
            self._open -= 1
            await _safe_aclose(self._close, conn)
        try:
            return await self._connect()
        except BaseException:
            # Also on cancellation: give the slot back. Plain bookkeeping, no await needed
            # until the notify, which wakes every waiter so none misses the freed slot.
            self._open -= 1
            await self._wake_waiters()
            raise

    async def _take_idle(self) -> C | None:
        """An idle connection, or None once a slot for a new one is reserved."""
        async with self._cond:
            while True:
                if self._closed:
                    raise PoolClosed()
                if self._idle:
                    return self._idle.pop()
                if self._open < self._size:
                    self._open += 1
                    return None
                self._waiting += 1
                try:
                    await self._cond.wait()
                finally:
                    self._waiting -= 1

    async def _give_back(self, lease: Lease[C]) -> None:
        conn = lease.connection
        keep = not lease.discard and _safe_check(self._reusable, conn)
        if keep and not self._closed:
            self._idle.append(conn)
        else:
            self._open -= 1
        # notify_all, not notify: on Python < 3.13 a waiter cancelled just after being
        # notified swallows the wake-up, and another waiter would sleep on a free slot.
        discarded = not keep or self._closed
        try:
            await self._wake_waiters()
        finally:
            if discarded:
                await _safe_aclose(self._close, conn)

    async def _wake_waiters(self) -> None:
        # With nobody waiting there is no one to wake: the shielded notify is a task of its
        # own, a turn of the event loop on every return of a connection (docs/benchmarks.md,
        # "The async pools' return"). A borrower that starts waiting later sees the returned
        # connection or the freed slot itself before it waits.
        if self._waiting:
            await self._notify_all()

    async def _notify_all(self) -> None:
        # Shielded so that a cancelled borrower still wakes the others.
        await asyncio.shield(self._locked_notify_all())

    async def _locked_notify_all(self) -> None:
        async with self._cond:
            self._cond.notify_all()

    async def close(self) -> None:
        """Close idle connections now and lent ones when they come back; wake all waiters."""
        self._closed = True
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        await self._notify_all()
        for conn in idle:
            await _safe_aclose(self._close, conn)


def quiet(fd: int) -> bool:
    """Nothing waits to be read on an idle connection's socket.

    An idle session's server sends nothing unprompted (the pools' connections never
    ``LISTEN``) except when it ends it: a terminated backend sends its FATAL error and closes
    the socket, a dead server leaves it closed. So a readable or hung-up idle socket is a dead
    connection, found with one non-blocking ``poll`` and no round trip."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLPRI)
    return not poller.poll(0)


def _safe_check(reusable: Callable[[C], bool], conn: C) -> bool:
    try:
        return reusable(conn)
    except Exception:
        return False


def _idle_usable(reusable: Callable[[C], bool], alive: Callable[[C], bool] | None, conn: C) -> bool:
    return _safe_check(reusable, conn) and (alive is None or _safe_check(alive, conn))


def _safe_close(close: Callable[[C], None], conn: C) -> None:
    with suppress(Exception):  # a broken connection may fail to close; it is gone either way
        close(conn)


async def _safe_aclose(close: Callable[[C], Awaitable[None]], conn: C) -> None:
    with suppress(Exception):
        await close(conn)


__all__ = ["AsyncPool", "Lease", "PoolClosed", "SyncPool", "quiet"]
