"""Hostile input (issue 13, item 4): refused with InvalidOptions naming field and value before
anything is written, never a raw error, never a password in the message."""

from __future__ import annotations

import asyncio
import datetime as dt
import uuid
from typing import Any

import httpx
import psycopg
import pytest
from faultkit import open_store

from alkstore import InvalidOptions, connect, connect_async
from alkstore.conformance.cluster import TempCluster


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture(scope="module")
def store(fault_cluster: TempCluster) -> Any:
    handle = open_store(fault_cluster.dsn, "psycopg", f"v_{uuid.uuid4().hex[:12]}")
    handle.create_queue("q")
    yield handle
    handle.close()


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda s: s.send("q", "\ud800"), "data"),
        (lambda s: s.send("q", {"k": "a\udc00b"}), "data"),
        (lambda s: s.send("q", _nested(10_000)), "data"),
        (lambda s: s.send("q", 10**5000), "data"),
        (lambda s: s.send("q", None, singleton_key="\ud800"), "singleton_key"),
        (lambda s: s.send("q", None, group_id="a\x00b"), "group_id"),
        (lambda s: s.send("q", None, start_after=1e13), "start_after"),
        (lambda s: s.send("q", None, start_after=dt.timedelta.max), "start_after"),
        (lambda s: s.send("q", None, retry_delay=2**31 - 1, retry_backoff=True), "retry_delay"),
        (lambda s: s.create_queue("r", retry_delay=2**31 - 1, retry_backoff=True), "retry_delay"),
        (lambda s: s.fetch("q", batch_size=2**63), "batch_size"),
    ],
)
def test_hostile_input_is_refused_before_anything_is_written(
    store: Any, call: Any, field: str
) -> None:
    before = store.job_count()
    with pytest.raises(InvalidOptions) as info:
        call(store)
    assert info.value.field == field
    assert len(str(info.value)) < 1000
    assert store.job_count() == before


def test_a_huge_string_is_refused_without_echoing_it(store: Any) -> None:
    with pytest.raises(InvalidOptions) as info:
        store.send("q", "x" * (256 * 2**20))
    assert len(str(info.value)) < 1000


@pytest.mark.parametrize("schema", ["public", "information_schema", "pg_temp", "pg_catalog2"])
def test_reserved_schemas_are_refused(schema: str) -> None:
    with pytest.raises(InvalidOptions, match="reserved"):
        connect("postgresql://postgres@127.0.0.1:1/x", schema=schema)


DSNS = [
    "postgresql://u:s3cret-pw@127.0.0.1:notaport/db",
    "host=127.0.0.1 password=s3cret-pw",
    "postgresql://u:s3cret-pw@127.0.0.1:1/db?bogus=1",
    "postgresql://u:s3cret-pw@127.0.0.1:1/db",
]


def _chain(exc: BaseException | None) -> str:
    text = []
    while exc is not None:
        text.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    return " <- ".join(text)


@pytest.mark.parametrize("dsn", DSNS)
@pytest.mark.parametrize("driver", ["psycopg", "pg8000", "psycopg-async", "asyncpg"])
def test_no_password_in_any_message(dsn: str, driver: str) -> None:
    name = driver.removesuffix("-async")
    with pytest.raises(Exception) as info:
        if driver in ("psycopg", "pg8000"):
            connect(dsn, driver=name, connect_timeout=2)
        else:
            asyncio.run(_open_async(dsn, name))
    from alkstore import AlkstoreError

    assert isinstance(info.value, AlkstoreError), _chain(info.value)
    assert "s3cret-pw" not in _chain(info.value)


async def _open_async(dsn: str, driver: str) -> None:
    store = await connect_async(dsn, driver=driver, connect_timeout=2)
    await store.close()


EXTREMES = [
    dt.datetime(9999, 12, 31, tzinfo=dt.UTC),
    dt.datetime(1, 1, 1, tzinfo=dt.UTC),
    dt.datetime.max.replace(tzinfo=dt.UTC),
    dt.datetime(9999, 12, 31, 23, tzinfo=dt.timezone(dt.timedelta(hours=-5))),
]
"""Absolute times no driver round-trips with retention added (year 9999), or asyncpg stores
as ``-infinity`` (year 1), issue 29 item 2."""


