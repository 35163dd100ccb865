"""The drivers against a real PostgreSQL server (a throwaway :class:`TempCluster`).

Every scenario is written once, as a coroutine over a thin async facade: for a sync driver
the facade calls the driver directly (blocking inside ``asyncio.run`` is fine in a test), for
an async driver it awaits. Pool exclusivity is tested with threads for the sync drivers and
tasks for the async ones.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import pg8000.dbapi
import pg8000.native
import psycopg
import psycopg_pool
import pytest

from alkstore.conformance.cluster import TempCluster
from alkstore.core.plans import Isolation, Row, Statement
from alkstore.drivers import async_driver, sync_driver
from alkstore.drivers.base import (
    AsyncDriver,
    AsyncSession,
    AsyncSource,
    DriverSettings,
    ErrorInfo,
    SyncDriver,
    SyncSession,
    SyncSource,
)
from alkstore.drivers.common import parse_dsn
from alkstore.drivers.pool import AsyncPool, PoolClosed, SyncPool

SCHEMA = """
CREATE TABLE items (
    tag text NOT NULL,
    n int NOT NULL,
    CONSTRAINT items_tag_n_key UNIQUE (tag, n)
)
"""


@pytest.fixture(scope="module")
def _driver_dsn() -> Iterator[str]:
    with TempCluster() as cluster, psycopg.connect(cluster.dsn, autocommit=True) as conn:
        conn.execute(SCHEMA)
        yield cluster.dsn


def run(coro: Coroutine[Any, Any, None]) -> None:
    """Run one scenario to completion, with a deadline so a hang fails instead of stalls."""

    async def bounded() -> None:
        async with asyncio.timeout(60):
            await coro

    asyncio.run(bounded())


# --- a uniform async facade over sync and async drivers -------------------------------------


class Session:
    """One borrowed session, sync or async, behind async methods."""

    def __init__(self, session: SyncSession | AsyncSession, is_async: bool) -> None:
        self.native = session
        self.is_async = is_async

    async def raw(self, sql: str, *params: Any) -> list[Row]:
        """The rows as the driver returns them."""
        statement = Statement(sql, params)
        if self.is_async:
            return await self.native.execute(statement)  # type: ignore[misc]
        return self.native.execute(statement)  # type: ignore[return-value]

    async def q(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        """The rows as dicts, read through what a plan reads (``items``)."""
        return [dict(row.items()) for row in await self.raw(sql, *params)]

    @asynccontextmanager
    async def transaction(self, isolation: Isolation | None = None) -> AsyncIterator[None]:
        if self.is_async:
            async with self.native.transaction(isolation):  # type: ignore[union-attr]
                yield
        else:
            with self.native.transaction(isolation):  # type: ignore[union-attr]
                yield


class Source:
    """A source, sync or async, behind async methods."""

    def __init__(self, source: SyncSource | AsyncSource, is_async: bool) -> None:
        self.native = source
        self.is_async = is_async

    @asynccontextmanager
    async def session(self) -> AsyncIterator[Session]:
        if self.is_async:
            async with self.native.session() as s:  # type: ignore[union-attr]
                yield Session(s, True)
        else:
            with self.native.session() as s:  # type: ignore[union-attr]
                yield Session(s, False)

    async def q(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        async with self.session() as s:
            return await s.q(sql, *params)

    async def close(self) -> None:
        if self.is_async:
            await self.native.close()  # type: ignore[misc]
        else:
            self.native.close()


class Flavour:
    """One driver, and how a caller would use its library directly."""

    id = ""
    driver_name = ""
    is_async = False
    prepares = True  # whether prepared_statements=True leaves prepared statements behind

    def driver(self) -> SyncDriver | AsyncDriver:
        return async_driver(self.driver_name) if self.is_async else sync_driver(self.driver_name)

    async def open(self, dsn: str, **settings: Any) -> Source:
        driver = self.driver()
        opened = driver.open(dsn, DriverSettings(**settings))
        if self.is_async:
            opened = await opened  # type: ignore[misc]
        return Source(opened, self.is_async)  # type: ignore[arg-type]

    def adopt(self, native: object) -> Source | None:
        adopted = self.driver().adopt(native)
        return None if adopted is None else Source(adopted, self.is_async)

    def error_info(self, exc: BaseException) -> ErrorInfo | None:
        return self.driver().error_info(exc)

    # The library used directly, as a caller would.
    async def connect(self, dsn: str) -> Any:
        raise NotImplementedError

    async def begin(self, conn: Any) -> None:
        """Open a transaction the way a caller typically would."""
        raise NotImplementedError

    async def rollback(self, conn: Any) -> None:
        raise NotImplementedError

    async def ping(self, conn: Any) -> None:
        """Fails unless ``conn`` is open and usable."""
        raise NotImplementedError

    async def close_native(self, conn: Any) -> None:
        raise NotImplementedError

    async def pool(self, dsn: str) -> Any | None:
        """The library's own pool, or None when it has none."""
        return None

    async def close_pool(self, pool: Any) -> None:
        raise NotImplementedError


