"""The two plan runners: the only code that differs between the sync and async faces.

A runner borrows a session, opens a transaction when the plan asks for one, drives the plan's
generator (each yielded statement is executed and its rows sent back in), retries the whole
plan on a serialization failure where the engine needs that, runs it again at once when it
lost a race its plan names (``Plan.lost_race``: a keyed claim that lost a key to a concurrent
claim), and turns driver errors into alkstore errors through the plan's error map.

A serialization failure inside a transaction the caller owns (their connection, already in a
transaction) is never retried: the failure aborted the caller's whole transaction, so only the
caller can retry it, and it reaches them as the driver raised it (docs/drivers.md,
"Serialization failures in your transaction").

Connection faults (docs/guarantees.md, "Errors and retries"): a connection that fails before
any statement of the plan reached the server, or dies inside the plan's own transaction before
its ``COMMIT`` was sent (the server rolls that back), leaves nothing behind, so the plan is run
again on a fresh connection, up to :data:`MAX_RECONNECTS` times, and then
:class:`~alkstore.ConnectionFailed` is raised. A connection that dies after a statement may
have committed (an autocommit statement, the ``COMMIT`` itself) raises
:class:`~alkstore.ConnectionLost`: the outcome is unknown. A result the server committed is
returned even when giving the connection back fails afterwards. The driver's exception is
always chained.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import TypeVar

from .core.errors import (
    AlkstoreError,
    AuthenticationFailed,
    ConnectionFailed,
    ConnectionLost,
    DatabaseNotFound,
    DeadlineExceeded,
    PermissionDenied,
    StatementTimeout,
)
from .core.plans import (
    MAX_RACE_RERUNS,
    SERIALIZATION_FAILURE,
    Plan,
    Row,
    Statement,
    serialization_retry,
)
from .drivers.base import (
    AsyncDriver,
    AsyncSession,
    AsyncSource,
    ErrorInfo,
    SyncDriver,
    SyncSession,
    SyncSource,
    disconnected,
    never_sent,
)

T = TypeVar("T")

MAX_RECONNECTS = 2
"""Times a plan is run again after its connection failed while nothing of it could have
committed (a dead pooled connection, a server restart)."""

INSUFFICIENT_PRIVILEGE = "42501"
"""The server's SQLSTATE for a missing privilege."""
TIMEOUT_SQLSTATES = frozenset({"57014", "55P03"})
"""query_canceled (``statement_timeout``) and lock_not_available (``lock_timeout``)."""


class _Progress:
    """How far one attempt got: what a connection fault leaves behind depends on it."""

    __slots__ = ("borrowed", "committing", "done", "result", "sent")

    def __init__(self) -> None:
        self.borrowed = False
        """A session was handed out (its connection opened or taken from the pool)."""
        self.sent = 0
        """Statements of the plan handed to the driver."""
        self.committing = False
        """The plan's own transaction finished its statements; its COMMIT is under way."""
        self.done = False
        """The plan's result is final (committed, or no transaction to commit)."""
        self.result: object = None


def _connection_fault(
    plan: Plan[T],
    driver: SyncDriver | AsyncDriver,
    exc: Exception,
    progress: _Progress,
    *,
    callers_transaction: bool,
) -> bool:
    """True when the plan may run again (nothing of it took effect); raise the alkstore error
    for any other connection fault; False when ``exc`` is no connection fault."""
    if isinstance(exc, DeadlineExceeded):
        raise exc
    if isinstance(exc, AlkstoreError):
        return False
    refused = None if progress.borrowed else _login_refused(plan, driver, exc)
    if refused is not None:
        raise refused from exc
    if not progress.borrowed and not disconnected(driver, exc):
        # Opening the connection failed otherwise (a DSN the library refuses when it
        # connects): nothing was sent, and the library's error is not alkstore's type.
        raise ConnectionFailed(
            f"{plan.name}: could not open a connection: {_describe(exc)}"
        ) from exc
    if not disconnected(driver, exc):
        return False
    sent = progress.sent - (1 if never_sent(driver, exc) else 0)
    untouched = sent <= 0 or (
        plan.transaction and not callers_transaction and not progress.committing
    )
    if not untouched:
        stage = "its COMMIT" if progress.committing else f"statement {progress.sent}"
        raise ConnectionLost(
            f"{plan.name}: the connection was lost during {stage}; the outcome is unknown "
            f"(it may or may not have taken effect): {_describe(exc)}"
        ) from exc
    if callers_transaction:
        raise ConnectionFailed(
            f"{plan.name}: the connection was lost inside your transaction, which the server "
            f"rolled back; nothing of it took effect: {_describe(exc)}"
        ) from exc
    return True


_LOGIN_REFUSALS = (
    (re.compile(r'FATAL:\s+database "[^"]*" does not exist'), "3D000"),
    (re.compile(r'FATAL:\s+role "[^"]*" does not exist'), "28000"),
    (re.compile(r"FATAL:\s+(no pg_hba\.conf entry|\w+ authentication failed)"), "28000"),
)
"""How libpq words the refusals it reports without a SQLSTATE (psycopg's connect)."""


