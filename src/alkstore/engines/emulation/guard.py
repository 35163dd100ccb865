"""The guard: a driver's source whose sessions check every statement against a profile.

:func:`guard_sync` and :func:`guard_async` wrap a source so that a statement the real server
would reject raises :class:`~.profiles.EmulationRejected` and nothing reaches the database.
They also impose the real server's default isolation level on every transaction and on
statements outside one, and (for CockroachDB) hand integers back as text.

The guard does not import the drivers: the session and source protocols below are the
structural subset of ``alkstore.drivers.base`` it needs, so any driver's source fits.
"""

from __future__ import annotations

import copy
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from typing import Any, Protocol

import attrs

from ...core.plans import Isolation, Row, Statement
from .lexer import normalize
from .profiles import Profile
from .rules import Memory


class SyncSession(Protocol):
    """A session that runs statements and transactions (a driver's, structurally)."""

    def execute(self, statement: Statement) -> list[Row]:
        """Run one statement; its rows."""
        ...

    def transaction(self, isolation: Isolation | None = None) -> AbstractContextManager[None]:
        """A transaction (a savepoint when nested)."""
        ...

    def in_transaction(self) -> bool:
        """Whether the caller owns an open transaction on the connection."""
        ...


class AsyncSession(Protocol):
    """The async counterpart of :class:`SyncSession`."""

    async def execute(self, statement: Statement) -> list[Row]:
        """Run one statement; its rows."""
        ...

    def transaction(self, isolation: Isolation | None = None) -> AbstractAsyncContextManager[None]:
        """A transaction (a savepoint when nested)."""
        ...

    def in_transaction(self) -> bool:
        """Whether the caller owns an open transaction on the connection."""
        ...


class SyncSource(Protocol):
    """Where sessions are borrowed from (a driver's source, structurally)."""

    def session(self) -> AbstractContextManager[SyncSession]:
        """Borrow a session for a ``with`` block."""
        ...

    def close(self) -> None:
        """Release the source."""
        ...


class AsyncSource(Protocol):
    """The async counterpart of :class:`SyncSource`."""

    def session(self) -> AbstractAsyncContextManager[AsyncSession]:
        """Borrow a session for an ``async with`` block."""
        ...

    async def close(self) -> None:
        """Release the source."""
        ...


_BEGIN = re.compile(r"(?:BEGIN|START\s+TRANSACTION)\b", re.I)
_END = re.compile(
    r"(?:COMMIT|END|ABORT|ROLLBACK)\b(?!\s+(?:TO|PREPARED)\b)(?!.*\bAND\s+CHAIN\b)"
    r"|PREPARE\s+TRANSACTION\b",
    re.I,
)


@attrs.frozen
class _Prelude:
    before: tuple[Statement, ...] = ()
    """Sent before the statement (the session's isolation level, once)."""
    after: tuple[Statement, ...] = ()
    """Sent after it (the forced level, right after a BEGIN sent as a statement)."""


def _text_ints(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, list):
        return [_text_ints(v) for v in value]
    return value


class _GuardState:
    """What a guarded session tracks, shared by the sync and async wrappers (no I/O here)."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.depth = 0
        """``transaction()`` blocks open on this session."""
        self.manual = False
        """A transaction opened by a ``BEGIN`` statement is open."""
        self.memory: dict[str, Memory] = {}
        """Transaction-spanning rules' memory of the current transaction."""
        self._saved: list[dict[str, Memory]] = []
        self.session_level_set = False

    def in_transaction(self) -> bool:
        return self.depth > 0 or self.manual

    def admit(self, statement: Statement) -> _Prelude:
        """Raise :class:`EmulationRejected` for a statement the server would reject, else
        what to send around it."""
        sql = statement.sql
        error = self.profile.violation(sql, self.memory if self.in_transaction() else None)
        if error is not None:
            raise error
        level = self.profile.isolation
        before: tuple[Statement, ...] = ()
        after: tuple[Statement, ...] = ()
        if level is not None and not self.in_transaction() and not self.session_level_set:
            before = (Statement(_session_level_sql(level)),)
        norm = normalize(sql)
        if _BEGIN.match(norm) and not self.in_transaction():
            self.manual, self.memory = True, {}
            if level is not None:
                after = (Statement(f"SET TRANSACTION ISOLATION LEVEL {level.value.upper()}"),)
        elif _END.match(norm) and self.manual and self.depth == 0:
            self.manual, self.memory = False, {}
        return _Prelude(before, after)

    def sent_before(self, prelude: _Prelude) -> None:
        """The prelude's ``before`` statements ran."""
        if prelude.before:
            self.session_level_set = True

    def isolation(self, requested: Isolation | None) -> Isolation | None:
        """The isolation a new transaction gets: the server's default wins over the request."""
        return requested if self.profile.isolation is None else self.profile.isolation

    def enter(self) -> None:
        self.depth += 1
        self._saved.append(copy.deepcopy(self.memory))

    def leave(self, ok: bool) -> None:
        saved = self._saved.pop()
        self.depth -= 1
        if not ok:
            self.memory = saved  # a rolled-back savepoint took its ADD COLUMNs with it
        if not self.in_transaction():
            self.memory = {}

    def rows(self, rows: list[Row]) -> list[Row]:
        if not self.profile.ints_as_text:
            return rows
        return [{key: _text_ints(value) for key, value in row.items()} for row in rows]


