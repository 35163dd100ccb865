"""Stores behind a real PgBouncer in transaction pooling mode (``pooler="pgbouncer"``).

The PgBouncer here has ONE server connection, so every client shares it: what a store leaves
in a session (a prepared statement, a setting) is seen by the next client's transaction.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest

import alkstore
from alkstore.conformance.pgbouncer import PgBouncerUnavailable, TempPgBouncer
from alkstore.conformance.servers import PGBOUNCER_SERVER_TIMEZONE
from alkstore.core.errors import InvalidOptions
from alkstore.core.plans import Statement, single


@pytest.fixture(scope="module")
def bouncer(pg_dsn: str) -> Iterator[str]:
    """PgBouncer with one server connection in front of the run's PostgreSQL."""
    try:
        started = TempPgBouncer(pg_dsn, pool_size=1)
    except PgBouncerUnavailable as exc:
        pytest.skip(f"server unavailable: {exc}")
    with started:
        yield started.dsn


def _two_stores(dsn: str, schema: str, **options: object) -> tuple[alkstore.Store, ...]:
    first = alkstore.connect(dsn, schema=schema, pool_size=1, **options)
    second = alkstore.connect(dsn, schema=schema, pool_size=1, migrate=False, **options)
    return first, second


def test_clients_share_the_server_connection(bouncer: str) -> None:
    with psycopg.connect(bouncer, autocommit=True) as a, psycopg.connect(bouncer) as b:
        pid = a.execute("SELECT pg_backend_pid()").fetchone()
        assert b.execute("SELECT pg_backend_pid()").fetchone() == pid


def test_without_the_pooler_option_prepared_statements_collide(
    bouncer: str, schema_name: str
) -> None:
    first, second = _two_stores(bouncer, schema_name)
    try:
        first.create_queue("q")
        with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
            for _ in range(10):  # psycopg prepares a statement on its 5th run
                first.get_queue("q")
                second.get_queue("q")
    finally:
        first.close()
        second.close()


def test_with_the_pooler_option_stores_share_connections(bouncer: str, schema_name: str) -> None:
    first, second = _two_stores(bouncer, schema_name, pooler="pgbouncer")
    try:
        first.create_queue("q")
        for n in range(10):
            first.send("q", {"n": n})
            assert second.get_queue("q") is not None
        jobs = second.fetch("q", batch_size=10)
        assert sorted(job.data["n"] for job in jobs) == list(range(10))
        assert first.complete("q", jobs) == 10
    finally:
        first.close()
        second.close()


def test_asyncpg_through_the_pooler(bouncer: str, schema_name: str) -> None:
    async def scenario() -> list[object]:
        async with alkstore.connect_async(
            bouncer, driver="asyncpg", schema=schema_name, pooler="pgbouncer"
        ) as store:
            await store.create_queue("q")
            for n in range(10):
                await store.send("q", n)
            return [job.data for job in await store.fetch("q", batch_size=10)]

    assert asyncio.run(scenario()) == list(range(10))


def test_timestamps_are_utc_without_the_session_setup(pg_dsn: str, schema_name: str) -> None:
    database = f"tz_{schema_name}"
    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
        zone = PGBOUNCER_SERVER_TIMEZONE
        admin.execute(f"ALTER DATABASE \"{database}\" SET TimeZone = '{zone}'")
    dsn = pg_dsn.rsplit("/", 1)[0] + f"/{database}"
    show = single("show", Statement("SHOW TimeZone"), lambda rows: rows[0]["TimeZone"])
    try:
        before = dt.datetime.now(dt.UTC)
        with alkstore.connect(dsn, schema=schema_name, pooler="pgbouncer") as store:
            assert store._run(show) == zone  # the store set no session TimeZone
            store.create_queue("q")
            job = store.get_job("q", store.send("q"))
        after = dt.datetime.now(dt.UTC)
        assert job is not None
        assert job.created_on.tzinfo is dt.UTC
        assert before - dt.timedelta(seconds=5) <= job.created_on <= after + dt.timedelta(seconds=5)
        assert job.start_after == job.created_on
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{database}" WITH (FORCE)')


def test_an_unknown_pooler_is_refused() -> None:
    with pytest.raises(InvalidOptions, match="pooler"):
        alkstore.connect("postgresql://nowhere/db", pooler="pgcat")


def _wait_until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met before the deadline"
        time.sleep(0.01)


def test_behind_the_pooler_workers_wake_through_listen_dsn(
    bouncer: str, pg_dsn: str, schema_name: str
) -> None:
    """The store's pool goes through PgBouncer; its LISTEN connection straight to the server.
    The worker polls once a minute, so only a NOTIFY from another store can wake it."""
    events: list[str] = []
    store = alkstore.connect(bouncer, schema=schema_name, pooler="pgbouncer", listen_dsn=pg_dsn)
    other = alkstore.connect(bouncer, schema=schema_name, pooler="pgbouncer", migrate=False)
    try:
        store.create_queue("q")
        done: list[object] = []
        options = {
            "poll_interval": 60.0,
            "maintenance": False,
            "on_event": lambda e: events.append(e.kind),
        }
        with store.work("q", lambda job: done.append(job.data), **options):
            _wait_until(lambda: _listening(pg_dsn))
            other.send("q", 1)
            _wait_until(lambda: done == [1])
        assert "listen_unavailable" not in events
    finally:
        other.close()
        store.close()


def _listening(dsn: str) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'"
        ).fetchone()
    return bool(row and row[0])


def test_behind_the_pooler_without_listen_dsn_workers_say_they_poll(
    bouncer: str, schema_name: str
) -> None:
    events: list[str] = []
    store = alkstore.connect(bouncer, schema=schema_name, pooler="pgbouncer")
    try:
        store.create_queue("q")
        options = {"maintenance": False, "on_event": lambda e: events.append(e.kind)}
        with store.work("q", lambda job: None, **options):
            assert events == ["listen_unavailable"]
    finally:
        store.close()


def test_listen_dsn_is_checked() -> None:
    with pytest.raises(InvalidOptions, match="listen_dsn"):
        alkstore.connect("postgresql://nowhere/db", listen_dsn="host=elsewhere")
    with pytest.raises(InvalidOptions, match=r"listen_dsn.*lacks several sessions"):
        alkstore.connect("pglite://", listen_dsn="postgresql://elsewhere/db")
