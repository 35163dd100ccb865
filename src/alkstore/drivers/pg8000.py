"""The pg8000 driver: :data:`SYNC`.

Statements run through ``execute_unnamed``, the method every pg8000 connection class
(``pg8000.native.Connection``, ``pg8000.dbapi.Connection``, the legacy one) inherits from
``pg8000.core.CoreConnection``: it sends the SQL unchanged, so PostgreSQL's own ``$1``
placeholders work, repeated or not, and ``%`` is just a character. pg8000 sends every
parameter as text of unspecified type; the SQL's casts give them their types. Lists go as
array literals (``{…}``) built here with every element double-quoted and escaped (pg8000's
own leaves ``null`` in any case but ``NULL`` unquoted, which PostgreSQL reads as NULL), UUIDs
and datetimes as their text forms.

``execute_unnamed`` takes three round trips a statement (parse, describe, then bind and
execute, each ended by a Sync) and the server parses and plans it every time. On the
connections this driver opens, a statement run :data:`PREPARE_THRESHOLD` times is prepared
(``prepare_statement``) and then executed by name in one round trip (``execute_named``), as
psycopg does; at most :data:`PREPARED_MAX` a connection, the least recently used closed first.
``DriverSettings.prepared_statements`` off (PGlite, PgBouncer) keeps every statement unnamed, as
do connections adopted from the caller.

pg8000 has no pool, so connections opened from a DSN are pooled by :mod:`.pool`; it has no
DSN parser either (see :func:`.common.parse_dsn`) and no transaction helper (see
:func:`.common.transaction_sql`). Whether a connection is inside a transaction is read from
the status byte of the server's last ReadyForQuery message, which pg8000 keeps in the
private ``_transaction_status`` (its dbapi ``Connection`` reads it the same way); pg8000
offers no public way to ask.
"""

from __future__ import annotations

import struct
import threading
import weakref
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pg8000.converters
import pg8000.core
import pg8000.exceptions
import pg8000.native

from ..core.errors import DeadlineExceeded, UnsupportedByDriver
from ..core.plans import Isolation, Row, Statement
from .base import SET_CONFIG, DriverSettings, ErrorInfo, SyncListener, SyncSession, SyncSource
from .common import check_port, dsn_parameters, invalid_dsn, parse_dsn, transaction_sql
from .deadline import WATCHDOG
from .pool import SyncPool, quiet

Connection = Any  # pg8000 is untyped; any pg8000.core.CoreConnection

_IN_TRANSACTION = (b"T", b"E")  # ReadyForQuery: in a transaction block / in a failed one

PREPARE_THRESHOLD = 5
"""Runs of one SQL text on a connection before it is prepared there (psycopg's default)."""
PREPARED_MAX = 100
"""Statements prepared on one connection at most (psycopg's default)."""
_STALE = frozenset({"0A000", "26000"})
"""SQLSTATEs of a prepared statement that cannot run any more: its result type changed under
it (``cached plan must not change result type``), or it is gone."""


def _in_transaction(conn: Connection) -> bool:
    return getattr(conn, "_transaction_status", None) in _IN_TRANSACTION


def _is_open(conn: Connection) -> bool:
    return getattr(conn, "_usock", None) is not None


def _reusable(conn: Connection) -> bool:
    """Open and not left inside a transaction."""
    return _is_open(conn) and not _in_transaction(conn)


def _alive(conn: Connection) -> bool:
    """Its server session is still there (see :func:`.pool.quiet`)."""
    return quiet(conn._usock.fileno())


