"""Connection faults on every driver (issue 13, item 1): a dead pooled connection is replaced
before a statement is sent on it; a connection lost mid-call raises ConnectionLost (outcome
unknown) or, where nothing could have committed, the plan runs again; a committed result is
never replaced by a cleanup error; the driver's exception is always chained."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import asyncpg
import psycopg
import pytest
from faultkit import VARIANTS, open_store, terminate_store_backends, wait_for

from alkstore import AlkstoreError, ConnectionFailed, ConnectionLost, connect, connect_async
from alkstore.conformance.cluster import TempCluster
from alkstore.core.plans import Plan, Statement, Steps


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _schema() -> str:
    return f"f_{uuid.uuid4().hex[:12]}"


def test_dead_pooled_connections_are_replaced_on_borrow(
    fault_cluster: TempCluster, admin: psycopg.Connection[Any], variant: str
) -> None:
    store = open_store(fault_cluster.dsn, variant, _schema(), pool_size=3)
    try:
        store.create_queue("q")
        assert terminate_store_backends(admin) >= 1
        # Every pooled connection is dead; none of these calls may fail.
        ids = [store.send("q", {"n": n}) for n in range(5)]
        jobs = store.fetch("q", batch_size=5)
        assert sorted(j.id for j in jobs) == sorted(ids)
    finally:
        store.close()


def _sleeper(marker: str, attempts: list[int], *, transaction: bool) -> Plan[int]:
    """A plan whose first attempt sleeps (until its backend is terminated), later ones not."""

    def steps() -> Steps[int]:
        attempts.append(1)
        seconds = 30 if len(attempts) == 1 else 0
        rows = yield Statement(f"SELECT pg_sleep($1::float8), '{marker}' AS marker", (seconds,))
        return len(rows)

    return Plan("sleeper", steps, transaction=transaction)


def _terminate_query(admin: psycopg.Connection[Any], marker: str) -> None:
    def running() -> bool:
        row = admin.execute(
            # Only once it sleeps: asyncpg's PREPARE shows the text first, and a backend
            # ended then had not run it yet (retrying that is rightly safe).
            "SELECT pid FROM pg_stat_activity WHERE query LIKE %s AND pid <> pg_backend_pid() "
            "AND wait_event = 'PgSleep'",
            (f"%{marker}%",),
        ).fetchone()
        if row is None:
            return False
        admin.execute("SELECT pg_terminate_backend(%s)", (row[0],))
        return True

    wait_for(running, f"the statement marked {marker} to run")


def _run_in_thread(store: Any, plan: Plan[int]) -> dict[str, Any]:
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["result"] = store.run_plan(plan)
        except BaseException as exc:  # the test inspects it
            outcome["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    outcome["thread"] = thread
    return outcome


def test_lost_mid_statement_outside_a_transaction_is_connection_lost(
    fault_cluster: TempCluster, admin: psycopg.Connection[Any], variant: str
) -> None:
    store = open_store(fault_cluster.dsn, variant, _schema())
    try:
        marker = uuid.uuid4().hex
        attempts: list[int] = []
        outcome = _run_in_thread(store, _sleeper(marker, attempts, transaction=False))
        _terminate_query(admin, marker)
        outcome["thread"].join(timeout=20)
        error = outcome.get("error")
        assert isinstance(error, ConnectionLost), outcome
        assert error.retry_safe is False
        assert "outcome is unknown" in str(error)
        assert error.__cause__ is not None and not isinstance(error.__cause__, AlkstoreError)
        assert len(attempts) == 1  # never run again: it may have taken effect
        assert store.get_queue("nope") is None  # the store recovered
    finally:
        store.close()


def test_lost_inside_its_own_transaction_runs_again(
    fault_cluster: TempCluster, admin: psycopg.Connection[Any], variant: str
) -> None:
    store = open_store(fault_cluster.dsn, variant, _schema())
    try:
        marker = uuid.uuid4().hex
        attempts: list[int] = []
        outcome = _run_in_thread(store, _sleeper(marker, attempts, transaction=True))
        _terminate_query(admin, marker)
        outcome["thread"].join(timeout=20)
        assert outcome.get("result") == 1, outcome  # rolled back by the server: run again
        assert len(attempts) == 2
    finally:
        store.close()


@pytest.mark.parametrize("driver", ["psycopg", "pg8000"])
def test_unreachable_server_is_connection_failed(driver: str) -> None:
    dsn = "postgresql://someone:s3cret-pw@127.0.0.1:1/nothing"
    with pytest.raises(ConnectionFailed) as info:
        connect(dsn, driver=driver)
    assert info.value.retry_safe is True
    assert isinstance(info.value.__cause__, OSError | psycopg.OperationalError) or (
        info.value.__cause__ is not None
    )
    assert "s3cret-pw" not in str(info.value)


@pytest.mark.parametrize("driver", ["psycopg", "asyncpg"])
def test_unreachable_server_is_connection_failed_async(driver: str) -> None:
    import asyncio

    with pytest.raises(ConnectionFailed):
        asyncio.run(_open(driver))


async def _open(driver: str) -> None:
    await connect_async("postgresql://someone@127.0.0.1:1/nothing", driver=driver)


def test_asyncpg_committed_send_survives_a_failed_pool_reset(fault_cluster: TempCluster) -> None:
    """The issue's case: the backend dies after the statement committed, the pool's
    reset-on-release fails, and that error must not replace the result."""
    import asyncio

    schema = _schema()

    async def scenario() -> None:
        async with connect_async(fault_cluster.dsn, driver="asyncpg", schema=schema) as owner:
            await owner.create_queue("q")

        async def dying_reset(conn: asyncpg.Connection[Any]) -> None:
            # The backend ends itself while the pool resets it: a real server-side death.
            await conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")

        pool = await asyncpg.create_pool(
            fault_cluster.dsn, min_size=0, max_size=2, reset=dying_reset
        )
        try:
            store = await connect_async(pool, driver="asyncpg", schema=schema)
            job_id = await store.send("q", {"n": 1})
            job = await store.get_job("q", job_id)
            assert job is not None and job.data == {"n": 1}
            await store.close()
        finally:
            pool.terminate()

    asyncio.run(scenario())
