"""The claim stays an ordered walk of the fetch index before ANALYZE has seen the jobs.

Until autovacuum analyzes a burst of new jobs, PostgreSQL guesses that a queue holds a
handful of them. On PostgreSQL 15, from about 100,000 jobs on, it then claimed through a
bitmap scan and a sort of the whole queue (240 ms a fetch). The engine's session setup rules
bitmap scans out on the connections a store opens.

Once prepared, the claim keeps one generic plan, and that plan is the same walk: its batch
size is a subquery, so PostgreSQL costs every plan under one unknown limit and stops planning
it anew on each call (docs/benchmarks.md, "A claim planned once").
"""

from __future__ import annotations

import random

import psycopg
from psycopg import sql

from alkstore.bench.scale import vacuum_analyze
from alkstore.conformance.harness import Backend, StoreHandle
from plans import explained, plan_counts

BURST = 100_000


def test_a_burst_into_a_fresh_table_is_claimed_through_the_fetch_index(
    alkstore_backend: Backend, schema_name: str
) -> None:
    store = StoreHandle(alkstore_backend, "psycopg", schema_name)
    try:
        store.create_queue("q")
        for start in range(0, BURST, 1000):
            store.send_many("q", [{"data": n} for n in range(start, start + 1000)])
        plan = explained(store, next(store.engine.fetch("q", 100).steps()))
        assert "Bitmap" not in plan and "Sort" not in plan, plan
        assert "Index Scan using job_default_name_priority_created_on_id" in plan, plan
        assert [j.data for j in store.fetch("q", batch_size=3)] == [0, 1, 2]
    finally:
        store.close()


def test_a_prepared_claim_is_planned_once_as_the_ordered_walk_of_the_fetch_index(
    alkstore_backend: Backend, schema_name: str
) -> None:
    # Priorities in random order: the fetch index's order is not the table's, the case in
    # which a plan that cannot see the batch size might rather read and sort the queue.
    rng = random.Random(7)
    store = StoreHandle(alkstore_backend, "psycopg", schema_name)
    store.recyclable = False  # its statistics are this test's: not for the next test
    try:
        store.create_queue("q")
        for start in range(0, 50_000, 1000):
            batch = range(start, start + 1000)
            store.send_many("q", [{"data": n, "priority": rng.randrange(100)} for n in batch])
        claim = next(store.engine.fetch("q", 100).steps())
        vacuum_analyze(alkstore_backend.dsn, schema_name)
        with psycopg.connect(alkstore_backend.dsn, autocommit=True) as conn:
            conn.execute("SET enable_bitmapscan = off")  # as the engine's session setup does
            cur = psycopg.RawCursor(conn)
            for _ in range(8):  # each claims 100 of the jobs
                assert len(cur.execute(claim.sql, claim.params, prepare=True).fetchall()) == 100
            name, generic, custom = plan_counts(cur, claim.sql)
            # PostgreSQL makes five custom plans before it weighs the generic one.
            assert generic >= 3 and custom <= 5, (generic, custom)
            # With the claim's own parameters: its walk from the head of the queue (the first
            # claim of a queue, before it has a mark: claim_marks.py).
            explain = sql.SQL("EXPLAIN EXECUTE {}({})").format(
                sql.Identifier(name), sql.SQL(", ").join(map(sql.Literal, claim.params))
            )
            plan = "\n".join(row[0] for row in conn.execute(explain))
            assert "Index Scan using job_default_name_priority_created_on_id" in plan, plan
            assert "Sort" not in plan and "Seq Scan on job" not in plan, plan
    finally:
        store.close()