def _login_refused(
    plan: Plan[T], driver: SyncDriver | AsyncDriver, exc: Exception
) -> AlkstoreError | None:
    """The error for a connect the server refused for good (the login, the database), else
    None: retrying cannot help, so it is neither retried nor a ConnectionFailed."""
    info = driver.error_info(exc)
    sqlstate = info.sqlstate if info is not None else None
    if sqlstate is None:
        text = str(exc)
        sqlstate = next((code for pattern, code in _LOGIN_REFUSALS if pattern.search(text)), None)
    if sqlstate is None:
        return None
    if sqlstate == "3D000":
        return DatabaseNotFound(
            f"{plan.name}: the database does not exist; retrying will not help: {_describe(exc)}"
        )
    if sqlstate.startswith("28"):
        return AuthenticationFailed(
            f"{plan.name}: the server refused the login (check the user, password and "
            f"pg_hba.conf); retrying will not help: {_describe(exc)}"
        )
    return None


def _timed_out(exc: BaseException) -> bool:
    """A connect that timed out: trying again would only multiply the wait."""
    chain = (exc, exc.__cause__, exc.__context__)
    return any(
        isinstance(e, TimeoutError) or type(e).__name__ == "ConnectionTimeout" for e in chain
    )


def _server_message(exc: BaseException) -> str:
    """The server's primary message in a driver's error (pg8000 carries the fields as a
    dict: its ``M``)."""
    fields = exc.args[0] if exc.args and isinstance(exc.args[0], dict) else None
    if fields is not None and "M" in fields:
        return str(fields["M"])
    return str(exc).strip()


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".strip().rstrip(":")


def _failed(plan: Plan[T], exc: Exception) -> ConnectionFailed:
    return ConnectionFailed(
        f"{plan.name}: could not reach the database; nothing took effect, retrying is safe: "
        f"{_describe(exc)}"
    )


def _translate(
    plan: Plan[T],
    driver: SyncDriver | AsyncDriver,
    exc: Exception,
    attempt: int,
    *,
    callers_transaction: bool,
) -> float | None:
    """Seconds to pause before retrying; None when the plan's contention result stands;
    otherwise raise the error the caller should see."""
    if isinstance(exc, AlkstoreError):
        raise exc
    info = driver.error_info(exc)
    if info is None:
        raise exc
    if info.sqlstate == SERIALIZATION_FAILURE and callers_transaction:
        raise exc
    if plan.retry_serialization and info.sqlstate == SERIALIZATION_FAILURE:
        pause = serialization_retry(info.sqlstate, attempt)
        if pause is not None:
            return pause
        if plan.on_contention is not None:
            return None
    # A plan that may lose a race ran in a transaction or savepoint of its own, or alone
    # outside any: running it again redoes all of its work.
    rerun = _after_lost_race(plan, info, attempt)
    if rerun is not None:
        return 0.0 if rerun else None
    mapped = plan.map_error(info.sqlstate, info.constraint)
    if mapped is not None:
        raise mapped from exc
    if info.sqlstate == INSUFFICIENT_PRIVILEGE:
        raise PermissionDenied(plan.name, _server_message(exc)) from exc
    if info.sqlstate in TIMEOUT_SQLSTATES:
        raise StatementTimeout(
            f"{plan.name}: the server cancelled the statement ({info.sqlstate}: "
            f"statement_timeout or lock_timeout); it was rolled back: {exc}"
        ) from exc
    raise exc


def _after_lost_race(plan: Plan[T], info: ErrorInfo, attempt: int) -> bool | None:
    """For the error ``info`` of run ``attempt``: True to run the plan again after it lost a
    race (:attr:`~.core.plans.Plan.lost_race`), False when its contention result stands
    (the reruns are spent), None when the error is no lost race it can settle."""
    if plan.lost_race is None or not plan.lost_race(info.sqlstate, info.constraint):
        return None
    if attempt < MAX_RACE_RERUNS:
        return True
    return False if plan.on_contention is not None else None


def _contention_result(plan: Plan[T]) -> T:
    assert plan.on_contention is not None
    return plan.on_contention()


def _tolerated(driver: SyncDriver | AsyncDriver, statement: Statement, exc: Exception) -> bool:
    info = driver.error_info(exc) if statement.tolerate else None
    return info is not None and info.sqlstate in statement.tolerate


def _execute(session: SyncSession, driver: SyncDriver, statement: Statement) -> list[Row]:
    try:
        return session.execute(statement)
    except Exception as exc:
        if _tolerated(driver, statement, exc):
            return []
        raise


async def _execute_async(
    session: AsyncSession, driver: AsyncDriver, statement: Statement
) -> list[Row]:
    try:
        return await session.execute(statement)
    except Exception as exc:
        if _tolerated(driver, statement, exc):
            return []
        raise


def _drive(
    session: SyncSession, driver: SyncDriver, plan: Plan[T], progress: _Progress | None = None
) -> T:
    gen = plan.steps()
    try:
        statement = next(gen)
        while True:
            if progress is not None:
                progress.sent += 1
            statement = gen.send(_execute(session, driver, statement))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        gen.close()


