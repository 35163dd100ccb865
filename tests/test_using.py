"""``store.using(conn)``: any store call inside the caller's open transaction, per driver.

The store itself is opened from the DSN (its own pool); ``using`` puts it on a connection the
caller owns, also one borrowed from the caller's own pool. A rollback discards what the
store did there, a commit keeps it, and the caller's session keeps its own settings.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator

import asyncpg
import pg8000.native
import psycopg
import psycopg_pool
import pytest

import alkstore
from alkstore.drivers.common import parse_dsn


class Rollback(Exception):
    """Raised inside a caller's transaction to roll it back."""


@pytest.fixture
def store(pg_dsn: str, schema_name: str) -> Iterator[alkstore.Store]:
    with alkstore.connect(pg_dsn, schema=schema_name) as opened:
        opened.create_queue("q")
        yield opened


def test_psycopg_rollback_discards_and_commit_keeps(store: alkstore.Store, pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        with pytest.raises(Rollback), conn.transaction():
            job = store.using(conn).send("q", {"order": 1})
            assert store.using(conn).get_job("q", job) is not None  # seen inside
            assert store.get_job("q", job) is None  # not outside, before the commit
            raise Rollback
        assert store.get_job("q", job) is None
        with conn.transaction():
            kept = store.using(conn).send("q", {"order": 2})
        assert store.get_job("q", kept) is not None
        assert not conn.closed


def test_every_call_joins_the_transaction(store: alkstore.Store, pg_dsn: str) -> None:
    job = store.send("q", 1)
    with psycopg.connect(pg_dsn) as conn:  # not autocommit: the first statement opens one
        mine = store.using(conn)
        mine.create_queue("other")
        assert [j.id for j in mine.fetch("q")] == [job]
        assert mine.complete("q", [job], {"ok": True}) == 1
        conn.rollback()
    assert store.get_queue("other") is None
    assert store.get_job("q", job).state == alkstore.JobState.CREATED


def test_a_connection_from_the_callers_psycopg_pool(store: alkstore.Store, pg_dsn: str) -> None:
    with psycopg_pool.ConnectionPool(pg_dsn, min_size=1, max_size=1, open=True) as pool:
        with pytest.raises(Rollback), pool.connection() as conn:
            lost = store.using(conn).send("q", "lost")
            raise Rollback  # the pool rolls the connection back
        with pool.connection() as conn:  # the same connection: the pool holds one
            kept = store.using(conn).send("q", "kept")
        # pool.connection() commits on a clean exit
        assert store.get_job("q", lost) is None
        assert store.get_job("q", kept).data == "kept"


def test_the_callers_session_settings_are_left_alone(store: alkstore.Store, pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone TO 'Asia/Kolkata'")
        with conn.transaction():
            job = store.using(conn).send("q", 1, start_after=dt.timedelta(hours=1))
            read = store.using(conn).get_job("q", job)
        assert conn.execute("SHOW TimeZone").fetchone() == ("Asia/Kolkata",)
        assert conn.execute("SHOW enable_bitmapscan").fetchone() == ("on",)
    outside = store.get_job("q", job)
    assert read.start_after == outside.start_after  # the same instant, whatever the zone
    assert read.start_after.utcoffset() is not None


def test_pg8000_rollback_discards_and_commit_keeps(
    pg_dsn: str, schema_name: str, store: alkstore.Store
) -> None:
    p = parse_dsn(pg_dsn)
    with alkstore.connect(pg_dsn, schema=schema_name, driver="pg8000", migrate=False) as mine:
        conn = pg8000.native.Connection(p.user, host=p.host, port=p.port, database=p.database)
        try:
            conn.run("BEGIN")
            lost = mine.using(conn).send("q", 1)
            conn.run("ROLLBACK")
            conn.run("BEGIN")
            kept = mine.using(conn).send("q", 2)
            assert store.get_job("q", kept) is None
            conn.run("COMMIT")
        finally:
            conn.close()
    assert store.get_job("q", lost) is None
    assert store.get_job("q", kept).data == 2


def test_asyncpg_rollback_discards_and_commit_keeps(
    pg_dsn: str, schema_name: str, store: alkstore.Store
) -> None:
    async def scenario() -> tuple[object, object]:
        async with alkstore.connect_async(
            pg_dsn, schema=schema_name, driver="asyncpg", migrate=False
        ) as mine:
            # A connection acquired from the caller's own asyncpg pool.
            pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=1)
            try:
                async with pool.acquire() as conn:
                    with pytest.raises(Rollback):
                        async with conn.transaction():
                            lost = await mine.using(conn).send("q", 1)
                            raise Rollback
                    async with conn.transaction():
                        kept = await mine.using(conn).send("q", 2)
                        assert store.get_job("q", kept) is None
            finally:
                await pool.close()
            return lost, kept

    lost, kept = asyncio.run(scenario())
    assert store.get_job("q", lost) is None
    assert store.get_job("q", kept).data == 2


def test_psycopg_async_rollback_discards_and_commit_keeps(
    pg_dsn: str, schema_name: str, store: alkstore.Store
) -> None:
    async def scenario() -> tuple[object, object]:
        async with alkstore.connect_async(pg_dsn, schema=schema_name, migrate=False) as mine:
            pool = psycopg_pool.AsyncConnectionPool(pg_dsn, min_size=1, max_size=1, open=False)
            await pool.open()
            try:
                with pytest.raises(Rollback):
                    async with pool.connection() as conn:
                        lost = await mine.using(conn).send("q", 1)
                        raise Rollback
                async with pool.connection() as conn:
                    kept = await mine.using(conn).send("q", 2)
                    assert store.get_job("q", kept) is None
            finally:
                await pool.close()
            return lost, kept

    lost, kept = asyncio.run(scenario())
    assert store.get_job("q", lost) is None
    assert store.get_job("q", kept).data == 2


def test_a_pool_is_refused_with_what_to_do(store: alkstore.Store, pg_dsn: str) -> None:
    with (
        psycopg_pool.ConnectionPool(pg_dsn, min_size=1, max_size=1, open=True) as pool,
        pytest.raises(alkstore.InvalidOptions, match=r"pool\.connection\(\)") as err,
    ):
        store.using(pool)
    assert err.value.field == "conn"


def test_another_drivers_connection_is_refused(store: alkstore.Store, pg_dsn: str) -> None:
    p = parse_dsn(pg_dsn)
    conn = pg8000.native.Connection(p.user, host=p.host, port=p.port, database=p.database)
    try:
        with pytest.raises(alkstore.InvalidOptions, match="sync store's driver 'psycopg'"):
            store.using(conn)
    finally:
        conn.close()


def test_a_pool_as_the_dsn_is_borrowed_from_not_joined(pg_dsn: str, schema_name: str) -> None:
    # docs/drivers.md: a pool passed to connect() is where the store borrows connections;
    # each call commits on its own, whatever a caller does on another of its connections.
    with (
        psycopg_pool.ConnectionPool(pg_dsn, min_size=1, max_size=2, open=True) as pool,
        alkstore.connect(pool, schema=schema_name) as store,
    ):
        store.create_queue("q")
        with pytest.raises(Rollback), pool.connection() as conn:
            conn.execute("SELECT 1")  # the caller's transaction is open
            job = store.send("q", 1)
            raise Rollback
        assert store.get_job("q", job) is not None


def test_an_async_connection_on_a_sync_store_and_an_asyncpg_pool_are_refused(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(pg_dsn) as conn:
            with pytest.raises(alkstore.InvalidOptions, match="sync store's driver"):
                store.using(conn)
        async with alkstore.connect_async(
            pg_dsn, schema=schema_name, driver="asyncpg", migrate=False
        ) as mine:
            pool = await asyncpg.create_pool(pg_dsn, min_size=1, max_size=1)
            try:
                with pytest.raises(alkstore.InvalidOptions, match=r"pool\.connection\(\)"):
                    mine.using(pool)
            finally:
                await pool.close()

    asyncio.run(scenario())
