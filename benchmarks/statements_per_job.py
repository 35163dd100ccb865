"""Statements, plans and CPU per job of one alkstore drain, from ``pg_stat_statements``.

``python benchmarks/statements_per_job.py --driver psycopg --batch 1 [--jobs 3000]
[--consumers 8] [--raw]`` starts a throwaway durable server (the bench server's settings,
``alkstore.bench.server``) with ``pg_stat_statements`` loaded and ``track_planning`` on,
prefills and warms up as ``alkstore bench drain`` does (``--raw``: the raw-SQL ceiling of
``bench peers`` instead), resets the statistics after the harness's preparation and drains.
It prints jobs/s, the client's and the server processes' CPU per job, and per statement its
calls and plans per job and its mean planning and execution time. Planning is timed only
here: ``track_planning`` costs some server time of its own, so compare runs of this script
with each other, not with ``bench drain``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import time
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import psycopg

from alkstore.bench.drain import (
    QUEUE,
    WARMUP_QUEUE,
    Backend,
    send_in_batches,
    send_in_batches_async,
    store_tasks,
    store_threads,
)
from alkstore.bench.loops import Tally, run_threads
from alkstore.bench.measure import CpuUse, cpu_window, local_postmaster
from alkstore.bench.peers.rawsql import Connections, Statements
from alkstore.bench.server import BENCH_MAX_CONNECTIONS, DURABLE_SETTINGS, prepare_drain
from alkstore.conformance.cluster import TempCluster

WARMUP = 2000
SETTINGS = {
    **DURABLE_SETTINGS,
    "shared_preload_libraries": "pg_stat_statements",
    "pg_stat_statements.track_planning": "on",
    "pg_stat_statements.track_utility": "on",
}
REPORT = """SELECT calls, plans, total_plan_time, total_exec_time,
        left(regexp_replace(query, '\\s+', ' ', 'g'), 90) AS query
    FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'
    ORDER BY calls DESC LIMIT 12"""


@attrs.define
class Measured:
    """The drain's wall time and CPU, taken from the statistics' reset to the drain's end."""

    dsn: str
    postmaster: int
    seconds: float = 0.0
    cpu: CpuUse = attrs.field(factory=CpuUse)

    @contextlib.contextmanager
    def window(self) -> Iterator[None]:
        """Reset ``pg_stat_statements``, then time the block."""
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_statements_reset()")
        began = time.perf_counter()
        with cpu_window(self.postmaster) as self.cpu:
            yield
        self.seconds = time.perf_counter() - began


def _drain_alkstore(m: Measured, driver: str, batch: int, jobs: int, consumers: int) -> None:
    backend = Backend(driver=driver)
    if not backend.is_async:
        with backend.open_sync(m.dsn, "profiled", pool_size=consumers) as store:
            for queue in (QUEUE, WARMUP_QUEUE):
                store.create_queue(queue)
            send_in_batches(lambda s: store.send_many(QUEUE, s), jobs)
            send_in_batches(lambda s: store.send_many(WARMUP_QUEUE, s), WARMUP)
            store_threads(store, WARMUP_QUEUE, consumers, batch, Tally(WARMUP), 600)
            prepare_drain(m.dsn, "steady")
            with m.window():
                store_threads(store, QUEUE, consumers, batch, Tally(jobs), 600, backend.handoff)
        return

    async def run_async() -> None:
        store = await backend.open_async(m.dsn, "profiled", pool_size=consumers)
        async with store:
            for queue in (QUEUE, WARMUP_QUEUE):
                await store.create_queue(queue)
            await send_in_batches_async(lambda s: store.send_many(QUEUE, s), jobs)
            await send_in_batches_async(lambda s: store.send_many(WARMUP_QUEUE, s), WARMUP)
            await store_tasks(store, WARMUP_QUEUE, consumers, batch, Tally(WARMUP), 600)
            prepare_drain(m.dsn, "steady")
            with m.window():
                await store_tasks(store, QUEUE, consumers, batch, Tally(jobs), 600, backend.handoff)

    asyncio.run(run_async())


def _drain_raw(m: Measured, batch: int, jobs: int, consumers: int) -> None:
    sql = Statements("ceiling")
    pool = Connections(m.dsn, consumers)
    try:
        with pool.cursor() as cur:
            cur.execute("CREATE SCHEMA ceiling")
            for ddl in sql.create:
                cur.execute(ddl)

        def fetch(n: int) -> Sequence[Any]:
            with pool.cursor() as cur:
                cur.execute(sql.claim, (n,), prepare=True)
                return [row[0] for row in cur.fetchall()]

        def complete(ids: Sequence[Any]) -> None:
            with pool.cursor() as cur:
                cur.execute(sql.complete, (list(ids),), prepare=True)

        def insert(count: int) -> None:
            data = [json.dumps({"n": n}) for n in range(count)]
            with pool.cursor() as cur:
                cur.execute(sql.insert, (data,))

        insert(WARMUP)
        run_threads(consumers, batch, fetch, complete, lambda i: i, Tally(WARMUP), 600)
        insert(jobs)
        prepare_drain(m.dsn, "steady")
        with m.window():
            run_threads(consumers, batch, fetch, complete, lambda i: i, Tally(jobs), 600)
    finally:
        pool.close()


def main() -> None:
    """Profile one drain and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--driver", default="psycopg", help="an alkstore bench driver name")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--consumers", type=int, default=8)
    parser.add_argument("--raw", action="store_true", help="the raw-SQL ceiling instead")
    args = parser.parse_args()
    with TempCluster(max_connections=BENCH_MAX_CONNECTIONS, settings=SETTINGS) as cluster:
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        postmaster = local_postmaster(cluster.dsn)
        assert postmaster is not None, "the throwaway server runs on this machine"
        m = Measured(cluster.dsn, postmaster)
        if args.raw:
            _drain_raw(m, args.batch, args.jobs, args.consumers)
        else:
            _drain_alkstore(m, args.driver, args.batch, args.jobs, args.consumers)
        with psycopg.connect(cluster.dsn, autocommit=True) as conn:
            rows = conn.execute(REPORT).fetchall()
    n = args.jobs
    client = 1e6 * (m.cpu.client_seconds or 0.0) / n
    server = 1e6 * (m.cpu.server_seconds or 0.0) / n
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(
        f"{'raw-sql' if args.raw else args.driver}, {args.batch} a fetch: "
        f"{n / m.seconds:,.0f} jobs/s, client CPU {client:.0f} µs/job, "
        f"server CPU {server:.0f} µs/job (load average {load})"
    )
    print("calls/job  plans/job  plan µs  exec µs  statement")
    for calls, plans, plan_ms, exec_ms, query in rows:
        print(
            f"{calls / n:9.3f}  {plans / n:9.3f}  {1e3 * plan_ms / max(plans, 1):7.0f}  "
            f"{1e3 * exec_ms / max(calls, 1):7.0f}  {query}"
        )


if __name__ == "__main__":
    main()
