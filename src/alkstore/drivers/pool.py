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

asyncpg's own pool behaves much the same (connections opened lazily, in the acquiring
task, with a connect timeout), but a store opened from a DSN gives asyncpg connections an
:class:`AsyncPool` too (docs/benchmarks.md, "The async pools' return"); a caller's own asyncpg
pool is used as it is.

Borrowers that find every connection lent out wait in arrival order, and a returned
connection (or a freed slot, to open one in) is handed straight to the first of them
(docs/benchmarks.md, "The pools' waiting borrowers").

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
from collections import deque
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


class _Lender(Generic[C]):
    """What both pools keep: the idle connections, the slots taken, and the hand-over of a
    returned connection or freed slot to the first waiting borrower (:meth:`_give_to_waiter`,
    each pool's own)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"pool size must be at least 1, not {size}")
        self._size = size
        self._idle: list[C] = []
        self._open = 0  # connections open or being opened, idle or lent out
        self._closed = False

    @property
    def size(self) -> int:
        """The most connections open at once."""
        return self._size

    def _take_now(self) -> tuple[bool, C | None]:
        """Without waiting: ``(True, conn)``, an idle connection or None for a slot now this
        borrower's, or ``(False, None)`` when every connection is lent out."""
        if self._closed:
            raise PoolClosed()
        if self._idle:
            return True, self._idle.pop()
        if self._open < self._size:
            self._open += 1
            return True, None
        return False, None

    def _give_to_waiter(self, conn: C | None) -> bool:
        """Hand ``conn`` to the first waiting borrower; False when none waits."""
        raise NotImplementedError

    def _hand_on(self, conn: C | None) -> C | None:
        """Hand ``conn`` (None: a freed slot) to the first waiting borrower, else keep the
        connection idle or give the slot up. Once the pool is closed the slot is given up
        and ``conn`` returned, for the caller to close. (:class:`SyncPool`: with its lock
        held.)"""
        if self._closed:
            self._open -= 1
            return conn
        if not self._give_to_waiter(conn):
            if conn is None:
                self._open -= 1
            else:
                self._idle.append(conn)
        return None


class _Waiter(Generic[C]):
    """A thread waiting for a connection of a :class:`SyncPool`."""

    __slots__ = ("handed", "ready", "value")

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.handed = False
        self.value: C | None = None
        """The connection handed over, or None: a slot to open one in."""


