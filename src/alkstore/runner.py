"""The two plan runners: the only code that differs between the sync and async faces.

A runner borrows a session, opens a transaction when the plan asks for one, drives the plan's
generator (each yielded statement is executed and its rows sent back in), retries the whole
plan on a serialization failure where the engine needs that, and turns driver errors into
alkstore errors through the plan's error map.

A serialization failure inside a transaction the caller owns (their connection, already in a
transaction) is never retried: the failure aborted the caller's whole transaction, so only the
caller can retry it, and it reaches them as the driver raised it (docs/drivers.md,
"Serialization failures in your transaction").
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import TypeVar

from .core.errors import AlkstoreError
from .core.plans import (
    MAX_SERIALIZATION_RETRIES,
    SERIALIZATION_FAILURE,
    Plan,
    Row,
    Statement,
    serialization_pause,
)
from .drivers.base import (
    AsyncDriver,
    AsyncSession,
    AsyncSource,
    SyncDriver,
    SyncSession,
    SyncSource,
)

T = TypeVar("T")


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
        if attempt < MAX_SERIALIZATION_RETRIES:
            return serialization_pause(attempt, random.random())
        if plan.on_contention is not None:
            return None
    mapped = plan.map_error(info.sqlstate, info.constraint)
    if mapped is not None:
        raise mapped from exc
    raise exc


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


def _drive(session: SyncSession, driver: SyncDriver, plan: Plan[T]) -> T:
    gen = plan.steps()
    try:
        statement = next(gen)
        while True:
            statement = gen.send(_execute(session, driver, statement))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        gen.close()


async def _drive_async(session: AsyncSession, driver: AsyncDriver, plan: Plan[T]) -> T:
    gen = plan.steps()
    try:
        statement = next(gen)
        while True:
            statement = gen.send(await _execute_async(session, driver, statement))
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    finally:
        gen.close()


def run_sync(source: SyncSource, driver: SyncDriver, plan: Plan[T]) -> T:
    """Run ``plan`` on a session from ``source``."""
    attempt = 0
    while True:
        callers = False
        try:
            with source.session() as session:
                callers = session.in_transaction()
                if not plan.transaction:
                    return _drive(session, driver, plan)
                with session.transaction(plan.isolation):
                    return _drive(session, driver, plan)
        except Exception as exc:
            pause = _translate(plan, driver, exc, attempt, callers_transaction=callers)
        if pause is None:
            return _contention_result(plan)
        attempt += 1
        time.sleep(pause)


async def run_async(source: AsyncSource, driver: AsyncDriver, plan: Plan[T]) -> T:
    """Run ``plan`` on a session from ``source``."""
    attempt = 0
    while True:
        callers = False
        try:
            async with source.session() as session:
                callers = session.in_transaction()
                if not plan.transaction:
                    return await _drive_async(session, driver, plan)
                async with session.transaction(plan.isolation):
                    return await _drive_async(session, driver, plan)
        except Exception as exc:
            pause = _translate(plan, driver, exc, attempt, callers_transaction=callers)
        if pause is None:
            return _contention_result(plan)
        attempt += 1
        await asyncio.sleep(pause)


def run_in_session(session: SyncSession, driver: SyncDriver, plan: Plan[T]) -> T:
    """Run ``plan``'s statements on ``session``, inside whatever transaction it has open
    (a transactional worker's); errors pass through untranslated."""
    return _drive(session, driver, plan)


async def run_in_session_async(session: AsyncSession, driver: AsyncDriver, plan: Plan[T]) -> T:
    """See :func:`run_in_session`."""
    return await _drive_async(session, driver, plan)
