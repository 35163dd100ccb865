"""Serialization failures in the caller's transaction reach the caller unchanged.

A store on the caller's connection joins whatever transaction the caller has open. A
serialization failure (SQLSTATE 40001) there aborts the caller's whole transaction: retrying
the store's statements in it could only fail again (``InFailedSqlTransaction``), so the
store raises the driver's error as it is and the caller retries their transaction. In the
store's own transactions it retries as always. See docs/drivers.md, "Serialization failures
in your transaction".
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

import alkstore
from alkstore import AlkstoreError, JobState
from alkstore.core.plans import Statement
from alkstore.drivers import variant
from alkstore.drivers.base import DriverSettings

SERIALIZATION_FAILURE = "40001"


async def _maybe(value: Any) -> Any:
    """Await ``value`` if the driver under test is async (its calls return coroutines)."""
    return await value if asyncio.iscoroutine(value) else value


class CallerConnection:
    """A connection of the driver under test, held as a caller holds one."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.native = session.connection
        """The client library's own connection object (what a caller passes to connect)."""

    async def run(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        return await _maybe(self.session.execute(Statement(sql, params)))  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def caller_connection(alkstore_store: Any) -> AsyncIterator[CallerConnection]:
    """A connection of the store's driver, opened outside any store."""
    spec = variant(alkstore_store.driver)
    driver = spec.load()
    source = await _maybe(driver.open(alkstore_store.backend.dsn, DriverSettings(pool_size=1)))
    try:
        async with contextlib.AsyncExitStack() as stack:
            cm = source.session()
            if spec.is_async:
                session = await stack.enter_async_context(cm)
            else:
                session = stack.enter_context(cm)
            yield CallerConnection(session)
    finally:
        await _maybe(source.close())


async def _store_on(alkstore_store: Any, conn: CallerConnection) -> Any:
    """A store on the caller's connection: same schema, engine and driver as ``store``."""
    spec = variant(alkstore_store.driver)
    options: dict[str, Any] = {
        "engine": alkstore_store.backend.engine_name,
        "driver": spec.name,
        "schema": alkstore_store.schema,
        "emulate": alkstore_store.backend.emulate,
        "migrate": False,
    }
    if spec.is_async:
        return await alkstore.connect_async(conn.native, **options)
    return alkstore.connect(conn.native, **options)


def _run(coro: Any) -> None:
    async def bounded() -> None:
        async with asyncio.timeout(120):
            await coro

    asyncio.run(bounded())


@pytest.mark.requires("serialization_retries")
@pytest.mark.parametrize("isolation", ["REPEATABLE READ", "SERIALIZABLE"])
def test_a_serialization_failure_in_the_callers_transaction_is_raised_unchanged(
    alkstore_store, isolation
):
    alkstore_store.create_queue("q")
    job = alkstore_store.send("q", {"n": 1})
    driver = variant(alkstore_store.driver).load()

    async def scenario() -> None:
        async with caller_connection(alkstore_store) as conn:
            await conn.run(f"BEGIN ISOLATION LEVEL {isolation}")
            await conn.run("SELECT 1")  # the caller's snapshot is taken here
            mine = await _store_on(alkstore_store, conn)
            try:
                # Another session changes the job after the caller's snapshot (the test
                # clock's hook rewrites every job row) ...
                alkstore_store.advance(0)
                # ... so changing it in the caller's transaction cannot serialize.
                with pytest.raises(Exception) as err:
                    await _maybe(mine.cancel("q", [job]))
                assert not isinstance(err.value, AlkstoreError), err.value
                info = driver.error_info(err.value)
                assert info is not None, repr(err.value)
                assert info.sqlstate == SERIALIZATION_FAILURE, repr(err.value)
            finally:
                await conn.run("ROLLBACK")
                await _maybe(mine.close())
        # The caller retries their transaction; now it goes through.
        assert alkstore_store.cancel("q", [job]) == 1

    _run(scenario())


@pytest.mark.requires("serialization_retries")
def test_the_stores_own_transaction_retries_a_serialization_failure(alkstore_store):
    alkstore_store.create_queue("q")
    job = alkstore_store.send("q", {"n": 1})
    outcome: list[Any] = []

    def cancel() -> None:
        try:
            outcome.append(alkstore_store.cancel("q", [job]))
        except Exception as exc:
            outcome.append(exc)

    async def scenario() -> None:
        async with caller_connection(alkstore_store) as holder:
            await holder.run("BEGIN")
            mine = await _store_on(alkstore_store, holder)
            try:
                # The holder's open transaction claims the job: its row stays locked.
                assert [j.id for j in await _maybe(mine.fetch("q"))] == [job]
            finally:
                await _maybe(mine.close())
            worker = threading.Thread(target=cancel)
            worker.start()
            # Once the store's statement waits on the holder's row lock, commit: the store's
            # snapshot then cannot serialize with the change (40001), and it must retry.
            deadline = time.monotonic() + 30
            while not await holder.run("SELECT 1 FROM pg_locks WHERE NOT granted"):
                assert time.monotonic() < deadline, "the store never waited on the row lock"
                await asyncio.sleep(0.02)
            await holder.run("COMMIT")
            await asyncio.to_thread(worker.join, 60)
        assert outcome == [1]
        assert alkstore_store.get_job("q", job).state == JobState.CANCELLED

    _run(scenario())


@pytest.mark.requires("several_sessions")  # the caller's connection is a second session
def test_using_joins_the_callers_transaction(alkstore_store):
    # store.using(conn): a rollback discards the job, a commit keeps it (docs/drivers.md).
    alkstore_store.create_queue("q")

    async def scenario() -> tuple[Any, Any]:
        async with caller_connection(alkstore_store) as conn:
            mine = (await _store_on(alkstore_store, conn)).using(conn.native)
            await conn.run("BEGIN")
            lost = await _maybe(mine.send("q", {"n": 1}))
            await conn.run("ROLLBACK")
            await conn.run("BEGIN")
            kept = await _maybe(mine.send("q", {"n": 2}))
            assert alkstore_store.get_job("q", kept) is None  # not before the commit
            await conn.run("COMMIT")
        return lost, kept

    outcome: list[tuple[Any, Any]] = []

    async def collect() -> None:
        outcome.append(await scenario())

    _run(collect())
    lost, kept = outcome[0]
    assert alkstore_store.get_job("q", lost) is None
    assert alkstore_store.get_job("q", kept).data == {"n": 2}
