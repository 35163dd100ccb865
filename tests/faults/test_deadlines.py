"""Deadlines (issue 13, item 3): a stalled network ends a call with DeadlineExceeded near its
deadline; the DSN's connect_timeout and server settings are honoured on every driver
(pg8000 included); connect()'s statement_timeout and lock_timeout fire as StatementTimeout;
migration waits for its lock with a bound and names the holder."""

from __future__ import annotations

import time
import uuid
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from faultkit import VARIANTS, open_store
from proxy import FaultProxy

from alkstore import ConnectionFailed, DeadlineExceeded, MigrationLocked, StatementTimeout
from alkstore.conformance.cluster import TempCluster
from alkstore.conformance.harness import Backend, StoreHandle
from alkstore.core.plans import Plan, Statement, Steps
from alkstore.drivers.common import resolve_timeouts
from alkstore.engines.postgres.schema import LATEST

SLACK = 1.5
"""Seconds a call may end after its deadline on a loaded 2-core machine."""


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _schema() -> str:
    return f"d_{uuid.uuid4().hex[:12]}"


def _sleep(seconds: float) -> Plan[int]:
    def steps() -> Steps[int]:
        rows = yield Statement("SELECT pg_sleep($1::float8)", (seconds,))
        return len(rows)

    return Plan("sleep", steps)


def test_a_stalled_network_ends_the_call_at_its_deadline(
    fault_cluster: TempCluster, variant: str
) -> None:
    assert fault_cluster.port is not None
    with FaultProxy("127.0.0.1", fault_cluster.port) as proxy:
        options: dict[str, Any] = {"statement_timeout": 0.5, "lock_timeout": 0.5}
        store = open_store(proxy.dsn(fault_cluster.dsn), variant, _schema(), **options)
        try:
            store.create_queue("q")
            store.send("q", {"n": 0})
            deadline = resolve_timeouts("", connect_timeout=None, server_side=True, **options).call
            assert deadline is not None
            proxy.stall()
            started = time.monotonic()
            with pytest.raises(DeadlineExceeded) as info:
                store.send("q", {"n": 1})
            elapsed = time.monotonic() - started
            assert elapsed < deadline + SLACK, elapsed
            assert info.value.retry_safe is False and info.value.__cause__ is not None
            proxy.resume()
            proxy.cut()
            store.send("q", {"n": 2})  # the store recovers on a new connection
        finally:
            proxy.resume()
            store.close()


def test_the_dsn_connect_timeout_is_honoured(fault_cluster: TempCluster, variant: str) -> None:
    assert fault_cluster.port is not None
    with FaultProxy("127.0.0.1", fault_cluster.port) as proxy:
        proxy.stall()  # accepts TCP, never answers: only a connect timeout ends the wait
        dsn = proxy.dsn(fault_cluster.dsn) + "?connect_timeout=2"
        started = time.monotonic()
        with pytest.raises(ConnectionFailed):
            open_store(dsn, variant, _schema())
        assert time.monotonic() - started < 2 + SLACK + 1  # libpq rounds to whole seconds


def test_the_dsn_statement_timeout_is_honoured(fault_cluster: TempCluster, variant: str) -> None:
    options = quote("-c statement_timeout=300")
    store = open_store(f"{fault_cluster.dsn}?options={options}", variant, _schema())
    try:
        started = time.monotonic()
        with pytest.raises(StatementTimeout) as info:
            store.run_plan(_sleep(5))
        assert time.monotonic() - started < 0.3 + SLACK
        assert info.value.retry_safe is True and info.value.__cause__ is not None
    finally:
        store.close()


def test_connect_statement_timeout_fires(fault_cluster: TempCluster, variant: str) -> None:
    store = open_store(fault_cluster.dsn, variant, _schema(), statement_timeout=0.3)
    try:
        with pytest.raises(StatementTimeout):
            store.run_plan(_sleep(5))
        assert store.run_plan(_sleep(0)) == 1
    finally:
        store.close()


def test_migration_waits_boundedly_and_names_the_lock_holder(
    fault_cluster: TempCluster, variant: str
) -> None:
    schema = _schema()
    owner = open_store(fault_cluster.dsn, variant, schema)
    owner.set_version(LATEST - 1)  # an upgrade is due: connect() must take the lock
    key = owner.engine._lock_key()
    with psycopg.connect(fault_cluster.dsn, application_name="lock-holder") as holder:
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
        pid = holder.info.backend_pid
        started = time.monotonic()
        with pytest.raises(MigrationLocked) as info:
            open_store(fault_cluster.dsn, variant, schema, lock_timeout=0.3)
        assert time.monotonic() - started < 0.3 + SLACK
        message = str(info.value)
        assert f"pid {pid}" in message and "'lock-holder'" in message, message
        holder.rollback()
    owner.set_version(LATEST)
    owner.close()


def test_a_claim_row_migration_lock_wait_is_bounded_and_says_why_unnamed(
    fault_cluster: TempCluster,
) -> None:
    # Engines without advisory locks (CockroachDB here, behind its emulation guard) take the
    # migration lock by updating a claim row: the wait is bounded the same way.
    schema = _schema()
    backend = Backend(fault_cluster.dsn, "cockroachdb", emulate=True)
    owner = StoreHandle(backend, "psycopg", schema, owner=True)
    owner.set_version(LATEST - 1)
    with psycopg.connect(fault_cluster.dsn) as holder:
        holder.execute(f"UPDATE {schema}.migration_lock SET claimed_on = now()")
        started = time.monotonic()
        with pytest.raises(MigrationLocked) as info:
            StoreHandle(
                Backend(
                    fault_cluster.dsn, "cockroachdb", emulate=True, options={"lock_timeout": 0.3}
                ),
                "psycopg",
                schema,
                owner=False,
            )
        assert time.monotonic() - started < 0.3 + SLACK
        assert "migration_lock row cannot be named" in str(info.value), str(info.value)
        holder.rollback()
    owner.set_version(LATEST)
    owner.close()
