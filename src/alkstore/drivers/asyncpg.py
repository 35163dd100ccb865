"""The asyncpg driver: :data:`ASYNC`.

asyncpg speaks PostgreSQL's ``$1`` placeholders natively and parses the DSN itself, so
statements go to it unchanged. Connections opened from a DSN come from alkstore's own
:class:`~.pool.AsyncPool` (opened lazily, by the borrowing task, within ``connect_timeout``),
as the psycopg driver's do: asyncpg's pool returns every connection through a task of its own
(``asyncio.shield``) plus a timeout scope, a turn of the event loop and about 1.5 µs of client
CPU a job at 100 jobs a fetch (docs/benchmarks.md, "The async pools' return"). A caller's own
asyncpg pool is still adopted as it is. With ``DriverSettings.prepared_statements`` off the
statement cache is disabled.

Transactions are opened with plain ``BEGIN``/``SAVEPOINT`` statements rather than asyncpg's
``Connection.transaction()``, which refuses to start inside a transaction the caller began
with a plain ``BEGIN``; whether a savepoint is needed is read from
``Connection.is_in_transaction()``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg
from asyncpg.pool import Pool

from ..core.errors import DeadlineExceeded, ListenerClosed
from ..core.identifiers import quote_ident
from ..core.plans import Isolation, Row, Statement
from .base import (
    SET_CONFIG,
    AsyncListener,
    AsyncSession,
    AsyncSource,
    DriverSettings,
    ErrorInfo,
    Notification,
)
from .common import check_port, transaction_sql, wait_timeout
from .pool import AsyncPool, quiet

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    # asyncpg's classes are generic only in its stubs
    Connection: TypeAlias = asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]

CLOSE_TIMEOUT = 10.0
"""Seconds a graceful close may take before the connections are terminated instead."""


class AsyncpgSession:
    """An :class:`~alkstore.drivers.base.AsyncSession` on one asyncpg connection."""

    def __init__(self, conn: Connection, deadline: float | None = None) -> None:
        self.connection = conn
        """The asyncpg connection (or pool connection proxy) statements run on."""
        self.broken = False
        """A rollback failed or a deadline passed: the connection's state is unknown and it
        must not be reused."""
        self.deadline = deadline
        """Seconds a statement may take before its connection is abandoned (None: no limit)."""

    async def execute(self, statement: Statement) -> list[Row]:
        """Run one statement; its rows are asyncpg's records (copying each into a dict cost
        0.8 µs a row, about 5 % of a batch fetch's client time)."""
        try:
            records = await self.connection.fetch(
                statement.sql, *statement.params, timeout=self.deadline
            )
        except TimeoutError as exc:
            raise self._abandoned() from exc
        return list(records)

    async def _simple(self, sql: str) -> None:
        try:
            await self.connection.execute(sql, timeout=self.deadline)
        except TimeoutError as exc:
            raise self._abandoned() from exc

    def _abandoned(self) -> DeadlineExceeded:
        self.broken = True
        _terminate(self.connection)  # a stalled connection cannot be reset or reused
        return DeadlineExceeded(
            f"no answer within {self.deadline:g}s: the connection was abandoned and the "
            "outcome is unknown"
        )

    def in_transaction(self) -> bool:
        """A transaction is open on the connection (asyncpg has no implicit ones)."""
        return self.connection.is_in_transaction()

    @asynccontextmanager
    async def transaction(self, isolation: Isolation | None = None) -> AsyncIterator[None]:
        """A transaction (a savepoint when the connection already has one open)."""
        conn = self.connection
        sql = transaction_sql(isolation, nested=conn.is_in_transaction())
        await self._simple(sql.begin)
        try:
            yield
        except BaseException:
            try:
                for rollback in sql.rollback:
                    await self._simple(rollback)
            except BaseException:
                self.broken = True
            raise
        await self._simple(sql.commit)


class _OpenedSource:
    """Sessions on connections of a pool this driver opened."""

    def __init__(
        self, pool: AsyncPool[asyncpg.Connection[Any]], deadline: float | None = None
    ) -> None:
        self._pool = pool
        self._deadline = deadline

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """Borrow a session for the duration of the block."""
        async with self._pool.lease() as lease:
            session = AsyncpgSession(lease.connection, self._deadline)
            try:
                yield session
            finally:
                # A broken session's connection was terminated; the pool replaces it.
                lease.discard = session.broken

    async def close(self) -> None:
        """Close the connections this source opened."""
        await self._pool.close()