async def _drive_async(
    session: AsyncSession, driver: AsyncDriver, plan: Plan[T], progress: _Progress | None = None
) -> T:
    gen = plan.steps()
    try:
        statement = next(gen)
        while True:
            if progress is not None:
                progress.sent += 1
            statement = gen.send(await _execute_async(session, driver, statement))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        gen.close()


def run_sync(source: SyncSource, driver: SyncDriver, plan: Plan[T]) -> T:
    """Run ``plan`` on a session from ``source``."""
    attempt = reconnects = 0
    while True:
        callers = False
        progress = _Progress()
        try:
            with source.session() as session:
                progress.borrowed = True
                callers = session.in_transaction()
                if not plan.in_own_transaction(callers):
                    result = _drive(session, driver, plan, progress)
                else:
                    with session.transaction(plan.isolation):
                        result = _drive(session, driver, plan, progress)
                        progress.committing = True
                progress.result = result
                progress.done = True
            return result
        except Exception as exc:
            if progress.done:  # committed: a failure to give the connection back changes nothing
                return progress.result  # type: ignore[return-value]
            if _connection_fault(plan, driver, exc, progress, callers_transaction=callers):
                if reconnects == MAX_RECONNECTS or _timed_out(exc):
                    raise _failed(plan, exc) from exc
                reconnects += 1
                continue
            pause = _translate(plan, driver, exc, attempt, callers_transaction=callers)
        if pause is None:
            return _contention_result(plan)
        attempt += 1
        time.sleep(pause)


async def run_async(source: AsyncSource, driver: AsyncDriver, plan: Plan[T]) -> T:
    """Run ``plan`` on a session from ``source``."""
    attempt = reconnects = 0
    while True:
        callers = False
        progress = _Progress()
        try:
            async with source.session() as session:
                progress.borrowed = True
                callers = session.in_transaction()
                if not plan.in_own_transaction(callers):
                    result = await _drive_async(session, driver, plan, progress)
                else:
                    async with session.transaction(plan.isolation):
                        result = await _drive_async(session, driver, plan, progress)
                        progress.committing = True
                progress.result = result
                progress.done = True
            return result
        except Exception as exc:
            if progress.done:  # committed: a failure to give the connection back changes nothing
                return progress.result  # type: ignore[return-value]
            if _connection_fault(plan, driver, exc, progress, callers_transaction=callers):
                if reconnects == MAX_RECONNECTS or _timed_out(exc):
                    raise _failed(plan, exc) from exc
                reconnects += 1
                continue
            pause = _translate(plan, driver, exc, attempt, callers_transaction=callers)
        if pause is None:
            return _contention_result(plan)
        attempt += 1
        await asyncio.sleep(pause)


def _rerun_after(
    plan: Plan[T], driver: SyncDriver | AsyncDriver, exc: Exception, attempt: int
) -> bool:
    """On a held session: whether ``plan`` lost a race and may run again (else its
    contention result stands, or ``exc`` is raised: see :func:`run_held`)."""
    info = driver.error_info(exc)
    rerun = None if info is None else _after_lost_race(plan, info, attempt)
    if rerun is None:
        raise exc
    return rerun


def run_held(session: SyncSession, driver: SyncDriver, plan: Plan[T]) -> T:
    """Run ``plan`` on a session the caller holds outside any transaction (a worker
    fetcher's own connection): in a transaction of its own when the plan asks for one, and
    again when it lost a race (:attr:`~.core.plans.Plan.lost_race`, at most
    :data:`~.core.plans.MAX_RACE_RERUNS` times, then its contention result). Other errors
    pass through untranslated."""
    attempt = 0
    while True:
        try:
            if not plan.transaction:
                return _drive(session, driver, plan)
            with session.transaction(plan.isolation):
                return _drive(session, driver, plan)
        except Exception as exc:
            if not _rerun_after(plan, driver, exc, attempt):
                return _contention_result(plan)
        attempt += 1


async def run_held_async(session: AsyncSession, driver: AsyncDriver, plan: Plan[T]) -> T:
    """See :func:`run_held`."""
    attempt = 0
    while True:
        try:
            if not plan.transaction:
                return await _drive_async(session, driver, plan)
            async with session.transaction(plan.isolation):
                return await _drive_async(session, driver, plan)
        except Exception as exc:
            if not _rerun_after(plan, driver, exc, attempt):
                return _contention_result(plan)
        attempt += 1


def run_in_session(session: SyncSession, driver: SyncDriver, plan: Plan[T]) -> T:
    """Run ``plan``'s statements on ``session``, inside whatever transaction it has open
    (a transactional worker's); errors pass through untranslated."""
    return _drive(session, driver, plan)


async def run_in_session_async(session: AsyncSession, driver: AsyncDriver, plan: Plan[T]) -> T:
    """See :func:`run_in_session`."""
    return await _drive_async(session, driver, plan)
