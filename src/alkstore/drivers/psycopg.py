"""The psycopg 3 drivers: :data:`SYNC` and :data:`ASYNC`.

Statements run on a ``RawCursor`` (psycopg ≥ 3.2), which sends the SQL to the server as it is,
with PostgreSQL's own ``$1`` placeholders: no rewriting to ``%s``, a placeholder may appear
more than once, and a literal ``%`` needs no escaping. Parameters are bound server-side and
psycopg prepares statements it sees often (``prepare_threshold``), unless
``DriverSettings.prepared_statements`` is off. Lists are bound and rows come back in the
binary format: PostgreSQL's binary output of timestamps and uuids costs the server less than
text, and psycopg parses it faster.

Connections opened from a DSN are autocommit and pooled by :mod:`.pool` (see there why not
psycopg_pool). A caller's connection is used as it is: its autocommit setting is never
changed and it is never committed outside a ``transaction()`` block, so statements join the
caller's transaction. Connections borrowed from a caller's psycopg_pool pool are switched to
autocommit while borrowed (and back before they are returned), so that statements outside a
``transaction()`` block commit on their own as they do on an opened pool.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import math
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import psycopg
from psycopg.adapt import AdaptersMap, Loader
from psycopg.pq import ExecStatus, Format, TransactionStatus
from psycopg.rows import BaseRowFactory, RowMaker, dict_row
from psycopg.types.array import ListBinaryDumper
from psycopg.types.datetime import TimestamptzBinaryLoader, TimestamptzLoader

from ..core.errors import DeadlineExceeded, ListenerClosed
from ..core.plans import Isolation, Row, Statement
from .base import (
    SET_CONFIG,
    AsyncListener,
    AsyncSession,
    AsyncSource,
    DriverSettings,
    ErrorInfo,
    Notification,
    SyncListener,
    SyncSession,
    SyncSource,
)
from .common import check_port, listen_sql, set_isolation_sql, wait_timeout
from .deadline import WATCHDOG, Armed
from .pool import AsyncPool, SyncPool, quiet

SyncConnection = psycopg.Connection[Any]
AsyncConnection = psycopg.AsyncConnection[Any]


def _connect_kwargs(settings: DriverSettings) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        "autocommit": True,
        # libpq counts whole seconds (and at least 2); round up so the deadline is never short.
        "connect_timeout": max(1, math.ceil(settings.connect_timeout)),
        "application_name": settings.application_name,
    }
    if not settings.prepared_statements:
        kwargs["prepare_threshold"] = None
    return kwargs


class _Deadline:
    """Abandon the connection if the block outlives ``seconds`` (see :mod:`.deadline`); a
    class rather than a generator context manager, as it wraps every statement."""

    __slots__ = ("armed", "conn", "seconds")

    def __init__(self, conn: SyncConnection | AsyncConnection, seconds: float | None) -> None:
        self.conn = conn
        self.seconds = seconds
        self.armed: Armed | None = None

    def __enter__(self) -> None:
        if self.seconds is not None:
            self.armed = WATCHDOG.arm(self.conn.pgconn.socket, self.seconds)

    def __exit__(self, kind: Any, exc: BaseException | None, _tb: Any) -> None:
        armed = self.armed
        if armed is None:
            return
        WATCHDOG.disarm(armed)
        if armed.fired and isinstance(exc, psycopg.Error):
            raise DeadlineExceeded(
                f"no answer within {self.seconds:g}s: the connection was abandoned and the "
                "outcome is unknown"
            ) from exc


_SET_CONFIG = SET_CONFIG.replace("$1", "%s").replace("$2", "%s")
""":data:`~.base.SET_CONFIG` in the placeholders of psycopg's ``Connection.execute``."""


_LATEST = dt.datetime.max.replace(tzinfo=dt.UTC)
_EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC)


