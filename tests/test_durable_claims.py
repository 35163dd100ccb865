"""``work(durable_claims=...)``: whether a worker's claim commits waiting for its WAL flush.

Observed inside the claim's own transaction: a trigger the test adds to the job table records
``current_setting('synchronous_commit')`` whenever a row becomes ``active``, i.e. the value
the claiming transaction commits with (``off`` commits without waiting for the flush). One
job per worker, sent while it idles, so the fetcher claims it (not a handler slot's
``complete_and_fetch``, which commits like any settlement). The stores connect to a database
of the test's whose default is ``synchronous_commit = on``, as on a production server (the
throwaway test cluster turns it off server-wide).
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore.engines.postgres.identifiers import quote_schema
from databases import scratch_database

SYNC_STORES: list[dict[str, Any]] = [
    {"driver": "psycopg"},
    {"driver": "pg8000"},
    # With no session of its own to LISTEN on (here: told it is behind a transaction
    # pooler), the fetcher claims on the store's pool, in a transaction of its own.
    {"driver": "psycopg", "pooler": "pgbouncer"},
]
ASYNC_DRIVERS = ["psycopg", "asyncpg"]
WAIT = 30.0
"""Seconds a test waits for its handler before failing."""


def _record_claims(dsn: str, schema: str) -> None:
    """Add the trigger that logs each claim's ``synchronous_commit`` to ``<schema>.claimed``."""
    s = quote_schema(schema)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {s}.claimed (id uuid, synchronous_commit text)")
        conn.execute(
            f"CREATE FUNCTION {s}.log_claim() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            f"INSERT INTO {s}.claimed VALUES (NEW.id, current_setting('synchronous_commit')); "
            "RETURN NULL; END $$"
        )
        conn.execute(
            f"CREATE TRIGGER log_claim AFTER UPDATE ON {s}.job FOR EACH ROW "
            f"WHEN (NEW.state = 'active' AND OLD.state <> 'active') "
            f"EXECUTE FUNCTION {s}.log_claim()"
        )


def _claimed_with(dsn: str, schema: str, job_id: uuid.UUID) -> list[str]:
    """The ``synchronous_commit`` of every claim of ``job_id``."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT synchronous_commit FROM {quote_schema(schema)}.claimed WHERE id = %s",
            (job_id,),
        ).fetchall()
    return [str(row[0]) for row in rows]


OPTIONS: dict[str, Any] = {"poll_interval": 0.05, "maintenance": False}


@pytest.fixture(scope="module")
def durable_dsn(pg_dsn: str) -> Iterator[str]:
    """A database of its own whose sessions default to ``synchronous_commit = on``."""
    with scratch_database(pg_dsn, "durable", synchronous_commit="on") as dsn:
        yield dsn


@pytest.mark.parametrize("connect", SYNC_STORES, ids=lambda c: "-".join(c.values()))
@pytest.mark.parametrize(("durable", "expected"), [(True, "on"), (False, "off")])
def test_a_worker_claims_durably_only_with_durable_claims(
    durable_dsn: str, schema_name: str, connect: dict[str, Any], durable: bool, expected: str
) -> None:
    with alkstore.connect(durable_dsn, schema=schema_name, **connect) as store:
        store.create_queue("q")
        _record_claims(durable_dsn, schema_name)
        handled = threading.Event()
        with store.work("q", lambda job: handled.set(), durable_claims=durable, **OPTIONS):
            job_id = store.send("q", 1)
            assert handled.wait(WAIT), "the worker never ran the job"
        assert store.get_job("q", job_id).state is alkstore.JobState.COMPLETED
    assert _claimed_with(durable_dsn, schema_name, job_id) == [expected]


@pytest.mark.parametrize("driver", ASYNC_DRIVERS)
@pytest.mark.parametrize(("durable", "expected"), [(True, "on"), (False, "off")])
def test_an_async_worker_claims_durably_only_with_durable_claims(
    durable_dsn: str, schema_name: str, driver: str, durable: bool, expected: str
) -> None:
    async def scenario() -> uuid.UUID:
        async with alkstore.connect_async(durable_dsn, schema=schema_name, driver=driver) as store:
            await store.create_queue("q")
            _record_claims(durable_dsn, schema_name)
            handled = asyncio.Event()

            async def handler(job: alkstore.Job) -> None:
                handled.set()

            worker = await store.work("q", handler, durable_claims=durable, **OPTIONS)
            async with worker:
                job_id = await store.send("q", 1)
                await asyncio.wait_for(handled.wait(), WAIT)
            job = await store.get_job("q", job_id)
            assert job is not None and job.state is alkstore.JobState.COMPLETED
            return job_id

    job_id = asyncio.run(scenario())
    assert _claimed_with(durable_dsn, schema_name, job_id) == [expected]
