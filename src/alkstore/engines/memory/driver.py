"""The in-memory engine's driver: sessions that hold the database's lock.

The driver registry (:func:`alkstore.drivers.scheme_driver`) picks it for a ``memory://``
URI, and ``connect`` configures the memory engine on the database its source opened
(:meth:`MemorySource.engine_options`), as for any driver and engine: nothing here knows the
store. It satisfies the driver protocols of :mod:`alkstore.drivers.base` structurally.

There is no connection: a session is the database's lock, held while one plan runs (so an
operation made of several plans' steps, like ``upsert``, is atomic), and a plan that asks for
a transaction has every change of the block undone when it raises. A statement of SQL is
refused with :class:`~alkstore.UnsupportedByEngine`, and so is a caller's connection
(``store.using(conn)``): there is no transaction of the caller's to join.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from ...core.errors import UnsupportedByDriver, UnsupportedByEngine
from ...core.plans import Isolation, Row, Statement
from .database import MemoryDatabase, attach, database_name, detach
from .engine import NO_SQL

NAME = "memory"
"""The driver's name (``connect`` picks it for a ``memory://`` URI; no other applies)."""


class MemorySession:
    """The database's lock, held; runs no SQL."""

    def __init__(self, database: MemoryDatabase) -> None:
        self.database = database

    def execute(self, statement: Statement) -> list[Row]:
        """Refused: the in-memory engine has no SQL."""
        raise UnsupportedByEngine(NAME, "sql", NO_SQL)

    def transaction(
        self, isolation: Isolation | None = None
    ) -> contextlib.AbstractContextManager[None]:
        """Every change of the block undone when it raises."""
        return self.database.transaction()

    def in_transaction(self) -> bool:
        """Never: no caller's transaction exists."""
        return False


class AsyncMemorySession:
    """:class:`MemorySession` for the async face."""

    def __init__(self, database: MemoryDatabase) -> None:
        self.database = database

    async def execute(self, statement: Statement) -> list[Row]:
        """Refused: the in-memory engine has no SQL."""
        raise UnsupportedByEngine(NAME, "sql", NO_SQL)

    @contextlib.asynccontextmanager
    async def transaction(self, isolation: Isolation | None = None) -> AsyncIterator[None]:
        """Every change of the block undone when it raises."""
        with self.database.transaction():
            yield

    def in_transaction(self) -> bool:
        """Never: no caller's transaction exists."""
        return False


class MemorySource:
    """Hands out the one session of a memory database (threads take turns)."""

    def __init__(self, database: MemoryDatabase) -> None:
        self.database = database
        self._closed = False

    def engine_options(self) -> Mapping[str, Any]:
        """The memory engine's ``engine_options``: the database this source opened."""
        return {"database": self.database}

    @contextlib.contextmanager
    def session(self) -> Iterator[MemorySession]:
        """The database's lock for the block."""
        with self.database.lock:
            yield MemorySession(self.database)

    def close(self) -> None:
        """Let go of the database (a named one is forgotten with its last store)."""
        if not self._closed:
            self._closed = True
            detach(self.database)


class AsyncMemorySource:
    """:class:`MemorySource` for the async face. The lock is held only while a plan's steps
    run, which never await: no other task can interleave."""

    def __init__(self, database: MemoryDatabase) -> None:
        self.database = database
        self._closed = False

    def engine_options(self) -> Mapping[str, Any]:
        """The memory engine's ``engine_options``: the database this source opened."""
        return {"database": self.database}

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncMemorySession]:
        """The database's lock for the block."""
        with self.database.lock:
            yield AsyncMemorySession(self.database)

    async def close(self) -> None:
        """See :meth:`MemorySource.close`."""
        if not self._closed:
            self._closed = True
            detach(self.database)


def _no_connection(native: object) -> None:
    raise UnsupportedByEngine(
        NAME,
        "caller_transactions",
        f"a {type(native).__name__} cannot be joined: the in-memory engine has no connection "
        "and no transaction of yours (call the store itself)",
    )


class MemoryDriver:
    """The sync driver of ``memory://``."""

    name = NAME

    def open(self, dsn: str, settings: object) -> MemorySource:
        """The database ``dsn`` names (a new anonymous one for ``memory://``)."""
        return MemorySource(attach(database_name(dsn)))

    def adopt(self, native: object) -> MemorySource | None:
        """Refused: see :func:`_no_connection`."""
        _no_connection(native)
        return None

    def error_info(self, exc: BaseException) -> None:
        """No database errors: every error is alkstore's own."""
        return None

    def open_listener(self, dsn: str, settings: object) -> Any:
        """Refused: wake-ups are in-process."""
        raise UnsupportedByDriver(NAME, "LISTEN: wake-ups of a memory store are in-process")


class AsyncMemoryDriver:
    """The async driver of ``memory://``."""

    name = NAME

    async def open(self, dsn: str, settings: object) -> AsyncMemorySource:
        """See :meth:`MemoryDriver.open`."""
        return AsyncMemorySource(attach(database_name(dsn)))

    def adopt(self, native: object) -> AsyncMemorySource | None:
        """Refused: see :func:`_no_connection`."""
        _no_connection(native)
        return None

    def error_info(self, exc: BaseException) -> None:
        """No database errors: every error is alkstore's own."""
        return None

    async def open_listener(self, dsn: str, settings: object) -> Any:
        """Refused: wake-ups are in-process."""
        raise UnsupportedByDriver(NAME, "LISTEN: wake-ups of a memory store are in-process")


SYNC = MemoryDriver()
ASYNC = AsyncMemoryDriver()