class _LatestTimestamptzLoader(Loader):
    """A timestamptz near the end of year 9999 (the time reads give a flow job still waiting)
    shown in a session time zone east of UTC falls in year 10000, which Python cannot hold:
    read it as ``datetime.max`` in UTC. Behind a transaction pooler the session is the
    server's, not UTC.

    It wraps psycopg's own loader (its C one, with the binary package) rather than
    subclassing the pure-Python class, which psycopg would not swap for the C one: a
    subclass cost 1.3 µs a value against 0.5, paid for every fetched job's ``created_on``."""

    format = Format.TEXT

    def __init__(self, oid: int, context: Any = None) -> None:
        super().__init__(oid, context)
        self._load = _PSYCOPG_TIMESTAMPTZ[self.format](oid, context).load

    def load(self, data: Any) -> dt.datetime:
        try:
            loaded: dt.datetime = self._load(data)
        except psycopg.DataError as exc:
            if _after_year_9999(data, exc):
                return _LATEST
            if "before year 1" in str(exc) or bytes(data).startswith(b"-infinity"):
                return _EARLIEST  # -infinity, or BC: a row planted past validation
            raise
        return loaded


class _LatestTimestamptzBinaryLoader(_LatestTimestamptzLoader):
    """:class:`_LatestTimestamptzLoader` for the binary format."""

    format = Format.BINARY


def _psycopg_timestamptz() -> dict[Format, type[psycopg.abc.Loader]]:
    """psycopg's own timestamptz loaders, as psycopg itself would pick them (its C ones with
    the binary package): registered on a map of their own, so that a loader an application
    registered on psycopg's global map is not the one wrapped."""
    adapters = AdaptersMap(types=psycopg.postgres.types)
    found = {}
    for loader in (TimestamptzLoader, TimestamptzBinaryLoader):
        adapters.register_loader("timestamptz", loader)
        picked = adapters.get_loader(psycopg.postgres.types["timestamptz"].oid, loader.format)
        assert picked is not None  # just registered
        found[loader.format] = picked
    return found


_PSYCOPG_TIMESTAMPTZ = _psycopg_timestamptz()


def _after_year_9999(data: Any, exc: psycopg.DataError) -> bool:
    return bytes(data).startswith(b"10000-") or "after year 10K" in str(exc)


def _bind_lists_in_binary(owner: Any) -> None:
    """Bind lists as binary arrays on ``owner`` (a connection or a cursor): psycopg's text
    array dumper escapes every element with a regular expression, which cost more client
    time than the rest of a 1,000-job ``send``. Connections this driver opens get it once; on
    a caller's connection it is set per cursor, so the connection keeps its configuration.
    The timestamptz loaders that read the latest time in any session time zone go with it."""
    owner.adapters.register_dumper(list, ListBinaryDumper)
    owner.adapters.register_loader("timestamptz", _LatestTimestamptzLoader)
    owner.adapters.register_loader("timestamptz", _LatestTimestamptzBinaryLoader)


def _has_rows(cur: psycopg.RawCursor[Any] | psycopg.AsyncRawCursor[Any]) -> bool:
    """The statement returned a row set (``cur.description`` would tell too, but it builds a
    column object per result column on every call: most of a one-row fetch's client time)."""
    result = cur.pgresult
    return result is not None and result.status == ExecStatus.TUPLES_OK


@functools.lru_cache(maxsize=1024)
def _dict_rows(sql: str) -> BaseRowFactory[Row]:
    """psycopg's ``dict_row`` for the statement ``sql``, its column names decoded once, not
    per execution: a statement's text fixes its result columns (alkstore names every column
    it selects, never a table's ``*``), and decoding a one-job fetch's names was a tenth of
    its client time. One factory per statement text; a result whose column count differs
    from the names kept is read afresh."""
    names: list[str] = []

    def factory(cursor: Any) -> RowMaker[Row]:
        nonlocal names
        result = cursor.pgresult
        if result is None or result.status != ExecStatus.TUPLES_OK:
            return dict_row(cursor)
        if len(names) != result.nfields:
            encoding = cursor.connection.info.encoding
            names = [result.fname(i).decode(encoding) for i in range(result.nfields)]
        columns = names

        def make(values: Any) -> Row:
            return dict(zip(columns, values))  # noqa: B905 (nfields checked above)

        return make

    return factory