def _array_literal(values: list[Any]) -> str:
    """``values`` as a PostgreSQL array literal in which no string can be taken for NULL:
    every element is double-quoted (backslashes and quotes escaped), None alone is bare."""
    parts = []
    for value in values:
        if value is None:
            parts.append("NULL")
        elif isinstance(value, list):
            parts.append(_array_literal(value))
        else:
            text = pg8000.converters.make_param(pg8000.converters.PY_TYPES, value)
            parts.append('"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return "{" + ",".join(parts) + "}"


_LATEST = datetime.max.replace(tzinfo=UTC)
_EARLIEST = datetime.min.replace(tzinfo=UTC)


def _timestamptz_in(text: str) -> Any:
    """A ``timestamptz``'s text as a datetime, by ``datetime.fromisoformat`` (pg8000's own
    goes through ``strptime``: a third of a batch fetch's client time in issue 17's
    profile); what Python cannot hold (infinity, years beyond 9999; -infinity, BC) as the
    latest or earliest datetime in UTC, as the psycopg driver reads them."""
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        pass
    if text.startswith("-") or text.endswith(" BC"):
        return _EARLIEST
    if text == "infinity" or text.split("-", 1)[0].isdigit():
        return _LATEST  # a year of five digits or more
    return pg8000.converters.timestamptz_in(text)


def _params(params: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(_array_literal(p) if isinstance(p, list) else p for p in params)


class _Prepared:
    """The statements prepared on one connection this driver opened, by SQL text."""

    def __init__(self) -> None:
        self._runs: dict[str, int] = {}
        self._named: OrderedDict[str, tuple[bytes, Any, Any]] = OrderedDict()

    def execute(self, conn: Connection, sql: str, params: tuple[Any, ...]) -> Any:
        """Run ``sql``: by name once it has run :data:`PREPARE_THRESHOLD` times, else unnamed;
        pg8000's execution context."""
        named = self._named.get(sql)
        if named is None:
            runs = self._runs.get(sql, 0) + 1
            if runs < PREPARE_THRESHOLD:
                if len(self._runs) >= PREPARED_MAX * 10:
                    self._runs.clear()  # one-off statements do not pile up
                self._runs[sql] = runs
                return conn.execute_unnamed(sql, params)
            named = conn.prepare_statement(sql, ())
            self._runs.pop(sql, None)
            self._named[sql] = named
            if len(self._named) > PREPARED_MAX:
                _sql, (oldest, _columns, _funcs) = self._named.popitem(last=False)
                conn.close_prepared_statement(oldest)
        else:
            self._named.move_to_end(sql)
        name, columns, input_funcs = named
        values = pg8000.converters.make_params(conn.py_types, params)
        try:
            return conn.execute_named(name, values, columns, input_funcs, sql)
        except pg8000.exceptions.DatabaseError as exc:
            fields = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
            if fields.get("C") in _STALE:
                # Prepared again, under a new name, at its next run (psycopg fails such a
                # run too); the server may keep the old one until the connection closes.
                del self._named[sql]
            raise


_PREPARED: weakref.WeakKeyDictionary[Connection, _Prepared] = weakref.WeakKeyDictionary()
"""The prepared statements of each connection this driver opened with prepared statements on."""


class Pg8000Session:
    """A :class:`~alkstore.drivers.base.SyncSession` on one pg8000 connection."""

    def __init__(self, conn: Connection, deadline: float | None = None) -> None:
        self.connection = conn
        """The pg8000 connection statements run on."""
        self.broken = False
        """The connection failed below the SQL level; it must not be reused."""
        self.deadline = deadline
        """Seconds a statement may take before its connection is abandoned (None: no limit)."""

    def execute(self, statement: Statement) -> list[Row]:
        """Run one statement; rows as dicts (empty for statements without rows)."""
        conn = self.connection
        prepared = _PREPARED.get(conn)
        with self._guard():
            if getattr(conn, "autocommit", True) is False and not _in_transaction(conn):
                # A dbapi connection outside autocommit: begin as its own cursors would, so
                # the statement joins the caller's (implicit) transaction instead of committing.
                conn.execute_simple("BEGIN")
            params = _params(statement.params)
            if prepared is None:
                context = conn.execute_unnamed(statement.sql, params)
            else:
                context = prepared.execute(conn, statement.sql, params)
        if context.rows is None:
            return []
        names = [column["name"] for column in context.columns]
        return [dict(zip(names, row, strict=True)) for row in context.rows]

    def in_transaction(self) -> bool:
        """A transaction is open, or a dbapi connection is not autocommit (the caller's)."""
        conn = self.connection
        return _in_transaction(conn) or getattr(conn, "autocommit", True) is False

    @contextmanager
    def transaction(self, isolation: Isolation | None = None) -> Iterator[None]:
        """A transaction (a savepoint when the connection already has one open)."""
        sql = transaction_sql(isolation, nested=_in_transaction(self.connection))
        self._simple(sql.begin)
        try:
            yield
        except BaseException:
            try:
                for rollback in sql.rollback:
                    self._simple(rollback)
            except BaseException:
                self.broken = True
            raise
        self._simple(sql.commit)

    def _simple(self, sql: str) -> None:
        with self._guard():
            self.connection.execute_simple(sql)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        # A DatabaseError is the server's answer and leaves the connection usable; anything
        # else (network error, protocol confusion, interrupt) leaves it in an unknown state.
        fd = self.connection._usock.fileno() if self.deadline is not None else -1
        with WATCHDOG.guard(fd, self.deadline) as armed:
            try:
                yield
            except pg8000.exceptions.DatabaseError:
                raise
            except BaseException as exc:
                self.broken = True
                if armed.fired and isinstance(exc, Exception):
                    raise DeadlineExceeded(
                        f"no answer within {self.deadline:g}s: the connection was abandoned "
                        "and the outcome is unknown"
                    ) from exc
                raise


class _OpenedSource:
    """Sessions from a pool this driver opened."""

    def __init__(self, pool: SyncPool[Connection], deadline: float | None = None) -> None:
        self._pool = pool
        self._deadline = deadline

    @contextmanager
    def session(self) -> Iterator[SyncSession]:
        """Borrow a session for the duration of the block."""
        with self._pool.lease() as lease:
            session = Pg8000Session(lease.connection, self._deadline)
            try:
                yield session
            finally:
                lease.discard = session.broken

    def close(self) -> None:
        """Close the connections this source opened."""
        self._pool.close()


class _AdoptedConnection:
    """Sessions on the caller's connection, one thread at a time."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()

    @contextmanager
    def session(self) -> Iterator[SyncSession]:
        """Borrow a session for the duration of the block."""
        with self._lock:
            yield Pg8000Session(self._conn)

    def close(self) -> None:
        """Nothing to do: the connection is the caller's."""


def _ssl_context(sslmode: str | None) -> bool | None:
    # pg8000: None tries TLS and falls back to plain, True requires TLS (unverified),
    # False never tries.
    if sslmode == "disable":
        return False
    if sslmode in ("require", "verify-ca", "verify-full"):
        return True
    return None


_NOT_STARTUP = frozenset(
    {"host", "hostaddr", "port", "user", "password", "dbname", "sslmode", "connect_timeout"}
    | {"application_name", "sslrootcert", "sslcert", "sslkey", "target_session_attrs"}
)
"""DSN parameters that are libpq's own, not server settings."""


def _startup_params(dsn: str) -> dict[str, str]:
    """What libpq would send at startup and pg8000 would not on its own: the DSN's
    ``options`` (and server settings given as parameters)."""
    return {k: v for k, v in dsn_parameters(dsn).items() if k not in _NOT_STARTUP}


class Pg8000Driver:
    """The pg8000 driver."""

    name = "pg8000"

    def open(self, dsn: str, settings: DriverSettings) -> SyncSource:
        """A pool of at most ``settings.pool_size`` connections (opened lazily).

        pg8000 connections run each statement in its own transaction unless one is open.
        """
        check_port(dsn)
        try:
            params = parse_dsn(dsn)
        except ValueError as exc:
            raise invalid_dsn(dsn, exc) from None
        if params.sslmode in ("verify-ca", "verify-full"):
            raise ValueError("the pg8000 driver cannot verify server certificates (sslmode)")
        startup = _startup_params(dsn)

        def connect() -> Connection:
            conn = pg8000.native.Connection(
                user=params.user,
                host=params.host,
                port=params.port,
                password=params.password,
                database=params.database,
                application_name=settings.application_name,
                ssl_context=_ssl_context(params.sslmode),
                timeout=settings.connect_timeout,
                startup_params=startup,
            )
            conn.register_in_adapter(pg8000.converters.TIMESTAMPTZ, _timestamptz_in)
            try:
                for name, value in settings.server_settings:
                    conn.execute_unnamed(SET_CONFIG, (name, value))
                for sql in settings.session_setup:
                    conn.run(sql)
            except BaseException:
                conn.close()
                raise
            # pg8000's timeout is the socket's, for the connection's whole life; it is meant
            # for connecting (and the setup) only: a statement's deadline is the session's
            # (WATCHDOG).
            conn._usock.settimeout(None)
            if settings.prepared_statements:
                _PREPARED[conn] = _Prepared()
            return conn

        def close(conn: Connection) -> None:
            if _is_open(conn):
                conn.close()

        pool = SyncPool(connect, close, _reusable, settings.pool_size, alive=_alive)
        return _OpenedSource(pool, settings.call_timeout)

    def adopt(self, native: object) -> SyncSource | None:
        """Wrap a pg8000 connection (native, dbapi or legacy), else None."""
        if isinstance(native, pg8000.core.CoreConnection):
            return _AdoptedConnection(native)
        return None

    def error_info(self, exc: BaseException) -> ErrorInfo | None:
        """SQLSTATE (``C``) and constraint (``n``) of a ``pg8000.DatabaseError``, else None."""
        if not isinstance(exc, pg8000.exceptions.DatabaseError):
            return None
        fields = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else {}
        return ErrorInfo(fields.get("C"), fields.get("n"))

    def disconnected(self, exc: BaseException) -> bool:
        """pg8000's ``InterfaceError`` (a network error, a closed connection) or a truncated
        message (``struct.error``)."""
        return isinstance(exc, pg8000.exceptions.InterfaceError | struct.error)

    def never_sent(self, exc: BaseException) -> bool:
        """pg8000 refused to send: the connection was closed already."""
        return isinstance(exc, pg8000.exceptions.InterfaceError) and exc.args == (
            "connection is closed",
        )

    def open_listener(self, dsn: str, settings: DriverSettings) -> SyncListener:
        """Refused: pg8000 reads notifications only while answering a query, so it cannot
        wait for one."""
        raise UnsupportedByDriver(
            self.name, "wait for LISTEN/NOTIFY notifications", "use psycopg or asyncpg, or poll"
        )


SYNC = Pg8000Driver()
"""The pg8000 driver."""

__all__ = ["SYNC", "Pg8000Driver", "Pg8000Session"]
