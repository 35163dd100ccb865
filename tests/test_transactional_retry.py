"""A transactional worker runs a call again after a serialization failure of its transaction
(docs/workers.md, "Transactional workers"), on both faces, a bounded number of times.

The failure is the server's own: the handler's statement raises SQLSTATE 40001, as a
conflicting transaction would make it under SERIALIZABLE, so the driver's real exception
reaches the worker.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable

import psycopg
import pytest

import alkstore
from alkstore import JobState
from alkstore.core.plans import MAX_SERIALIZATION_RETRIES
from alkstore.worker import AsyncJobContext, JobContext

CONFLICT = "DO $$ BEGIN RAISE EXCEPTION 'conflict' USING ERRCODE = '40001'; END $$"
FAST = {"poll_interval": 0.05, "watch_interval": 0.05, "maintenance_interval": 0.2}


def _wait_for(check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.02)


def _create_side(dsn: str, schema: str) -> str:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {schema}.side (id uuid)")
        return f"{schema}.side"


def _side_rows(dsn: str, table: str) -> list[uuid.UUID]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        return [row[0] for row in conn.execute(f"SELECT id FROM {table}").fetchall()]


def test_a_serialization_failure_runs_the_call_again(pg_dsn: str, schema_name: str) -> None:
    calls: list[uuid.UUID] = []
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q", retry_limit=0)
        table = _create_side(pg_dsn, schema_name)

        def handler(job: alkstore.Job, ctx: JobContext) -> str:
            calls.append(job.id)
            ctx.connection.execute(f"INSERT INTO {table} (id) VALUES (%s)", (job.id,))
            if len(calls) == 1:
                ctx.connection.execute(CONFLICT)
            return "done"

        with store.work("q", handler, transactional=True, **FAST):
            job_id = store.send("q", {})
            _wait_for(lambda: store.get_job("q", job_id).state is JobState.COMPLETED)
        assert calls == [job_id, job_id]
        assert store.get_job("q", job_id).output == "done"
    # The first run's insert rolled back with its transaction.
    assert _side_rows(pg_dsn, table) == [job_id]


def test_a_call_that_keeps_failing_to_serialize_fails_its_job(
    pg_dsn: str, schema_name: str
) -> None:
    calls = 0
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q", retry_limit=0)

        def handler(job: alkstore.Job, ctx: JobContext) -> None:
            nonlocal calls
            calls += 1
            ctx.connection.execute(CONFLICT)

        with store.work("q", handler, transactional=True, **FAST):
            job_id = store.send("q", {})
            _wait_for(lambda: store.get_job("q", job_id).state is JobState.FAILED)
        assert calls == 1 + MAX_SERIALIZATION_RETRIES
        output = store.get_job("q", job_id).output
        assert "conflict" in output["message"]


def test_an_async_worker_runs_the_call_again(pg_dsn: str, schema_name: str) -> None:
    pytest.importorskip("asyncpg")
    calls: list[uuid.UUID] = []

    async def main() -> uuid.UUID:
        async with alkstore.connect_async(pg_dsn, schema=schema_name, driver="asyncpg") as store:
            await store.create_queue("q", retry_limit=0)
            side = await asyncio.to_thread(_create_side, pg_dsn, schema_name)

            async def handler(job: alkstore.Job, ctx: AsyncJobContext) -> str:
                calls.append(job.id)
                await ctx.connection.execute(f"INSERT INTO {side} (id) VALUES ($1)", job.id)
                if len(calls) == 1:
                    await ctx.connection.execute(CONFLICT)
                return "done"

            worker = await store.work("q", handler, transactional=True, **FAST)
            async with worker:
                job_id = await store.send("q", {})
                deadline = time.monotonic() + 20
                while (await store.get_job("q", job_id)).state is not JobState.COMPLETED:
                    assert time.monotonic() < deadline, "the job did not complete in time"
                    await asyncio.sleep(0.02)
            return job_id

    job_id = asyncio.run(main())
    assert calls == [job_id, job_id]
    assert _side_rows(pg_dsn, f"{schema_name}.side") == [job_id]