class SyncPool(_Lender[C]):
    """At most ``size`` connections, opened on demand by the borrowing thread.

    As in :class:`AsyncPool`, waiting borrowers are served in arrival order and a returned
    connection (or a freed slot) is handed straight to the first of them: with a plain
    condition variable, a thread that came back at once took the connection before the
    woken one ran, and at 128 threads on 8 connections some waited seconds
    (docs/benchmarks.md, "The pools' waiting borrowers").
    """

    def __init__(
        self,
        connect: Callable[[], C],
        close: Callable[[C], None],
        reusable: Callable[[C], bool],
        size: int,
        alive: Callable[[C], bool] | None = None,
    ) -> None:
        super().__init__(size)
        self._connect = connect
        self._close = close
        self._reusable = reusable
        self._alive = alive
        self._lock = threading.Lock()
        self._waiters: deque[_Waiter[C]] = deque()

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
        conn = self._take()
        try:
            if conn is not None:
                if _idle_usable(self._reusable, self._alive, conn):
                    return conn
                # Its session ended while it sat idle: open another in its slot.
                _safe_close(self._close, conn)
            return self._connect()
        except BaseException:
            with self._lock:
                self._hand_on(None)
            raise

    def _take(self) -> C | None:
        """A connection, or None once a slot for a new one is this borrower's."""
        with self._lock:
            got, conn = self._take_now()
            if got:
                return conn
            waiter: _Waiter[C] = _Waiter()
            self._waiters.append(waiter)
        try:
            waiter.ready.wait()
        except BaseException:
            with self._lock:
                if waiter.handed:  # handed over, then interrupted: pass it on
                    leftover = self._hand_on(waiter.value)
                else:
                    leftover = None
                    with suppress(ValueError):  # close() took the waiters meanwhile
                        self._waiters.remove(waiter)
            if leftover is not None:
                _safe_close(self._close, leftover)
            raise
        if not waiter.handed:
            raise PoolClosed()
        return waiter.value

    def _give_to_waiter(self, conn: C | None) -> bool:
        if not self._waiters:
            return False
        waiter = self._waiters.popleft()
        waiter.value, waiter.handed = conn, True
        waiter.ready.set()
        return True

    def _give_back(self, lease: Lease[C]) -> None:
        conn = lease.connection
        keep = not lease.discard and _safe_check(self._reusable, conn)
        with self._lock:
            leftover = self._hand_on(conn if keep else None)
        if not keep:
            leftover = conn
        if leftover is not None:
            _safe_close(self._close, leftover)

    def close(self) -> None:
        """Close idle connections now and lent ones when they come back; the borrowers still
        waiting get :class:`PoolClosed`."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            waiters, self._waiters = self._waiters, deque()
        for waiter in waiters:
            waiter.ready.set()
        for conn in idle:
            _safe_close(self._close, conn)


class AsyncPool(_Lender[C]):
    """At most ``size`` connections, opened on demand by the borrowing task.

    Borrowers that find every connection lent out wait in arrival order, and a connection
    that comes back goes straight to the first of them (a freed slot likewise, to open a
    connection with): one waiter is woken per return, and a borrower that did not wait
    cannot take the connection from under the ones that did. Waking every waiter on every
    return, as an ``asyncio.Condition``'s ``notify_all`` does, cost a turn of each waiting
    task per return: with 128 consumers on 8 connections, most of the client's CPU per job;
    and without the hand-over, consumers that came back at once kept the connections while
    the others, completions among them, waited seconds (docs/benchmarks.md, "The pools'
    waiting borrowers").
    """

    def __init__(
        self,
        connect: Callable[[], Awaitable[C]],
        close: Callable[[C], Awaitable[None]],
        reusable: Callable[[C], bool],
        size: int,
        alive: Callable[[C], bool] | None = None,
    ) -> None:
        super().__init__(size)
        self._connect = connect
        self._close = close
        self._reusable = reusable
        self._alive = alive
        self._waiters: deque[asyncio.Future[C | None]] = deque()
        """Borrowers waiting, first come first: each is handed a connection, or None (a
        slot to open one in)."""

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
        conn = await self._take()
        try:
            if conn is not None:
                if _idle_usable(self._reusable, self._alive, conn):
                    return conn
                # Its session ended while it sat idle: open another in its slot.
                await _safe_aclose(self._close, conn)
            return await self._connect()
        except BaseException:
            # Also on cancellation: the slot goes to the next waiter.
            self._hand_on(None)
            raise

    async def _take(self) -> C | None:
        """A connection, or None once a slot for a new one is this borrower's."""
        got, conn = self._take_now()
        if got:
            return conn
        waiter: asyncio.Future[C | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled() and waiter.exception() is None:
                # Handed over, then cancelled: pass it on (or close it, the pool closed).
                leftover = self._hand_on(waiter.result())
                if leftover is not None:
                    await asyncio.shield(_safe_aclose(self._close, leftover))
            else:
                with suppress(ValueError):
                    self._waiters.remove(waiter)
            raise

    def _give_to_waiter(self, conn: C | None) -> bool:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():  # a waiter cancelled meanwhile is skipped
                waiter.set_result(conn)
                return True
        return False

    async def _give_back(self, lease: Lease[C]) -> None:
        conn = lease.connection
        keep = not lease.discard and _safe_check(self._reusable, conn)
        leftover = self._hand_on(conn if keep else None)
        if not keep:
            leftover = conn
        if leftover is not None:
            await _safe_aclose(self._close, leftover)

    async def close(self) -> None:
        """Close idle connections now and lent ones when they come back; the borrowers still
        waiting get :class:`PoolClosed`."""
        self._closed = True
        idle, self._idle = self._idle, []
        self._open -= len(idle)
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_exception(PoolClosed())
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
