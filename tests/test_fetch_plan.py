"""The claim stays an ordered walk of the fetch index before ANALYZE has seen the jobs.

Until autovacuum analyzes a burst of new jobs, PostgreSQL guesses that a queue holds a
handful of them. On PostgreSQL 15, from about 100,000 jobs on, it then claimed through a
bitmap scan and a sort of the whole queue (240 ms a fetch). The engine's session setup rules
bitmap scans out on the connections a store opens.
"""

from __future__ import annotations

from alkstore.conformance.harness import Backend, StoreHandle
from alkstore.core.plans import Statement, single

BURST = 100_000


def test_a_burst_into_a_fresh_table_is_claimed_through_the_fetch_index(
    alkstore_backend: Backend, schema_name: str
) -> None:
    store = StoreHandle(alkstore_backend, "psycopg", schema_name)
    try:
        store.create_queue("q")
        for start in range(0, BURST, 1000):
            store.send_many("q", [{"data": n} for n in range(start, start + 1000)])
        statement = next(store.engine.fetch("q", 100).steps())
        explain = Statement("EXPLAIN " + statement.sql, statement.params)
        rows = store.run_plan(single("explain", explain, lambda rows: rows))
        plan = "\n".join(row["QUERY PLAN"] for row in rows)
        assert "Bitmap" not in plan and "Sort" not in plan, plan
        assert "Index Scan using job_default_name_priority_created_on_id" in plan, plan
        assert [j.data for j in store.fetch("q", batch_size=3)] == [0, 1, 2]
    finally:
        store.close()