def _in_transaction(conn: SyncConnection | AsyncConnection) -> bool:
    return not conn.autocommit or conn.info.transaction_status != TransactionStatus.IDLE


def _reusable(conn: SyncConnection | AsyncConnection) -> bool:
    """Open, not broken, and not left inside a transaction."""
    return (
        not conn.closed
        and not conn.broken
        and conn.info.transaction_status == TransactionStatus.IDLE
    )


def _alive(conn: SyncConnection | AsyncConnection) -> bool:
    """Its server session is still there (see :func:`.pool.quiet`)."""
    return quiet(conn.pgconn.socket)


def _never_sent(exc: BaseException) -> bool:
    return isinstance(exc, psycopg.OperationalError) and str(exc) == "the connection is closed"


def _disconnected(exc: BaseException) -> bool:
    # psycopg raises OperationalError without a SQLSTATE when the connection failed or broke
    # ("server closed the connection unexpectedly", "the connection is closed", ...).
    return isinstance(exc, psycopg.OperationalError) and exc.sqlstate is None


# --- sync ---------------------------------------------------------------------------------


class PsycopgSession:
    """A :class:`~alkstore.drivers.base.SyncSession` on one psycopg connection."""

    def __init__(
        self, conn: SyncConnection, *, opened: bool = False, deadline: float | None = None
    ) -> None:
        self.connection = conn
        """The psycopg connection statements run on."""
        self.opened = opened
        """Whether the driver opened the connection (and so configured it already)."""
        self.deadline = deadline
        """Seconds a statement may take before its connection is abandoned (None: no limit)."""

    def execute(self, statement: Statement) -> list[Row]:
        """Run one statement; rows as dicts (empty for statements without rows)."""
        with (
            _Deadline(self.connection, self.deadline),
            psycopg.RawCursor(self.connection, row_factory=_dict_rows(statement.sql)) as cur,
        ):
            if not self.opened:
                _bind_lists_in_binary(cur)
            cur.execute(statement.sql, statement.params, binary=True)
            if not _has_rows(cur):
                return []
            return cur.fetchall()

    def in_transaction(self) -> bool:
        """A transaction is open, or the connection is not autocommit (the caller's)."""
        return _in_transaction(self.connection)

    @contextmanager
    def transaction(self, isolation: Isolation | None = None) -> Iterator[None]:
        """A transaction (a savepoint when the connection already has one open); its begin
        and its end each within the deadline, the block between them as long as it takes."""
        conn = self.connection
        nested = conn.info.transaction_status != TransactionStatus.IDLE
        tx = conn.transaction()
        with _Deadline(conn, self.deadline):
            tx.__enter__()
            if isolation is not None and not nested:
                conn.execute(set_isolation_sql(isolation))
        try:
            yield
        except BaseException as exc:
            with _Deadline(conn, self.deadline):
                if not tx.__exit__(type(exc), exc, exc.__traceback__):
                    raise
        else:
            with _Deadline(conn, self.deadline):
                tx.__exit__(None, None, None)


class _OpenedSource:
    """Sessions from a pool this driver opened."""

    def __init__(self, pool: SyncPool[SyncConnection], deadline: float | None = None) -> None:
        self._pool = pool
        self._deadline = deadline

    @contextmanager
    def session(self) -> Iterator[SyncSession]:
        """Borrow a session for the duration of the block."""
        with self._pool.lease() as lease:
            yield PsycopgSession(lease.connection, opened=True, deadline=self._deadline)

    def close(self) -> None:
        """Close the connections this source opened."""
        self._pool.close()


class _AdoptedConnection:
    """Sessions on the caller's connection, one thread at a time."""

    def __init__(self, conn: SyncConnection) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    @contextmanager
    def session(self) -> Iterator[SyncSession]:
        """Borrow a session for the duration of the block."""
        with self._lock:
            yield PsycopgSession(self._conn)

    def close(self) -> None:
        """Nothing to do: the connection is the caller's."""


