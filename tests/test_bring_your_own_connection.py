"""A store on the caller's connection or pool: ``send`` joins the caller's transaction."""

from __future__ import annotations

import asyncio

import asyncpg
import pg8000.native
import psycopg
import psycopg_pool
import pytest

import alkstore
from alkstore.drivers.common import parse_dsn


class Rollback(Exception):
    """Raised inside a caller's transaction to roll it back."""


def _count(dsn: str, schema: str) -> int:
    with psycopg.connect(dsn) as conn:
        return conn.execute(f'SELECT count(*) FROM "{schema}".job').fetchone()[0]


def test_connect_leaves_a_non_autocommit_connection_idle(pg_dsn, schema_name):
    with psycopg.connect(pg_dsn) as conn:
        alkstore.connect(conn, schema=schema_name).close()
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert _count(pg_dsn, schema_name) == 0  # the schema was committed


def test_psycopg_send_joins_the_callers_transaction(pg_dsn, schema_name):
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        store = alkstore.connect(conn, schema=schema_name)
        store.create_queue("q")
        with pytest.raises(Rollback), conn.transaction():
            store.send("q", {"order": 1})
            assert _count(pg_dsn, schema_name) == 0  # not visible outside before commit
            raise Rollback
        assert _count(pg_dsn, schema_name) == 0
        with conn.transaction():
            store.send("q", {"order": 2})
        assert _count(pg_dsn, schema_name) == 1
        store.close()
        assert not conn.closed  # the caller's connection stays open


def test_psycopg_pool_is_adopted(pg_dsn, schema_name):
    with psycopg_pool.ConnectionPool(pg_dsn, min_size=1, max_size=2, open=True) as pool:
        with alkstore.connect(pool, schema=schema_name) as store:
            store.create_queue("q")
            store.send("q", 1)
            assert [j.data for j in store.fetch("q")] == [1]
        assert not pool.closed


def test_pg8000_send_joins_the_callers_transaction(pg_dsn, schema_name):
    p = parse_dsn(pg_dsn)
    conn = pg8000.native.Connection(p.user, host=p.host, port=p.port, database=p.database)
    try:
        store = alkstore.connect(conn, driver="pg8000", schema=schema_name)
        store.create_queue("q")
        conn.run("BEGIN")
        store.send("q", {"order": 1})
        conn.run("ROLLBACK")
        assert _count(pg_dsn, schema_name) == 0
        conn.run("BEGIN")
        store.send("q", {"order": 2})
        conn.run("COMMIT")
        assert _count(pg_dsn, schema_name) == 1
        store.close()
        assert conn.run("SELECT 1") == [[1]]
    finally:
        conn.close()


def test_asyncpg_send_joins_the_callers_transaction(pg_dsn, schema_name):
    async def scenario() -> int:
        conn = await asyncpg.connect(pg_dsn)
        try:
            store = await alkstore.connect_async(conn, driver="asyncpg", schema=schema_name)
            await store.create_queue("q")
            with pytest.raises(Rollback):
                async with conn.transaction():
                    await store.send("q", {"order": 1})
                    raise Rollback
            async with conn.transaction():
                await store.send("q", {"order": 2})
            await store.close()
            assert not conn.is_closed()
            return _count(pg_dsn, schema_name)
        finally:
            await conn.close()

    assert asyncio.run(scenario()) == 1


def test_psycopg_async_send_joins_the_callers_transaction(pg_dsn, schema_name):
    async def scenario() -> int:
        async with await psycopg.AsyncConnection.connect(pg_dsn, autocommit=True) as conn:
            async with alkstore.connect_async(conn, schema=schema_name) as store:
                await store.create_queue("q")
                with pytest.raises(Rollback):
                    async with conn.transaction():
                        await store.send("q", 1)
                        raise Rollback
                async with conn.transaction():
                    await store.send("q", 2)
            return _count(pg_dsn, schema_name)

    assert asyncio.run(scenario()) == 1


def test_a_foreign_object_is_refused(schema_name):
    with pytest.raises(TypeError, match="not a psycopg connection"):
        alkstore.connect(object(), schema=schema_name)


def test_bad_connect_options_fail_before_any_io():
    with pytest.raises(alkstore.InvalidOptions) as err:
        alkstore.connect("postgresql://127.0.0.1:1/none", schema="Bad-Name")
    assert err.value.field == "schema"
    with pytest.raises(alkstore.InvalidOptions) as err:
        alkstore.connect_async("postgresql://127.0.0.1:1/none", pool_size=0)
    assert err.value.field == "pool_size"
    with pytest.raises(alkstore.InvalidOptions) as err:
        alkstore.connect("mysql://127.0.0.1:1/none")
    assert err.value.field == "dsn"
