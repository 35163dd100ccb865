"""The protocols every driver implements.

A *session* is one database connection that executes :class:`~alkstore.core.plans.Statement`
objects (SQL with ``$1``-style placeholders; every value a bound parameter) and returns rows as
dicts. A *source* hands out sessions: a pool the driver opened from a DSN, or a connection or
pool the caller brought (so that ``send`` joins the caller's transaction).

Parameter values a driver must bind: ``None``, ``bool``, ``int``, ``float``, ``str``,
:class:`uuid.UUID`, aware :class:`datetime.datetime`, and lists of those (as arrays). The SQL
always casts every placeholder (``$1::uuid[]``, ``$2::text``), so a driver may send values
untyped. Rows come back with the driver's natural types; :mod:`alkstore.core.records` evens
them out.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import attrs

from ..core.errors import DriverUnavailable
from ..core.plans import Isolation, Row, Statement


@attrs.frozen(kw_only=True)
class DriverSettings:
    """How a driver opens connections for a store."""

    pool_size: int = 10
    """Most connections open at once (1 when the engine needs a single connection)."""
    prepared_statements: bool = True
    """Let the client library prepare statements (off for a PGlite session shared with clients
    the store does not know of)."""
    connect_timeout: float = 10.0
    """Seconds to wait for a connection."""
    server_settings: tuple[tuple[str, str], ...] = ()
    """Session settings (``statement_timeout``, ``lock_timeout``) every connection the driver
    opens sets with ``SELECT set_config($1, $2, false)`` (bound values) right after it
    connects: not as startup parameters, which PgBouncer refuses."""
    call_timeout: float | None = None
    """Seconds after which a statement on a connection the driver opened is abandoned, its
    connection discarded and :class:`~alkstore.DeadlineExceeded` raised (None: never)."""
    application_name: str = "alkstore"
    session_setup: tuple[str, ...] = ()
    """Constant statements (no parameters) run on every connection the driver opens, and
    again wherever the driver's pool resets a connection's session settings."""


SET_CONFIG = "SELECT set_config($1::text, $2::text, false)"
"""How a driver applies each of :attr:`DriverSettings.server_settings` (``$n`` placeholders;
psycopg's connection ``execute`` takes ``%s``)."""


@attrs.frozen
class ErrorInfo:
    """What a driver can tell of a database error: its SQLSTATE and constraint name."""

    sqlstate: str | None
    constraint: str | None


class SyncSession(Protocol):
    """One connection, used by one thread at a time."""

    def execute(self, statement: Statement) -> list[Row]:
        """Run one statement; its rows (:data:`~alkstore.core.plans.Row`), empty for statements
        without rows."""
        ...

    def transaction(self, isolation: Isolation | None = None) -> AbstractContextManager[None]:
        """A transaction (a savepoint when the caller's connection already has one open)."""
        ...

    def in_transaction(self) -> bool:
        """Whether statements run now join a transaction the caller owns: one is open on the
        connection, or (a connection not in autocommit mode) the next statement opens one that
        only the caller ends. Asked before a plan starts: any open transaction is the caller's."""
        ...


class AsyncSession(Protocol):
    """One connection, used by one task at a time."""

    async def execute(self, statement: Statement) -> list[Row]:
        """Run one statement; its rows (:data:`~alkstore.core.plans.Row`), empty for statements
        without rows."""
        ...

    def transaction(self, isolation: Isolation | None = None) -> AbstractAsyncContextManager[None]:
        """A transaction (a savepoint when the caller's connection already has one open)."""
        ...

    def in_transaction(self) -> bool:
        """Whether statements run now join a transaction the caller owns: one is open on the
        connection, or (a connection not in autocommit mode) the next statement opens one that
        only the caller ends. Asked before a plan starts: any open transaction is the caller's."""
        ...


class SyncSource(Protocol):
    """Hands out sessions; ``session()`` blocks while all are in use."""

    def session(self) -> AbstractContextManager[SyncSession]:
        """Borrow a session for the duration of the ``with`` block."""
        ...

    def close(self) -> None:
        """Close what this source opened (never a connection the caller brought)."""
        ...


class AsyncSource(Protocol):
    """Hands out sessions; ``session()`` waits while all are in use."""

    def session(self) -> AbstractAsyncContextManager[AsyncSession]:
        """Borrow a session for the duration of the ``async with`` block."""
        ...

    async def close(self) -> None:
        """Close what this source opened (never a connection the caller brought)."""
        ...


@runtime_checkable
class InProcessSource(Protocol):
    """A source whose database lives in this process (``memory://``): the engine runs on
    what the source opened, passed as its ``engine_options``."""

    def engine_options(self) -> Mapping[str, Any]:
        """The ``engine_options`` that configure the engine on this source's database."""
        ...


@attrs.frozen
class Notification:
    """One ``NOTIFY`` a listener received."""

    channel: str
    payload: str


class SyncListener(Protocol):
    """LISTEN/NOTIFY wake-ups on a dedicated autocommit connection (never a pooled one).

    A lost connection makes :meth:`wait` raise :class:`~alkstore.ListenerClosed`: no
    notification is lost silently, so the caller polls once and opens a new listener.
    """

    def listen(self, channel: str) -> None:
        """``LISTEN`` on ``channel`` (lowercase letters, digits, underscores; quoted)."""
        ...

    def wait(self, timeout: float) -> list[Notification]:
        """Notifications as soon as one arrives, else ``[]`` after ``timeout`` seconds; never
        blocks longer. :class:`~alkstore.ListenerClosed` once closed or lost."""
        ...

    def close(self) -> None:
        """Close the connection (again: nothing happens)."""
        ...


class AsyncListener(Protocol):
    """:class:`SyncListener`'s methods as coroutines."""

    async def listen(self, channel: str) -> None:
        """``LISTEN`` on ``channel`` (lowercase letters, digits, underscores; quoted)."""
        ...

    async def wait(self, timeout: float) -> list[Notification]:
        """Notifications as soon as one arrives, else ``[]`` after ``timeout`` seconds; never
        blocks longer. :class:`~alkstore.ListenerClosed` once closed or lost."""
        ...

    async def close(self) -> None:
        """Close the connection (again: nothing happens)."""
        ...


@runtime_checkable
class SyncDriver(Protocol):
    """A sync client library."""

    name: str

    def open(self, dsn: str, settings: DriverSettings) -> SyncSource:
        """A pool of at most ``settings.pool_size`` connections to ``dsn`` (opened lazily)."""
        ...

    def adopt(self, native: object) -> SyncSource | None:
        """Wrap a caller's connection or pool of this library, or None if it is not one."""
        ...

    def error_info(self, exc: BaseException) -> ErrorInfo | None:
        """SQLSTATE and constraint of a database error of this library, else None."""
        ...

    def open_listener(self, dsn: str, settings: DriverSettings) -> SyncListener:
        """A listener on a connection of its own (:class:`~alkstore.UnsupportedByDriver` where
        the library cannot wait for notifications)."""
        ...


@runtime_checkable
class AsyncDriver(Protocol):
    """An async client library."""

    name: str

    async def open(self, dsn: str, settings: DriverSettings) -> AsyncSource:
        """A pool of at most ``settings.pool_size`` connections to ``dsn``."""
        ...

    def adopt(self, native: object) -> AsyncSource | None:
        """Wrap a caller's connection or pool of this library, or None if it is not one."""
        ...

    def error_info(self, exc: BaseException) -> ErrorInfo | None:
        """SQLSTATE and constraint of a database error of this library, else None."""
        ...

    async def open_listener(self, dsn: str, settings: DriverSettings) -> AsyncListener:
        """A listener on a connection of its own (:class:`~alkstore.UnsupportedByDriver` where
        the library cannot wait for notifications)."""
        ...


CONNECTION_SQLSTATES = frozenset({"57P01", "57P02", "57P03"})
"""SQLSTATEs besides class 08 (connection exception) that mean the session is gone:
admin_shutdown (``pg_terminate_backend``, a fast shutdown), crash_shutdown, cannot_connect_now."""


def disconnected(driver: SyncDriver | AsyncDriver, exc: BaseException) -> bool:
    """Whether ``exc`` means the connection failed or died (rather than the server refusing a
    statement): an ``OSError``, a connection SQLSTATE, or whatever the driver's optional
    ``disconnected(exc)`` method recognises (its client library's own connection errors)."""
    if isinstance(exc, OSError | EOFError):
        return True
    check = getattr(driver, "disconnected", None)
    if check is not None and check(exc):
        return True
    info = driver.error_info(exc)
    state = info.sqlstate if info is not None else None
    return state is not None and (state.startswith("08") or state in CONNECTION_SQLSTATES)


def never_sent(driver: SyncDriver | AsyncDriver, exc: BaseException) -> bool:
    """Whether ``exc`` was raised before the statement left the client (the connection was
    known to be closed or broken already), per the driver's optional ``never_sent(exc)``."""
    check = getattr(driver, "never_sent", None)
    return bool(check is not None and check(exc))


@attrs.frozen(kw_only=True)
class DriverSpec:
    """A driver as the registry knows it, before its client library is imported.

    Registered under the ``alkstore.drivers`` entry-point group; the entry point's name is
    the *variant* the conformance suite runs (``psycopg`` and ``psycopg-async`` are one
    library's two faces), :attr:`name` what ``connect(driver=...)`` takes.
    """

    name: str
    """The name :func:`~alkstore.connect` (sync) or :func:`~alkstore.connect_async` takes."""
    is_async: bool
    """An :class:`AsyncDriver` (for :class:`~alkstore.AsyncStore`), else a :class:`SyncDriver`."""
    extra: str
    """The pip extra of :attr:`distribution` that installs the client library."""
    target: str
    """``module:attribute`` of the driver object (importing it imports the client library)."""
    distribution: str = "alkstore"
    """The distribution that declares :attr:`extra`."""

    @property
    def install(self) -> str:
        """The command that installs the client library."""
        return f'pip install "{self.distribution}[{self.extra}]"'

    def load(self) -> SyncDriver | AsyncDriver:
        """The driver object; :class:`~alkstore.DriverUnavailable` when its library is missing."""
        module, _, attr = self.target.partition(":")
        try:
            driver = getattr(importlib.import_module(module), attr)
        except ImportError as exc:  # also psycopg's "no pq wrapper available" (no libpq)
            if (exc.name or "").partition(".")[0] == "alkstore":
                raise  # our own module is missing: a broken install, not a missing extra
            raise DriverUnavailable(self.name, self.install) from exc
        expected = AsyncDriver if self.is_async else SyncDriver
        if not isinstance(driver, expected):
            raise TypeError(f"{self.target} is not a {expected.__name__}")
        return driver


__all__ = [
    "CONNECTION_SQLSTATES",
    "SET_CONFIG",
    "AsyncDriver",
    "AsyncListener",
    "AsyncSession",
    "AsyncSource",
    "DriverSettings",
    "DriverSpec",
    "ErrorInfo",
    "InProcessSource",
    "Notification",
    "SyncDriver",
    "SyncListener",
    "SyncSession",
    "SyncSource",
    "disconnected",
    "never_sent",
]