class PsycopgSync(Flavour):
    id = "psycopg"
    driver_name = "psycopg"

    async def connect(self, dsn: str) -> psycopg.Connection[Any]:
        return psycopg.connect(dsn)  # not autocommit: psycopg's default

    async def begin(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("SELECT 1")  # begins implicitly

    async def rollback(self, conn: psycopg.Connection[Any]) -> None:
        conn.rollback()

    async def ping(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("SELECT 1")
        conn.rollback()

    async def close_native(self, conn: psycopg.Connection[Any]) -> None:
        conn.close()

    async def pool(self, dsn: str) -> psycopg_pool.ConnectionPool[Any]:
        return psycopg_pool.ConnectionPool(dsn, min_size=1, max_size=2, open=True)

    async def close_pool(self, pool: psycopg_pool.ConnectionPool[Any]) -> None:
        pool.close()


class PsycopgAsync(Flavour):
    id = "psycopg-async"
    driver_name = "psycopg"
    is_async = True

    async def connect(self, dsn: str) -> psycopg.AsyncConnection[Any]:
        return await psycopg.AsyncConnection.connect(dsn)

    async def begin(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute("SELECT 1")

    async def rollback(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.rollback()

    async def ping(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.execute("SELECT 1")
        await conn.rollback()

    async def close_native(self, conn: psycopg.AsyncConnection[Any]) -> None:
        await conn.close()

    async def pool(self, dsn: str) -> psycopg_pool.AsyncConnectionPool[Any]:
        pool = psycopg_pool.AsyncConnectionPool(dsn, min_size=1, max_size=2, open=False)
        await pool.open()
        return pool

    async def close_pool(self, pool: psycopg_pool.AsyncConnectionPool[Any]) -> None:
        await pool.close()


class Asyncpg(Flavour):
    id = "asyncpg"
    driver_name = "asyncpg"
    is_async = True

    async def connect(self, dsn: str) -> asyncpg.Connection[Any]:
        return await asyncpg.connect(dsn)

    async def begin(self, conn: asyncpg.Connection[Any]) -> None:
        await conn.execute("BEGIN")  # asyncpg's own transaction() refuses to nest in this

    async def rollback(self, conn: asyncpg.Connection[Any]) -> None:
        await conn.execute("ROLLBACK")

    async def ping(self, conn: asyncpg.Connection[Any]) -> None:
        await conn.fetchval("SELECT 1")

    async def close_native(self, conn: asyncpg.Connection[Any]) -> None:
        await conn.close()

    async def pool(self, dsn: str) -> asyncpg.Pool[Any]:
        return await asyncpg.create_pool(dsn, min_size=1, max_size=2)

    async def close_pool(self, pool: asyncpg.Pool[Any]) -> None:
        await pool.close()


class Pg8000(Flavour):
    id = "pg8000"
    driver_name = "pg8000"

    async def connect(self, dsn: str) -> pg8000.native.Connection:
        p = parse_dsn(dsn)
        return pg8000.native.Connection(p.user, host=p.host, port=p.port, database=p.database)

    async def begin(self, conn: pg8000.native.Connection) -> None:
        conn.run("BEGIN")

    async def rollback(self, conn: pg8000.native.Connection) -> None:
        conn.run("ROLLBACK")

    async def ping(self, conn: pg8000.native.Connection) -> None:
        conn.run("SELECT 1")

    async def close_native(self, conn: pg8000.native.Connection) -> None:
        conn.close()


FLAVOURS = [PsycopgSync(), PsycopgAsync(), Asyncpg(), Pg8000()]
SYNC_FLAVOURS = [f for f in FLAVOURS if not f.is_async]
ASYNC_FLAVOURS = [f for f in FLAVOURS if f.is_async]
POOL_FLAVOURS = [f for f in FLAVOURS if f.id != "pg8000"]

each = pytest.mark.parametrize("flavour", FLAVOURS, ids=lambda f: f.id)


def new_tag() -> str:
    return uuid.uuid4().hex


async def count(source: Source, tag: str) -> int:
    rows = await source.q("SELECT count(*)::int AS c FROM items WHERE tag = $1::text", tag)
    return int(rows[0]["c"])


# --- values ------------------------------------------------------------------------------


@each
def test_values_round_trip(flavour: Flavour, _driver_dsn: str) -> None:
    doc = {"a": [1, 2.5, {"b": None}], "é": "ü ✓", "q": 'it\'s "quoted" 100%'}
    one, two = uuid.uuid4(), uuid.uuid4()
    when = dt.datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    texts = ["a", "b c", 'q"x', "NULL", "null", "Null", "\\N", " pad ", "", "{}", "x,y"]
    texts += ["back\\slash", None, "ünï"]

    async def scenario() -> None:
        source = await flavour.open(_driver_dsn, pool_size=1)
        try:
            async with source.session() as s:
                [row] = await s.q(
                    "SELECT $1::text::jsonb::text AS j, $2::uuid AS u, $3::uuid[] AS us,"
                    " $4::uuid[] AS none, $5::timestamptz AS t, $6::timestamptz[] AS ts",
                    json.dumps(doc),
                    one,
                    [one, two],
                    [],
                    when,
                    [when, when + dt.timedelta(microseconds=1)],
                )
                assert json.loads(row["j"]) == doc
                assert str(row["u"]) == str(one)
                assert [str(u) for u in row["us"]] == [str(one), str(two)]
                assert row["none"] == []
                assert row["t"] == when and row["t"].microsecond == 123456
                assert row["t"].utcoffset() is not None
                assert row["ts"] == [when, when + dt.timedelta(microseconds=1)]

                [row] = await s.q(
                    "SELECT $1::bigint AS i, $2::int AS small, $3::boolean AS yes,"
                    " $4::boolean AS no, $5::float8 AS f, $6::text AS null, $7::text[] AS texts,"
                    " $8::int[] AS ints, $9::text AS plain",
                    2**40,
                    -7,
                    True,
                    False,
                    0.1,
                    None,
                    texts,
                    [1, None, 3],
                    "",
                )
                assert row == {
                    "i": 2**40,
                    "small": -7,
                    "yes": True,
                    "no": False,
                    "f": 0.1,
                    "null": None,
                    "texts": texts,
                    "ints": [1, None, 3],
                    "plain": "",
                }
                assert type(row["yes"]) is bool and type(row["i"]) is int
        finally:
            await source.close()

    run(scenario())


@each
def test_placeholders_and_percent(flavour: Flavour, _driver_dsn: str) -> None:
    async def scenario() -> None:
        source = await flavour.open(_driver_dsn, pool_size=1)
        try:
            async with source.session() as s:
                rows = await s.q(
                    "SELECT $1::int + $1::int AS twice, $2::text AS second,"
                    " '100%' AS pct, '%s %(x)s %%' AS fmt, $1::int % 5 AS modulo",
                    21,
                    "b",
                )
                assert rows == [
                    {"twice": 42, "second": "b", "pct": "100%", "fmt": "%s %(x)s %%", "modulo": 1}
                ]
                # Placeholders out of order, and no parameters at all.
                rows = await s.q("SELECT $2::text || $1::text AS s", "x", "y")
                assert rows == [{"s": "yx"}]
                assert await s.q("SELECT 'a%b' AS s") == [{"s": "a%b"}]
        finally:
            await source.close()

    run(scenario())


@each
def test_rows_read_by_name_and_rowless_statements_return_empty(
    flavour: Flavour, _driver_dsn: str
) -> None:
    tag = new_tag()

    async def scenario() -> None:
        source = await flavour.open(_driver_dsn, pool_size=1)
        try:
            async with source.session() as s:
                rows = await s.raw(
                    "SELECT n, n * 10 AS ten FROM generate_series(1, $1::int) AS n ORDER BY n", 3
                )
                assert [dict(row.items()) for row in rows] == [
                    {"n": 1, "ten": 10},
                    {"n": 2, "ten": 20},
                    {"n": 3, "ten": 30},
                ]
                first = rows[0]
                assert (first["n"], first.get("ten"), first.get("absent", 0)) == (1, 10, 0)
                assert "ten" in first and "absent" not in first
                assert list(first.keys()) == ["n", "ten"]
                assert await s.q("SELECT 1 AS one WHERE false") == []
                ins = "INSERT INTO items (tag, n) VALUES ($1::text, $2::int)"
                assert await s.q(ins, tag, 1) == []
                assert await s.q("UPDATE items SET n = n + 1 WHERE tag = $1::text", tag) == []
                assert await s.q("CREATE TEMP TABLE IF NOT EXISTS scratch (x int)") == []
                returning = "UPDATE items SET n = n + 1 WHERE tag = $1::text RETURNING n"
                assert await s.q(returning, tag) == [{"n": 3}]
        finally:
            await source.close()

    run(scenario())


@each
def test_application_name_and_prepared_statements(flavour: Flavour, _driver_dsn: str) -> None:
    prepared_count = "SELECT count(*)::int AS c FROM pg_prepared_statements"

    async def prepared_after_repeats(prepared: bool) -> int:
        source = await flavour.open(
            _driver_dsn, pool_size=1, prepared_statements=prepared, application_name="drv-test"
        )
        try:
            async with source.session() as s:
                [row] = await s.q("SELECT current_setting('application_name') AS a")
                assert row["a"] == "drv-test"
                for i in range(8):
                    assert await s.q("SELECT $1::int AS i", i) == [{"i": i}]
                return int((await s.q(prepared_count))[0]["c"])
        finally:
            await source.close()

    async def scenario() -> None:
        assert await prepared_after_repeats(False) == 0
        if flavour.prepares:
            assert await prepared_after_repeats(True) > 0

    run(scenario())


@each
def test_session_setup_runs_on_opened_connections_only(flavour: Flavour, _driver_dsn: str) -> None:
    setup = ("SET TimeZone TO 'UTC'", "SELECT set_config('work_mem', '1234kB', false)")
    settings = "SELECT current_setting('TimeZone') AS tz, current_setting('work_mem') AS mem"

    async def scenario() -> None:
        source = await flavour.open(_driver_dsn, pool_size=1, session_setup=setup)
        try:
            async with source.session() as s:
                assert await s.q(settings) == [{"tz": "UTC", "mem": "1234kB"}]
                await s.q("SET TimeZone TO 'Europe/Paris'")
            async with source.session() as s:  # the same connection, back from the pool
                [row] = await s.q(settings)
            # No driver resets a session on release (asyncpg's pool reset is off: alkstore's
            # plans leave no session state), so the setup does not run again.
            assert row == {"tz": "Europe/Paris", "mem": "1234kB"}
        finally:
            await source.close()
        native = await flavour.connect(_driver_dsn)
        try:
            adopted = flavour.adopt(native)
            assert adopted is not None
            async with adopted.session() as s:
                [row] = await s.q(settings)
                assert row["mem"] != "1234kB"  # a caller's connection is left as it is
        finally:
            await flavour.close_native(native)

    run(scenario())


# --- transactions ------------------------------------------------------------------------


class Boom(Exception):
    pass


@each
def test_autocommit_commit_and_rollback(flavour: Flavour, _driver_dsn: str) -> None:
    tag = new_tag()
    insert = "INSERT INTO items (tag, n) VALUES ($1::text, $2::int)"

    async def scenario() -> None:
        source = await flavour.open(_driver_dsn, pool_size=2)
        other = await flavour.open(_driver_dsn, pool_size=1)
        try:
            async with source.session() as s:
                await s.q(insert, tag, 1)  # outside a transaction: commits on its own
                assert await count(other, tag) == 1

                async with s.transaction():
                    await s.q(insert, tag, 2)
                    assert await count(other, tag) == 1  # not yet committed
                assert await count(other, tag) == 2

                with pytest.raises(Boom):
                    async with s.transaction():
                        await s.q(insert, tag, 3)
                        raise Boom
                assert await count(other, tag) == 2
                assert await count(source, tag) == 2

                # A failed statement inside: the transaction is rolled back, the session usable.
                with pytest.raises(Exception) as caught:
                    async with s.transaction():
                        await s.q(insert, tag, 4)
                        await s.q(insert, tag, 1)  # duplicate
                assert flavour.error_info(caught.value) is not None
                assert await count(other, tag) == 2
                assert await s.q("SELECT 1 AS ok") == [{"ok": 1}]
        finally:
            await source.close()
            await other.close()

    run(scenario())


@each
def test_isolation_levels_and_nesting(flavour: Flavour, _driver_dsn: str) -> None:
    tag = new_tag()
    level = "SELECT current_setting('transaction_isolation') AS level"
    insert = "INSERT INTO items (tag, n) VALUES ($1::text, $2::int)"

    async def scenario() -> None:
        source = await flavour.open(_driver_dsn, pool_size=1)
        other = await flavour.open(_driver_dsn, pool_size=1)
        try:
            async with source.session() as s:
                for isolation in Isolation:
                    async with s.transaction(isolation):
                        assert await s.q(level) == [{"level": isolation.value}]
                async with s.transaction(Isolation.REPEATABLE_READ):
                    await s.q(insert, tag, 1)
                    with pytest.raises(Boom):
                        async with s.transaction(Isolation.SERIALIZABLE):  # a savepoint
                            await s.q(insert, tag, 2)
                            assert await s.q(level) == [{"level": "repeatable read"}]
                            raise Boom
                    async with s.transaction():
                        await s.q(insert, tag, 3)
                    rows = await s.q(
                        "SELECT count(*)::int AS c FROM items WHERE tag = $1::text", tag
                    )
                    assert rows == [{"c": 2}]
                    assert await count(other, tag) == 0
                rows = await s.q("SELECT n FROM items WHERE tag = $1::text ORDER BY n", tag)
                assert rows == [{"n": 1}, {"n": 3}]
        finally:
            await source.close()
            await other.close()

    run(scenario())


# --- errors ------------------------------------------------------------------------------


@each
def test_error_info(flavour: Flavour, _driver_dsn: str) -> None:
    tag = new_tag()
    insert = "INSERT INTO items (tag, n) VALUES ($1::text, $2::int)"

    async def scenario() -> None:
        source = await flavour.open(_driver_dsn, pool_size=1)
        try:
            async with source.session() as s:
                await s.q(insert, tag, 1)
                with pytest.raises(Exception) as caught:
                    await s.q(insert, tag, 1)
                assert flavour.error_info(caught.value) == ErrorInfo("23505", "items_tag_n_key")
                with pytest.raises(Exception) as caught:
                    await s.q("SELECT 1 / $1::int AS x", 0)
                assert flavour.error_info(caught.value) == ErrorInfo("22012", None)
                assert await s.q("SELECT 2 AS ok") == [{"ok": 2}]
        finally:
            await source.close()

    run(scenario())
    assert flavour.error_info(ValueError("not a database error")) is None
    assert flavour.error_info(KeyError("C")) is None


@each
def test_broken_connection_is_discarded(flavour: Flavour, _driver_dsn: str) -> None:
    async def scenario() -> None:
        source = await flavour.open(_driver_dsn, pool_size=1)
        try:
            async with source.session() as s:
                [row] = await s.q("SELECT pg_backend_pid() AS pid")
                first = row["pid"]
                with pytest.raises(Exception):  # noqa: B017 - each library has its own
                    await s.q("SELECT pg_terminate_backend(pg_backend_pid())")
            async with source.session() as s:
                [row] = await s.q("SELECT pg_backend_pid() AS pid")
                assert row["pid"] != first
        finally:
            await source.close()

    run(scenario())


@each
def test_connection_left_inside_a_transaction_is_not_lent_again(
    flavour: Flavour, _driver_dsn: str
) -> None:
    tag = new_tag()

    async def scenario() -> None:
        source = await flavour.open(_driver_dsn, pool_size=1)
        try:
            async with source.session() as s:
                [row] = await s.q("SELECT pg_backend_pid() AS pid")
                first = row["pid"]
                await s.raw("BEGIN")
                await s.raw("INSERT INTO items (tag, n) VALUES ($1, 1)", tag)
                # the block ends with the transaction still open
            async with source.session() as s:
                [row] = await s.q("SELECT pg_backend_pid() AS pid")
                assert row["pid"] != first
                # the left transaction never committed: its row is gone with its connection
                assert await s.q("SELECT n FROM items WHERE tag = $1", tag) == []
        finally:
            await source.close()

    run(scenario())


@each
def test_connect_failure_is_reported_and_frees_the_slot(flavour: Flavour) -> None:
    import socket

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"

    async def scenario() -> None:
        source = await flavour.open(dsn, pool_size=1, connect_timeout=5)
        try:
            for _ in range(2):  # the failed attempt gave its slot back
                started = time.monotonic()
                with pytest.raises((OSError, Exception)):
                    await source.q("SELECT 1")
                assert time.monotonic() - started < 10
        finally:
            await source.close()

    run(scenario())


# --- pools -------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", SYNC_FLAVOURS, ids=lambda f: f.id)
def test_sync_pool_lends_a_connection_to_one_thread_at_a_time(
    flavour: Flavour, _driver_dsn: str
) -> None:
    driver = flavour.driver()
    assert isinstance(driver, SyncDriver)
    source = driver.open(_driver_dsn, DriverSettings(pool_size=2))
    lock = threading.Lock()
    holding: set[int] = set()
    seen: set[int] = set()
    most = 0
    errors: list[BaseException] = []
    # Holders meet in pairs: both of the pool's connections are lent out at the same moment.
    pair = threading.Barrier(2, timeout=30)

    def worker() -> None:
        nonlocal most
        try:
            with source.session() as s:
                [row] = s.execute(Statement("SELECT pg_backend_pid() AS pid"))
                pid = row["pid"]
                with lock:
                    assert pid not in holding, f"backend {pid} lent to two threads at once"
                    holding.add(pid)
                    seen.add(pid)
                    most = max(most, len(holding))
                pair.wait()
                with lock:
                    holding.remove(pid)
        except BaseException as exc:
            errors.append(exc)
            pair.abort()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        source.close()
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    assert most == 2
    assert len(seen) <= 2


@pytest.mark.parametrize("flavour", ASYNC_FLAVOURS, ids=lambda f: f.id)
def test_async_pool_lends_a_connection_to_one_task_at_a_time(
    flavour: Flavour, _driver_dsn: str
) -> None:
    async def scenario() -> None:
        driver = flavour.driver()
        assert isinstance(driver, AsyncDriver)
        source = await driver.open(_driver_dsn, DriverSettings(pool_size=2))
        holding: set[int] = set()
        seen: set[int] = set()
        most = 0
        pair = asyncio.Barrier(2)

        async def worker() -> None:
            nonlocal most
            async with source.session() as s:
                [row] = await s.execute(Statement("SELECT pg_backend_pid() AS pid"))
                pid = row["pid"]
                assert pid not in holding, f"backend {pid} lent to two tasks at once"
                holding.add(pid)
                seen.add(pid)
                most = max(most, len(holding))
                await pair.wait()
                holding.remove(pid)

        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(8):
                    group.create_task(worker())
        finally:
            await source.close()
        assert most == 2
        assert len(seen) <= 2

    run(scenario())


# --- adopting the caller's connection or pool --------------------------------------------


@each
def test_adopt_connection_in_transaction_uses_a_savepoint(
    flavour: Flavour, _driver_dsn: str
) -> None:
    tag = new_tag()
    insert = "INSERT INTO items (tag, n) VALUES ($1::text, $2::int)"

    async def scenario() -> None:
        other = await flavour.open(_driver_dsn, pool_size=1)
        conn = await flavour.connect(_driver_dsn)
        try:
            await flavour.begin(conn)
            adopted = flavour.adopt(conn)
            assert adopted is not None
            async with adopted.session() as s:
                async with s.transaction(Isolation.SERIALIZABLE):
                    await s.q(insert, tag, 1)
                with pytest.raises(Boom):
                    async with s.transaction():
                        await s.q(insert, tag, 2)
                        raise Boom
                # The caller's transaction sees it.
                sql = "SELECT count(*)::int AS c FROM items WHERE tag = $1::text"
                assert await s.q(sql, tag) == [{"c": 1}]
            assert await count(other, tag) == 0  # but nothing was committed
            await flavour.rollback(conn)
            assert await count(other, tag) == 0

            await adopted.close()
            await flavour.ping(conn)  # close() left the caller's connection open
        finally:
            await flavour.close_native(conn)
            await other.close()

    run(scenario())


@each
def test_adopt_idle_connection_runs_our_transaction(flavour: Flavour, _driver_dsn: str) -> None:
    tag = new_tag()
    insert = "INSERT INTO items (tag, n) VALUES ($1::text, $2::int)"

    async def scenario() -> None:
        other = await flavour.open(_driver_dsn, pool_size=1)
        conn = await flavour.connect(_driver_dsn)
        try:
            adopted = flavour.adopt(conn)
            assert adopted is not None
            async with adopted.session() as s, s.transaction(Isolation.REPEATABLE_READ):
                level = await s.q("SELECT current_setting('transaction_isolation') AS l")
                assert level == [{"l": "repeatable read"}]
                await s.q(insert, tag, 1)
            assert await count(other, tag) == 1  # our own transaction, committed
            await adopted.close()
            await flavour.ping(conn)
        finally:
            await flavour.close_native(conn)
            await other.close()

    run(scenario())


def test_adopt_psycopg_connection_keeps_callers_transaction_semantics(_driver_dsn: str) -> None:
    tag = new_tag()
    insert = "INSERT INTO items (tag, n) VALUES ($1::text, $2::int)"
    other = sync_driver("psycopg").open(_driver_dsn, DriverSettings(pool_size=1))

    def visible() -> int:
        with other.session() as s:
            sql = "SELECT count(*)::int AS c FROM items WHERE tag = $1::text"
            return int(s.execute(Statement(sql, (tag,)))[0]["c"])

    try:
        # Not autocommit, idle: our statement begins the caller's transaction, which we
        # neither commit nor leave.
        with psycopg.connect(_driver_dsn) as conn:
            adopted = sync_driver("psycopg").adopt(conn)
            assert adopted is not None
            with adopted.session() as s:
                s.execute(Statement(insert, (tag, 1)))
            assert conn.autocommit is False
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
            assert visible() == 0
            conn.rollback()
            assert visible() == 0

            # Inside the caller's psycopg transaction block: ours is a savepoint in it.
            with conn.transaction():
                with adopted.session() as s, s.transaction():
                    s.execute(Statement(insert, (tag, 2)))
                assert visible() == 0
            assert visible() == 1
            adopted.close()
            assert not conn.closed
    finally:
        other.close()


def test_adopt_pg8000_dbapi_connection_keeps_callers_transaction_semantics(
    _driver_dsn: str,
) -> None:
    tag = new_tag()
    insert = "INSERT INTO items (tag, n) VALUES ($1::text, $2::int)"
    p = parse_dsn(_driver_dsn)
    other = sync_driver("pg8000").open(_driver_dsn, DriverSettings(pool_size=1))

    def visible() -> int:
        with other.session() as s:
            sql = "SELECT count(*)::int AS c FROM items WHERE tag = $1::text"
            return int(s.execute(Statement(sql, (tag,)))[0]["c"])

    conn = pg8000.dbapi.connect(p.user, host=p.host, port=p.port, database=p.database)
    try:
        assert conn.autocommit is False
        adopted = sync_driver("pg8000").adopt(conn)
        assert adopted is not None
        with adopted.session() as s:
            s.execute(Statement(insert, (tag, 1)))  # begins the caller's transaction
            with s.transaction():  # so this is a savepoint
                s.execute(Statement(insert, (tag, 2)))
        assert visible() == 0
        conn.rollback()
        assert visible() == 0
        with adopted.session() as s:
            s.execute(Statement(insert, (tag, 3)))
        conn.commit()
        assert visible() == 1
        adopted.close()
        conn.cursor().execute("SELECT 1")
    finally:
        conn.close()
        other.close()


def test_pg8000_prepares_on_the_fifth_run_and_keeps_at_most_prepared_max(
    _driver_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import alkstore.drivers.pg8000 as driver

    monkeypatch.setattr(driver, "PREPARED_MAX", 2)
    source = sync_driver("pg8000").open(_driver_dsn, DriverSettings(pool_size=1))
    prepared = "SELECT count(*)::int AS c FROM pg_prepared_statements WHERE statement = $1::text"

    def count(s: SyncSession, sql: str) -> int:
        return int(s.execute(Statement(prepared, (sql,)))[0]["c"])

    try:
        with source.session() as s:
            queries = [f"SELECT $1::int + {k} AS i" for k in range(3)]
            for run in range(1, driver.PREPARE_THRESHOLD + 1):
                assert s.execute(Statement(queries[0], (run,))) == [{"i": run}]
                assert count(s, queries[0]) == (1 if run == driver.PREPARE_THRESHOLD else 0)
            for sql in queries[1:]:
                for run in range(driver.PREPARE_THRESHOLD):
                    assert s.execute(Statement(sql, (run,)))[0]["i"] == run + queries.index(sql)
            # The count query was prepared too (its fifth run): the two latest to be prepared
            # are kept, queries[0] and then the count query were closed.
            assert [count(s, sql) for sql in queries] == [0, 1, 1]
            total = "SELECT count(*)::int AS c FROM pg_prepared_statements"
            assert s.execute(Statement(total)) == [{"c": 2}]
    finally:
        source.close()


def test_pg8000_prepares_again_after_the_result_type_changed(_driver_dsn: str) -> None:
    table = f"t_{new_tag()}"
    source = sync_driver("pg8000").open(_driver_dsn, DriverSettings(pool_size=1))
    select = f"SELECT * FROM {table}"
    try:
        with source.session() as s:
            s.execute(Statement(f"CREATE TABLE {table} (a int)"))
            s.execute(Statement(f"INSERT INTO {table} VALUES (1)"))
            for _ in range(6):
                assert s.execute(Statement(select)) == [{"a": 1}]
            s.execute(Statement(f"ALTER TABLE {table} ADD COLUMN b int"))
            with pytest.raises(pg8000.exceptions.DatabaseError) as failed:
                s.execute(Statement(select))
            assert failed.value.args[0]["C"] == "0A000"
            assert s.execute(Statement(select)) == [{"a": 1, "b": None}]
            s.execute(Statement(f"DROP TABLE {table}"))
    finally:
        source.close()


def test_adopt_asyncpg_transaction_block(_driver_dsn: str) -> None:
    tag = new_tag()
    insert = "INSERT INTO items (tag, n) VALUES ($1::text, $2::int)"

    async def scenario() -> None:
        conn = await asyncpg.connect(_driver_dsn)
        try:
            adopted = async_driver("asyncpg").adopt(conn)
            assert adopted is not None
            with pytest.raises(Boom):
                async with conn.transaction():
                    async with adopted.session() as s, s.transaction():
                        await s.execute(Statement(insert, (tag, 1)))
                    raise Boom
            n = await conn.fetchval("SELECT count(*) FROM items WHERE tag = $1", tag)
            assert n == 0
            # A connection acquired from a pool (a proxy) is adopted as a connection.
            pool = asyncpg.create_pool(_driver_dsn, min_size=1, max_size=1)
            async with pool, pool.acquire() as proxy:
                adopted = async_driver("asyncpg").adopt(proxy)
                assert adopted is not None
                async with adopted.session() as s:
                    [row] = await s.execute(Statement("SELECT 1 AS x"))
                    assert dict(row.items()) == {"x": 1}
        finally:
            await conn.close()

    run(scenario())


@pytest.mark.parametrize("flavour", POOL_FLAVOURS, ids=lambda f: f.id)
def test_adopt_native_pool(flavour: Flavour, _driver_dsn: str) -> None:
    tag = new_tag()
    insert = "INSERT INTO items (tag, n) VALUES ($1::text, $2::int)"

    async def scenario() -> None:
        other = await flavour.open(_driver_dsn, pool_size=1)
        pool = await flavour.pool(_driver_dsn)
        try:
            adopted = flavour.adopt(pool)
            assert adopted is not None
            async with adopted.session() as s:
                await s.q(insert, tag, 1)  # commits on its own, as on an opened pool
                assert await count(other, tag) == 1
                async with s.transaction(Isolation.SERIALIZABLE):
                    rows = await s.q("SELECT current_setting('transaction_isolation') AS l")
                    assert rows == [{"l": "serializable"}]
                    await s.q(insert, tag, 2)
                assert await count(other, tag) == 2
            await adopted.close()
            # The pool is still open, and its connections are as the caller configured them.
            if isinstance(pool, psycopg_pool.ConnectionPool):
                with pool.connection() as conn:
                    assert conn.autocommit is False
            elif isinstance(pool, psycopg_pool.AsyncConnectionPool):
                async with pool.connection() as aconn:
                    assert aconn.autocommit is False
            else:
                assert await pool.fetchval("SELECT 1") == 1
        finally:
            await flavour.close_pool(pool)
            await other.close()

    run(scenario())


@each
def test_adopt_returns_none_for_foreign_objects(flavour: Flavour, _driver_dsn: str) -> None:
    driver = flavour.driver()
    for foreign in (object(), _driver_dsn, None, 42):
        assert driver.adopt(foreign) is None

    async def scenario() -> None:
        # Another library's connection is foreign too.
        for other in FLAVOURS:
            if other.driver_name == flavour.driver_name and other.is_async == flavour.is_async:
                continue
            if other.driver_name == flavour.driver_name:
                continue  # psycopg sync vs async: checked below
            conn = await other.connect(_driver_dsn)
            try:
                assert driver.adopt(conn) is None
            finally:
                await other.close_native(conn)
        if flavour.driver_name == "psycopg":
            counterpart = PsycopgAsync() if not flavour.is_async else PsycopgSync()
            conn = await counterpart.connect(_driver_dsn)
            try:
                assert driver.adopt(conn) is None
            finally:
                await counterpart.close_native(conn)

    run(scenario())


def test_driver_lookup() -> None:
    from alkstore.drivers import names

    assert {sync_driver(name).name for name in names(is_async=False)} == {"psycopg", "pg8000"}
    assert {async_driver(name).name for name in names(is_async=True)} == {"psycopg", "asyncpg"}


def test_parse_dsn() -> None:
    p = parse_dsn("postgresql://u%40x:p%3Aw@db.example:6543/my%20db?sslmode=disable")
    assert (p.user, p.password, p.host, p.port, p.database, p.sslmode) == (
        "u@x",
        "p:w",
        "db.example",
        6543,
        "my db",
        "disable",
    )
    p = parse_dsn("postgres://127.0.0.1/postgres?user=alice&port=7000")
    assert (p.user, p.host, p.port, p.database) == ("alice", "127.0.0.1", 7000, "postgres")
    with pytest.raises(ValueError):
        parse_dsn("mysql://x@y/z")


# --- the generic pools, without a server ------------------------------------------------------


class FakeConn:
    def __init__(self, n: int) -> None:
        self.n = n
        self.ok = True
        self.closed = False


class FakeFactory:
    def __init__(self) -> None:
        self.opened: list[FakeConn] = []
        self.fail = False

    def connect(self) -> FakeConn:
        if self.fail:
            raise ConnectionRefusedError("no server")
        conn = FakeConn(len(self.opened))
        self.opened.append(conn)
        return conn

    def close(self, conn: FakeConn) -> None:
        conn.closed = True

    async def aconnect(self) -> FakeConn:
        return self.connect()

    async def aclose(self, conn: FakeConn) -> None:
        self.close(conn)


def test_sync_pool_reuses_discards_and_closes() -> None:
    f = FakeFactory()
    pool = SyncPool(f.connect, f.close, lambda c: c.ok and not c.closed, size=1)
    with pool.lease() as a:
        pass
    with pool.lease() as b:
        assert b.connection is a.connection  # reused
        b.discard = True
    assert a.connection.closed
    with pool.lease() as c:
        assert c.connection is not a.connection
        c.connection.ok = False  # fails the reusable check
    assert c.connection.closed
    f.fail = True
    for _ in range(2):  # a failed connect gives its slot back
        with pytest.raises(ConnectionRefusedError), pool.lease():
            pass
    f.fail = False
    with pool.lease() as d:
        pool.close()
        assert not d.connection.closed  # lent out: closed on return
    assert d.connection.closed
    with pytest.raises(PoolClosed), pool.lease():
        pass
    assert len(f.opened) == 3


def test_sync_pool_hands_a_returned_connection_to_the_waiting_thread() -> None:
    f = FakeFactory()
    pool = SyncPool(f.connect, f.close, lambda c: not c.closed, size=1)
    order: list[str] = []

    def borrow(name: str) -> None:
        with pool.lease():
            order.append(name)

    with pool.lease():
        waiting = threading.Thread(target=borrow, args=("waited",))
        waiting.start()
        deadline = time.monotonic() + 10
        while not pool._waiters:  # the thread is now waiting for the one connection
            assert time.monotonic() < deadline, "the thread never waited"
            time.sleep(0.001)
    # Back at once: the returned connection went to the waiting thread, so this waits.
    borrow("came back")
    waiting.join(10)
    assert order == ["waited", "came back"]


def test_pools_ask_whether_an_idle_connection_is_alive_only_when_lending_it() -> None:
    f = FakeFactory()
    asked: list[int] = []
    dead: set[int] = set()

    def alive(conn: FakeConn) -> bool:
        asked.append(conn.n)
        return conn.n not in dead

    pool = SyncPool(f.connect, f.close, lambda c: not c.closed, size=1, alive=alive)
    with pool.lease() as a:
        pass
    assert asked == []  # a new connection, and its return: no poll
    with pool.lease() as b:
        assert b.connection is a.connection
    assert asked == [0]
    dead.add(0)  # its server session ended while it sat idle
    with pool.lease() as c:
        assert c.connection is not a.connection
    assert a.connection.closed
    assert asked == [0, 0]

    async def run_async() -> None:
        apool = AsyncPool(f.aconnect, f.aclose, lambda c: not c.closed, size=1, alive=alive)
        async with apool.lease() as x:
            pass
        dead.add(x.connection.n)
        async with apool.lease() as y:
            assert y.connection is not x.connection
        assert x.connection.closed

    asyncio.run(run_async())


def test_async_pool_wakes_waiters_on_close_and_survives_cancelled_waiters() -> None:
    async def scenario() -> None:
        f = FakeFactory()
        pool = AsyncPool(f.aconnect, f.aclose, lambda c: not c.closed, size=1)
        got: list[int] = []

        async def borrow() -> None:
            async with pool.lease() as lease:
                got.append(lease.connection.n)

        async with pool.lease() as held:
            cancelled = asyncio.create_task(borrow())
            waiting = asyncio.create_task(borrow())
            await asyncio.sleep(0)  # both are now waiting for the one connection
            cancelled.cancel()
            await asyncio.sleep(0)
        await waiting  # the cancelled waiter did not swallow the freed slot
        assert got == [held.connection.n] and cancelled.cancelled()

        async with pool.lease():
            blocked = asyncio.create_task(borrow())
            await asyncio.sleep(0)
            await pool.close()
            with pytest.raises(PoolClosed):
                await blocked
        assert all(c.closed for c in f.opened)

    run(scenario())


def test_async_pool_wakes_one_waiter_per_return_in_arrival_order() -> None:
    async def scenario() -> None:
        f = FakeFactory()
        pool = AsyncPool(f.aconnect, f.aclose, lambda c: not c.closed, size=1)
        order: list[int] = []
        loop = asyncio.get_running_loop()
        scheduled = 0
        call_soon = loop.call_soon

        def counting(*args: Any, **kw: Any) -> Any:
            nonlocal scheduled
            scheduled += 1
            return call_soon(*args, **kw)

        async def borrow(i: int) -> None:
            async with pool.lease():
                order.append(i)

        async with pool.lease():
            tasks = [asyncio.create_task(borrow(i)) for i in range(50)]
            for _ in range(3):
                await asyncio.sleep(0)  # every borrower is now waiting
            loop.call_soon = counting  # type: ignore[method-assign]
        # The return woke the first waiter only: it alone was scheduled (waking all fifty
        # scheduled every one of them, and each of them again on every later return).
        assert scheduled <= 2
        loop.call_soon = call_soon  # type: ignore[method-assign]
        await asyncio.wait_for(asyncio.gather(*tasks), 10)
        assert order == list(range(50))

    run(scenario())


def test_async_pool_hands_a_returned_connection_to_the_waiting_borrower() -> None:
    async def scenario() -> None:
        f = FakeFactory()
        pool = AsyncPool(f.aconnect, f.aclose, lambda c: not c.closed, size=1)
        order: list[str] = []

        async def borrow(name: str) -> None:
            async with pool.lease():
                order.append(name)

        async def again() -> None:
            async with pool.lease():
                waiting = asyncio.create_task(borrow("waited"))
                await asyncio.sleep(0)
            # Back at once, without letting the waiting task run: it queues behind it.
            await borrow("came back")
            await waiting

        await asyncio.wait_for(again(), 10)
        assert order == ["waited", "came back"]

    run(scenario())


def test_async_pool_waiter_cancelled_after_its_wake_up_passes_it_on() -> None:
    async def scenario() -> None:
        f = FakeFactory()
        pool = AsyncPool(f.aconnect, f.aclose, lambda c: not c.closed, size=1)
        got: list[str] = []

        async def borrow(name: str) -> None:
            async with pool.lease():
                got.append(name)

        async with pool.lease():
            first = asyncio.create_task(borrow("first"))
            second = asyncio.create_task(borrow("second"))
            await asyncio.sleep(0)
        first.cancel()  # the return above woke it; it is cancelled before it runs
        await asyncio.wait_for(second, 10)  # the wake-up went on to the next waiter
        assert got == ["second"] and first.cancelled()

    run(scenario())


def test_async_pool_cancelled_while_closing_a_dead_idle_connection_frees_its_slot() -> None:
    async def scenario() -> None:
        f = FakeFactory()
        closing = asyncio.Event()
        dead: set[int] = set()

        async def slow_close(conn: FakeConn) -> None:
            closing.set()
            await asyncio.Event().wait()  # a close that never ends (a server gone quiet)

        pool = AsyncPool(
            f.aconnect, slow_close, lambda c: True, size=1, alive=lambda c: c.n not in dead
        )
        async with pool.lease() as first:
            pass
        dead.add(first.connection.n)  # its session ended while it sat idle
        stuck = asyncio.create_task(pool.lease().__aenter__())
        await asyncio.wait_for(closing.wait(), 10)
        stuck.cancel()
        with pytest.raises(asyncio.CancelledError):
            await stuck
        async with asyncio.timeout(10), pool.lease() as again:  # the slot came back
            assert again.connection is not first.connection

    run(scenario())


def test_async_pool_waiter_cancelled_after_close_is_cancelled() -> None:
    async def scenario() -> None:
        f = FakeFactory()
        pool = AsyncPool(f.aconnect, f.aclose, lambda c: not c.closed, size=1)
        async with pool.lease():
            waiting = asyncio.create_task(pool.lease().__aenter__())
            await asyncio.sleep(0)
            await pool.close()  # fails the waiter with PoolClosed...
            waiting.cancel()  # ...and it is cancelled before it runs
            with pytest.raises(asyncio.CancelledError):
                await waiting

    run(scenario())


def test_async_pool_closes_a_connection_handed_to_a_waiter_cancelled_after_close() -> None:
    async def scenario() -> None:
        f = FakeFactory()
        pool = AsyncPool(f.aconnect, f.aclose, lambda c: not c.closed, size=1)
        async with pool.lease() as held:
            waiting = asyncio.create_task(pool.lease().__aenter__())
            await asyncio.sleep(0)
        # The return handed the connection to the waiter; the pool closes, the waiter is
        # cancelled, and the connection it was handed is closed, not kept in a closed pool.
        await pool.close()
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert held.connection.closed

    run(scenario())


@pytest.mark.parametrize("binary", [True, False])
def test_psycopg_reads_year_10000_in_a_zone_east_of_utc_as_the_latest_time(
    pg_dsn: str, binary: bool
) -> None:
    from alkstore.drivers.psycopg import _bind_lists_in_binary

    latest = dt.datetime.max.replace(tzinfo=dt.UTC)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        _bind_lists_in_binary(conn)
        conn.execute("SET TimeZone TO 'Asia/Tokyo'")
        cur = conn.cursor(binary=binary)
        row = cur.execute(
            "SELECT '9999-12-31 23:00:00+00'::timestamptz, '2026-12-01 12:00:00+00'::timestamptz"
        ).fetchone()
    assert row is not None
    assert row[0] == latest
    assert row[1] == dt.datetime(2026, 12, 1, 12, tzinfo=dt.UTC)