class _AdoptedPool:
    """Sessions on connections borrowed from the caller's psycopg_pool pool."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    @contextmanager
    def session(self) -> Iterator[SyncSession]:
        """Borrow a session for the duration of the block."""
        conn: SyncConnection
        with self._pool.connection() as conn:
            switched = not conn.autocommit
            if switched:
                conn.autocommit = True
            try:
                yield PsycopgSession(conn)
            finally:
                if switched:
                    if _reusable(conn) and _alive(conn):
                        conn.autocommit = False
                    elif not conn.closed:
                        conn.close()  # the pool replaces a closed connection

    def close(self) -> None:
        """Nothing to do: the pool is the caller's."""


class PsycopgListener:
    """A :class:`~alkstore.drivers.base.SyncListener` on a psycopg connection of its own.

    ``Connection.notifies(timeout=..., stop_after=1)`` (psycopg ≥ 3.2) returns as soon as a
    notification arrives, or at the deadline; those that arrived in between are kept by
    psycopg and come back first.
    """

    def __init__(self, conn: SyncConnection) -> None:
        self._conn = conn

    def listen(self, channel: str) -> None:
        """``LISTEN`` on ``channel``."""
        sql = listen_sql(channel)
        with _lost(self._conn):
            self._conn.execute(sql)

    def wait(self, timeout: float) -> list[Notification]:
        """Notifications as soon as one arrives, else ``[]`` after ``timeout`` seconds."""
        seconds = wait_timeout(timeout)
        with _lost(self._conn):
            notifies = self._conn.notifies(timeout=seconds, stop_after=1)
            return [Notification(n.channel, n.payload) for n in notifies]

    def close(self) -> None:
        """Close the connection (again: nothing happens)."""
        self._conn.close()


class PsycopgSyncDriver:
    """The psycopg 3 sync driver."""

    name = "psycopg"

    def open(self, dsn: str, settings: DriverSettings) -> SyncSource:
        """A pool of at most ``settings.pool_size`` autocommit connections (opened lazily)."""
        check_port(dsn)
        kwargs = _connect_kwargs(settings)

        def connect() -> SyncConnection:
            conn = psycopg.Connection.connect(dsn, **kwargs)
            _bind_lists_in_binary(conn)
            try:
                with _Deadline(conn, settings.call_timeout or settings.connect_timeout):
                    for name, value in settings.server_settings:
                        conn.execute(_SET_CONFIG, (name, value))
                    for sql in settings.session_setup:
                        conn.execute(sql)
            except BaseException:
                conn.close()
                raise
            return conn

        def close(conn: SyncConnection) -> None:
            conn.close()

        pool = SyncPool(connect, close, _reusable, settings.pool_size, alive=_alive)
        return _OpenedSource(pool, settings.call_timeout)

    def adopt(self, native: object) -> SyncSource | None:
        """Wrap a ``psycopg.Connection`` or a ``psycopg_pool.ConnectionPool``, else None."""
        if isinstance(native, psycopg.Connection):
            return _AdoptedConnection(native)
        pool_class = _pool_class("ConnectionPool")
        if pool_class is not None and isinstance(native, pool_class):
            return _AdoptedPool(native)
        return None

    def error_info(self, exc: BaseException) -> ErrorInfo | None:
        """SQLSTATE and constraint name of a ``psycopg.DatabaseError``, else None."""
        return _error_info(exc)

    def disconnected(self, exc: BaseException) -> bool:
        """psycopg's error for a connection that failed or broke."""
        return _disconnected(exc)

    def never_sent(self, exc: BaseException) -> bool:
        """psycopg refused to send: the connection was closed already."""
        return _never_sent(exc)

    def open_listener(self, dsn: str, settings: DriverSettings) -> SyncListener:
        """A listener on a new autocommit connection to ``dsn``."""
        return PsycopgListener(psycopg.Connection.connect(dsn, **_connect_kwargs(settings)))


# --- async --------------------------------------------------------------------------------