def _session_level_sql(level: Isolation) -> str:
    return f"SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL {level.value.upper()}"


class GuardedSyncSession:
    """A :class:`SyncSession` that checks every statement first."""

    def __init__(self, inner: SyncSession, profile: Profile) -> None:
        self.inner = inner
        """The driver's session statements go to."""
        self._state = _GuardState(profile)

    def execute(self, statement: Statement) -> list[Row]:
        """Check ``statement`` (raising :class:`EmulationRejected`, nothing sent), then run it."""
        prelude = self._state.admit(statement)
        for extra in prelude.before:
            self.inner.execute(extra)
        self._state.sent_before(prelude)
        rows = self.inner.execute(statement)
        for extra in prelude.after:
            self.inner.execute(extra)
        return self._state.rows(rows)

    def in_transaction(self) -> bool:
        """Whether the driver's session is inside the caller's transaction."""
        return self.inner.in_transaction()

    @contextmanager
    def transaction(self, isolation: Isolation | None = None) -> Iterator[None]:
        """A transaction at the profile's isolation (the requested one only if it has none)."""
        with self.inner.transaction(self._state.isolation(isolation)):
            self._state.enter()
            try:
                yield
            except BaseException:
                self._state.leave(ok=False)
                raise
            self._state.leave(ok=True)


class GuardedAsyncSession:
    """An :class:`AsyncSession` that checks every statement first."""

    def __init__(self, inner: AsyncSession, profile: Profile) -> None:
        self.inner = inner
        """The driver's session statements go to."""
        self._state = _GuardState(profile)

    async def execute(self, statement: Statement) -> list[Row]:
        """Check ``statement`` (raising :class:`EmulationRejected`, nothing sent), then run it."""
        prelude = self._state.admit(statement)
        for extra in prelude.before:
            await self.inner.execute(extra)
        self._state.sent_before(prelude)
        rows = await self.inner.execute(statement)
        for extra in prelude.after:
            await self.inner.execute(extra)
        return self._state.rows(rows)

    def in_transaction(self) -> bool:
        """Whether the driver's session is inside the caller's transaction."""
        return self.inner.in_transaction()

    @asynccontextmanager
    async def transaction(self, isolation: Isolation | None = None) -> AsyncIterator[None]:
        """A transaction at the profile's isolation (the requested one only if it has none)."""
        async with self.inner.transaction(self._state.isolation(isolation)):
            self._state.enter()
            try:
                yield
            except BaseException:
                self._state.leave(ok=False)
                raise
            self._state.leave(ok=True)


class GuardedSyncSource:
    """A :class:`SyncSource` whose sessions are guarded."""

    def __init__(self, inner: SyncSource, profile: Profile) -> None:
        self.inner = inner
        """The driver's source."""
        self.profile = profile
        """The profile every session enforces."""

    @contextmanager
    def session(self) -> Iterator[SyncSession]:
        """Borrow a guarded session for the duration of the ``with`` block."""
        with self.inner.session() as inner:
            yield GuardedSyncSession(inner, self.profile)

    def close(self) -> None:
        """Close the driver's source."""
        self.inner.close()


class GuardedAsyncSource:
    """An :class:`AsyncSource` whose sessions are guarded."""

    def __init__(self, inner: AsyncSource, profile: Profile) -> None:
        self.inner = inner
        """The driver's source."""
        self.profile = profile
        """The profile every session enforces."""

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AsyncSession]:
        """Borrow a guarded session for the duration of the ``async with`` block."""
        async with self.inner.session() as inner:
            yield GuardedAsyncSession(inner, self.profile)

    async def close(self) -> None:
        """Close the driver's source."""
        await self.inner.close()


def guard_sync(source: SyncSource, profile: Profile) -> SyncSource:
    """``source`` behind ``profile``'s guard.

    Every statement is checked before it is sent (:class:`EmulationRejected`, nothing sent,
    for one the real server would reject); every transaction runs at ``profile.isolation``
    whatever was asked for; before the first statement a borrowed session runs outside a
    transaction, ``SET SESSION CHARACTERISTICS`` gives it that level too; with
    ``profile.ints_as_text`` every int in the rows (not bools; also inside arrays) becomes str.

    The session level is set once per *borrowed session*, not once per pooled connection:
    asyncpg's pool sends ``RESET ALL`` when a connection goes back, which undoes it, so a
    per-connection record would go stale. It costs one round trip per borrow that runs an
    untransacted statement, and is lazy, so a borrow that only runs transactions pays nothing.
    """
    return GuardedSyncSource(source, profile)


def guard_async(source: AsyncSource, profile: Profile) -> AsyncSource:
    """``source`` behind ``profile``'s guard; as :func:`guard_sync`, awaiting instead."""
    return GuardedAsyncSource(source, profile)
