"""Stores behind a real PgBouncer in transaction pooling mode (``pooler="pgbouncer"``).

The PgBouncer here has ONE server connection, so every client shares it: what a store leaves
in a session (a prepared statement, a setting) is seen by the next client's transaction.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator

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