class AsyncPsycopgSession:
    """An :class:`~alkstore.drivers.base.AsyncSession` on one psycopg async connection."""

    def __init__(
        self, conn: AsyncConnection, *, opened: bool = False, deadline: float | None = None
    ) -> None:
        self.connection = conn
        """The psycopg connection statements run on."""
        self.opened = opened
        """Whether the driver opened the connection (and so configured it already)."""
        self.deadline = deadline
        """Seconds a statement may take before its connection is abandoned (None: no limit)."""

    async def execute(self, statement: Statement) -> list[Row]:
        """Run one statement; rows as dicts (empty for statements without rows)."""
        with _Deadline(self.connection, self.deadline):
            async with psycopg.AsyncRawCursor(
                self.connection, row_factory=_dict_rows(statement.sql)
            ) as cur:
                if not self.opened:
                    _bind_lists_in_binary(cur)
                await cur.execute(statement.sql, statement.params, binary=True)
                if not _has_rows(cur):
                    return []
                return await cur.fetchall()

    def in_transaction(self) -> bool:
        """A transaction is open, or the connection is not autocommit (the caller's)."""
        return _in_transaction(self.connection)

    @asynccontextmanager
    async def transaction(self, isolation: Isolation | None = None) -> AsyncIterator[None]:
        """A transaction (a savepoint when the connection already has one open); see
        :meth:`PsycopgSession.transaction`."""
        conn = self.connection
        nested = conn.info.transaction_status != TransactionStatus.IDLE
        tx = conn.transaction()
        with _Deadline(conn, self.deadline):
            await tx.__aenter__()
            if isolation is not None and not nested:
                await conn.execute(set_isolation_sql(isolation))
        try:
            yield
        except BaseException as exc:
            with _Deadline(conn, self.deadline):
                if not await tx.__aexit__(type(exc), exc, exc.__traceback__):
                    raise
        else:
            with _Deadline(conn, self.deadline):
                await tx.__aexit__(None, None, None)


class _AsyncOpenedSource:
    """Sessions from a pool this driver opened."""

    def __init__(self, pool: AsyncPool[AsyncConnection], deadline: float | None = None) -> None:
        self._pool = pool
        self._deadline = deadline

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """Borrow a session for the duration of the block."""
        async with self._pool.lease() as lease:
            yield AsyncPsycopgSession(lease.connection, opened=True, deadline=self._deadline)

    async def close(self) -> None:
        """Close the connections this source opened."""
        await self._pool.close()


class _AsyncAdoptedConnection:
    """Sessions on the caller's connection, one task at a time."""

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn
        self._lock = asyncio.Lock()

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """Borrow a session for the duration of the block."""
        async with self._lock:
            yield AsyncPsycopgSession(self._conn)

    async def close(self) -> None:
        """Nothing to do: the connection is the caller's."""


class _AsyncAdoptedPool:
    """Sessions on connections borrowed from the caller's psycopg_pool async pool."""

    def __init__(self, pool: Any) -> None:
        self._pool = pool

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """Borrow a session for the duration of the block."""
        conn: AsyncConnection
        async with self._pool.connection() as conn:
            switched = not conn.autocommit
            if switched:
                await conn.set_autocommit(True)
            try:
                yield AsyncPsycopgSession(conn)
            finally:
                if switched:
                    if _reusable(conn) and _alive(conn):
                        await conn.set_autocommit(False)
                    elif not conn.closed:
                        await conn.close()  # the pool replaces a closed connection

    async def close(self) -> None:
        """Nothing to do: the pool is the caller's."""


class AsyncPsycopgListener:
    """An :class:`~alkstore.drivers.base.AsyncListener` on a psycopg connection of its own;
    see :class:`PsycopgListener`."""

    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def listen(self, channel: str) -> None:
        """``LISTEN`` on ``channel``."""
        sql = listen_sql(channel)
        with _lost(self._conn):
            await self._conn.execute(sql)

    async def wait(self, timeout: float) -> list[Notification]:
        """Notifications as soon as one arrives, else ``[]`` after ``timeout`` seconds."""
        seconds = wait_timeout(timeout)
        with _lost(self._conn):
            notifies = self._conn.notifies(timeout=seconds, stop_after=1)
            return [Notification(n.channel, n.payload) async for n in notifies]

    async def close(self) -> None:
        """Close the connection (again: nothing happens)."""
        await self._conn.close()