@pytest.mark.parametrize("moment", EXTREMES, ids=str)
@pytest.mark.parametrize("variant", ["psycopg", "psycopg-async", "asyncpg", "pg8000"])
def test_an_absolute_time_out_of_range_is_refused(
    fault_cluster: TempCluster, moment: dt.datetime, variant: str
) -> None:
    store = open_store(fault_cluster.dsn, variant, f"v_{uuid.uuid4().hex[:12]}")
    try:
        store.create_queue("q")
        with pytest.raises(InvalidOptions) as info:
            store.send("q", {}, start_after=moment)
        assert info.value.field == "start_after"
        # Nothing was written, and every read still works.
        assert store.list_jobs("q") == []
        assert store.queue_stats("q").total == 0
        edge = dt.datetime(9900, 1, 1, tzinfo=dt.UTC)
        job_id = store.send("q", {}, start_after=edge)
        assert [j.id for j in store.list_jobs("q")] == [job_id]
        assert store.queue_stats("q").queued == 1
    finally:
        store.close()


PLANTED = [
    ("start_after", "-infinity"),
    ("start_after", "infinity"),
    ("keep_until", "infinity"),
    ("created_on", "-infinity"),
    ("keep_until", "20000-01-01"),
    ("start_after", "20000-01-01"),
]
"""Extreme times a row stored before validation (or by hand) can hold."""


PLANTED_CASES = [
    (variant, column, value)
    for variant in ("psycopg", "psycopg-async", "asyncpg", "pg8000")
    for column, value in PLANTED
    # asyncpg decodes timestamps in C and raises OverflowError past year 9999; a decoder of
    # alkstore's own would cost every fetched job: left open (issue 29), validation keeps
    # such times from being stored.
    if not (variant == "asyncpg" and value.startswith("20000"))
]


@pytest.mark.parametrize(("variant", "column", "value"), PLANTED_CASES)
def test_a_planted_extreme_time_does_not_break_reads(
    fault_cluster: TempCluster,
    admin: psycopg.Connection[Any],
    variant: str,
    column: str,
    value: str,
) -> None:
    """Read as the earliest or latest datetime (UTC); queue_stats leaves it out of the age."""
    schema = f"v_{uuid.uuid4().hex[:12]}"
    store = open_store(fault_cluster.dsn, variant, schema)
    try:
        store.create_queue("q")
        job_id = store.send("q", {})
        admin.execute(
            f"UPDATE {schema}.job SET {column} = %s::timestamptz WHERE id = %s", (value, job_id)
        )
        assert [j.id for j in store.list_jobs("q")] == [job_id]
        job = store.get_job("q", job_id)
        moment = getattr(job, column)
        extreme = dt.datetime.min if value.startswith("-") else dt.datetime.max
        assert moment == extreme.replace(tzinfo=dt.UTC)
        assert store.queue_stats("q").total == 1
    finally:
        store.close()


@pytest.mark.parametrize("driver", ["psycopg", "pg8000"])
def test_the_cli_and_the_dashboard_show_a_row_with_extreme_times(
    fault_cluster: TempCluster,
    admin: psycopg.Connection[Any],
    driver: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from alkstore.cli import main
    from alkstore.dashboard import DashboardSettings
    from dashboard_support import serve

    schema = f"v_{uuid.uuid4().hex[:12]}"
    with connect(fault_cluster.dsn, schema=schema) as store:
        store.create_queue("q")
        job_id = store.send("q", {})
        admin.execute(
            f"UPDATE {schema}.job SET start_after = '-infinity', keep_until = 'infinity', "
            "created_on = '-infinity' WHERE id = %s",
            (job_id,),
        )
        at = ["--dsn", fault_cluster.dsn, "--schema", schema, "--driver", driver]
        for command in (["jobs", "q"], ["job", "q", str(job_id)], ["queue", "q"], ["stats"]):
            for output in ([], ["--json"]):
                assert main([*command, *at, *output]) == 0, capsys.readouterr().err
        assert str(job_id) in capsys.readouterr().out
        settings = DashboardSettings(dsn=fault_cluster.dsn, schema=schema)
        with serve(settings) as url, httpx.Client(base_url=url) as client:
            for page in ("/", "/queues/q", f"/queues/q/jobs/{job_id}"):
                assert client.get(page).status_code == 200, page