class _AdoptedConnection:
    """Sessions on the caller's connection, one task at a time."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """Borrow a session for the duration of the block."""
        async with self._lock:
            yield AsyncpgSession(self._conn)

    async def close(self) -> None:
        """Nothing to do: the connection is the caller's."""


class _AdoptedPool:
    """Sessions on connections borrowed from the caller's asyncpg pool."""

    def __init__(self, pool: Pool[asyncpg.Record]) -> None:
        self._pool = pool

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """Borrow a session for the duration of the block."""
        async with _pool_session(self._pool) as session:
            yield session

    async def close(self) -> None:
        """Nothing to do: the pool is the caller's."""


@asynccontextmanager
async def _pool_session(pool: Pool[asyncpg.Record]) -> AsyncIterator[AsyncpgSession]:
    conn = await pool.acquire()
    while not _quiet(conn):
        # Its server session ended while it sat idle (see .pool.quiet): replace it before a
        # statement is sent on it.
        _terminate(conn)
        # Bounded: after a lost connection asyncpg may wait for a cancellation that never
        # comes back; at the bound it terminates the connection instead.
        with suppress(Exception):
            await pool.release(conn, timeout=CLOSE_TIMEOUT)
        conn = await pool.acquire()
    session = AsyncpgSession(conn)
    try:
        yield session
    finally:
        if session.broken:
            _terminate(conn)  # the pool replaces a closed connection
        # The pool's reset fails when the backend died after the block's last statement;
        # asyncpg then terminates the connection and will replace it. What the block did
        # stands: its result, or its own error, must not be replaced by this one.
        with suppress(Exception):
            await pool.release(conn)


def _terminate(conn: Connection) -> None:
    # A pool's connection proxy refuses every call once terminating released it.
    with suppress(asyncpg.InterfaceError):
        if not conn.is_closed():
            conn.terminate()


def _reusable(conn: asyncpg.Connection[Any]) -> bool:
    """Open and not left inside a transaction. Nothing else needs resetting: alkstore's
    plans leave no session state behind (settings only ``SET LOCAL`` or
    ``set_config(..., true)``, advisory locks only ``pg_advisory_xact_lock``, no ``LISTEN``:
    listeners have connections of their own)."""
    return not conn.is_closed() and not conn.is_in_transaction()


async def _close(conn: asyncpg.Connection[Any]) -> None:
    # A graceful close waits for the server's answer, which may never come: bound it.
    try:
        await conn.close(timeout=CLOSE_TIMEOUT)
    except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
        conn.terminate()


def _quiet(conn: Connection) -> bool:
    transport = getattr(conn, "_transport", None)  # asyncpg exposes no public socket
    sock = transport.get_extra_info("socket") if transport is not None else None
    return sock is None or quiet(sock.fileno())


_LOST = None
"""What the termination callback queues: the connection is gone."""