class PsycopgAsyncDriver:
    """The psycopg 3 async driver."""

    name = "psycopg"

    async def open(self, dsn: str, settings: DriverSettings) -> AsyncSource:
        """A pool of at most ``settings.pool_size`` autocommit connections (opened lazily)."""
        check_port(dsn)
        kwargs = _connect_kwargs(settings)

        async def connect() -> AsyncConnection:
            conn = await psycopg.AsyncConnection.connect(dsn, **kwargs)
            _bind_lists_in_binary(conn)
            try:
                with _Deadline(conn, settings.call_timeout or settings.connect_timeout):
                    for name, value in settings.server_settings:
                        await conn.execute(_SET_CONFIG, (name, value))
                    for sql in settings.session_setup:
                        await conn.execute(sql)
            except BaseException:
                await conn.close()
                raise
            return conn

        async def close(conn: AsyncConnection) -> None:
            await conn.close()

        pool = AsyncPool(connect, close, _reusable, settings.pool_size, alive=_alive)
        return _AsyncOpenedSource(pool, settings.call_timeout)

    def adopt(self, native: object) -> AsyncSource | None:
        """Wrap a ``psycopg.AsyncConnection`` or ``psycopg_pool.AsyncConnectionPool``, else None."""
        if isinstance(native, psycopg.AsyncConnection):
            return _AsyncAdoptedConnection(native)
        pool_class = _pool_class("AsyncConnectionPool")
        if pool_class is not None and isinstance(native, pool_class):
            return _AsyncAdoptedPool(native)
        return None

    def error_info(self, exc: BaseException) -> ErrorInfo | None:
        """SQLSTATE and constraint name of a ``psycopg.DatabaseError``, else None."""
        return _error_info(exc)

    def disconnected(self, exc: BaseException) -> bool:
        """psycopg's error for a connection that failed or broke."""
        return _disconnected(exc)

    def never_sent(self, exc: BaseException) -> bool:
        """psycopg refused to send: the connection was closed already."""
        return _never_sent(exc)

    async def open_listener(self, dsn: str, settings: DriverSettings) -> AsyncListener:
        """A listener on a new autocommit connection to ``dsn``."""
        conn = await psycopg.AsyncConnection.connect(dsn, **_connect_kwargs(settings))
        return AsyncPsycopgListener(conn)


# --- shared -------------------------------------------------------------------------------


def _pool_class(name: str) -> type | None:
    try:
        import psycopg_pool
    except ImportError:  # psycopg_pool is optional: without it nobody can bring a pool
        return None
    cls = getattr(psycopg_pool, name)
    assert isinstance(cls, type)
    return cls


@contextmanager
def _lost(conn: SyncConnection | AsyncConnection) -> Iterator[None]:
    """Raise :class:`ListenerClosed` on a closed connection, or one that broke in the block."""
    if conn.closed:
        raise ListenerClosed("the listener is closed")
    try:
        yield
    except psycopg.Error as exc:
        if conn.closed or conn.broken:
            raise ListenerClosed(f"the listener's connection was lost: {exc}") from exc
        raise


def _error_info(exc: BaseException) -> ErrorInfo | None:
    if not isinstance(exc, psycopg.DatabaseError):
        return None
    return ErrorInfo(exc.sqlstate, exc.diag.constraint_name)


SYNC = PsycopgSyncDriver()
"""The psycopg 3 sync driver."""
ASYNC = PsycopgAsyncDriver()
"""The psycopg 3 async driver."""

__all__ = [
    "ASYNC",
    "SYNC",
    "AsyncPsycopgListener",
    "AsyncPsycopgSession",
    "PsycopgAsyncDriver",
    "PsycopgListener",
    "PsycopgSession",
    "PsycopgSyncDriver",
]