class AsyncpgListener:
    """An :class:`~alkstore.drivers.base.AsyncListener` on an asyncpg connection of its own.

    asyncpg delivers notifications to a callback (``add_listener``), which queues them; a
    termination callback queues a marker, so a lost connection ends a ``wait`` at once.
    """

    def __init__(self, conn: asyncpg.Connection[Any]) -> None:
        self._conn = conn
        self._queue: asyncio.Queue[Notification | None] = asyncio.Queue()
        self._gone: str | None = None
        """Why waits now fail: closed, or the connection was lost."""
        conn.add_termination_listener(self._terminated)

    def _notified(self, _conn: object, _pid: int, channel: str, payload: object) -> None:
        self._queue.put_nowait(Notification(channel, str(payload)))

    def _terminated(self, _conn: object) -> None:
        self._queue.put_nowait(_LOST)

    async def listen(self, channel: str) -> None:
        """``LISTEN`` on ``channel`` (validated here; asyncpg quotes it)."""
        quote_ident(channel, "channel")
        self._check()
        try:
            await self._conn.add_listener(channel, self._notified)
        except (asyncpg.InterfaceError, OSError) as exc:
            if self._conn.is_closed():
                raise ListenerClosed(f"the listener's connection was lost: {exc}") from exc
            raise

    async def wait(self, timeout: float) -> list[Notification]:
        """Notifications as soon as one arrives, else ``[]`` after ``timeout`` seconds."""
        seconds = wait_timeout(timeout)
        self._check()
        items: list[Notification | None] = []
        if self._queue.empty():
            try:
                # asyncio.timeout, not wait_for (a task of its own on Python 3.11): the
                # listener runs one turn of the loop after a notification, not three.
                async with asyncio.timeout(seconds):
                    items.append(await self._queue.get())
            except TimeoutError:
                return []
        while not self._queue.empty():
            items.append(self._queue.get_nowait())
        received: list[Notification] = []
        for item in items:
            if item is _LOST:
                self._gone = self._gone or "the listener's connection was lost"
            else:
                received.append(item)
        if not received:
            self._check()
        return received  # a loss behind these notifications is raised by the next wait

    async def close(self) -> None:
        """Close the connection (again: nothing happens)."""
        self._gone = "the listener is closed"
        if self._conn.is_closed():
            return
        try:
            await self._conn.close(timeout=CLOSE_TIMEOUT)
        except (TimeoutError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
            self._conn.terminate()

    def _check(self) -> None:
        if self._gone is None and self._conn.is_closed():
            self._gone = "the listener's connection was lost"
        if self._gone is not None:
            raise ListenerClosed(self._gone)


class AsyncpgDriver:
    """The asyncpg driver."""

    name = "asyncpg"

    async def open(self, dsn: str, settings: DriverSettings) -> AsyncSource:
        """A pool of at most ``settings.pool_size`` connections (opened lazily)."""
        check_port(dsn)
        kwargs: dict[str, Any] = {}
        if not settings.prepared_statements:
            kwargs["statement_cache_size"] = 0
        setup = ";".join(settings.session_setup)
        # Bounded like the connect itself: a stalled network must not hang a borrow.
        bound = settings.call_timeout or settings.connect_timeout

        async def connect() -> asyncpg.Connection[Any]:
            conn: asyncpg.Connection[Any] = await asyncpg.connect(
                dsn,
                timeout=settings.connect_timeout,
                server_settings={"application_name": settings.application_name},
                **kwargs,
            )
            try:
                for name, value in settings.server_settings:
                    await conn.execute(SET_CONFIG, name, value, timeout=bound)
                if setup:
                    await conn.execute(setup, timeout=bound)
            except BaseException:
                conn.terminate()
                raise
            return conn

        pool = AsyncPool(connect, _close, _reusable, settings.pool_size, alive=_quiet)
        return _OpenedSource(pool, settings.call_timeout)

    def adopt(self, native: object) -> AsyncSource | None:
        """Wrap an ``asyncpg.Connection`` (or pool connection) or ``asyncpg.Pool``, else None."""
        # asyncpg.Connection's isinstance also accepts a connection acquired from a pool.
        if isinstance(native, asyncpg.Connection):
            return _AdoptedConnection(native)
        if isinstance(native, Pool):
            return _AdoptedPool(native)
        return None

    def error_info(self, exc: BaseException) -> ErrorInfo | None:
        """SQLSTATE and constraint name of an ``asyncpg.PostgresError``, else None."""
        if not isinstance(exc, asyncpg.PostgresError):
            return None
        return ErrorInfo(exc.sqlstate, exc.constraint_name)

    def disconnected(self, exc: BaseException) -> bool:
        """asyncpg's errors for a connection that failed or broke: a closed connection's
        ``InterfaceError``, the protocol's ``InternalClientError`` (a connection that died
        mid-message), and the connection errors without a SQLSTATE."""
        if isinstance(exc, asyncpg.InternalClientError | asyncpg.ConnectionDoesNotExistError):
            return True
        return isinstance(exc, asyncpg.InterfaceError) and "closed" in str(exc)

    def never_sent(self, exc: BaseException) -> bool:
        """asyncpg refused to start the statement: the connection was closed already, or its
        protocol was still busy with a dead session's last message."""
        text = str(exc)
        if isinstance(exc, asyncpg.InternalClientError):
            return text.startswith("cannot switch to state")
        return isinstance(exc, asyncpg.InterfaceError) and "connection is closed" in text

    async def open_listener(self, dsn: str, settings: DriverSettings) -> AsyncListener:
        """A listener on a new connection to ``dsn`` (not from a pool)."""
        conn: asyncpg.Connection[Any] = await asyncpg.connect(
            dsn,
            timeout=settings.connect_timeout,
            server_settings={"application_name": settings.application_name},
        )
        return AsyncpgListener(conn)


ASYNC = AsyncpgDriver()
"""The asyncpg driver."""

__all__ = ["ASYNC", "CLOSE_TIMEOUT", "AsyncpgDriver", "AsyncpgListener", "AsyncpgSession"]
