"""Settling reaches its targets by primary key, however many jobs of the queue are running.

``job_active`` holds every running job of a queue. A completion or a heartbeat whose state
check implied that index's predicate was planned as a read of all of them hashed against
the targets (a 100-job completion with 20,000 running took 7-10 ms, against 1.3 ms by
primary key), and the statistics of a queue analyzed while nothing ran made that plan look
cheapest (docs/benchmarks.md, "Settling by primary key"). Once prepared, a completion keeps
one generic plan, however many targets it has.
"""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from alkstore.conformance.harness import Backend, StoreHandle
from alkstore.core.plans import Statement, single
from alkstore.core.targets import targets
from alkstore.engines.postgres.identifiers import quote_schema

RUNNING = 3000
QUEUED = 50_000


@pytest.fixture
def running(alkstore_backend: Backend, schema_name: str):
    """A store whose queue ``q`` holds QUEUED jobs, analyzed before any was fetched, of which
    RUNNING are then fetched; and the first 100 of those."""
    store = StoreHandle(alkstore_backend, "psycopg", schema_name)
    try:
        store.create_queue("q")
        for start in range(0, QUEUED, 1000):
            store.send_many("q", [{"data": n} for n in range(start, start + 1000)])
        analyze = sql.SQL("ANALYZE {}.job").format(sql.SQL(quote_schema(schema_name)))
        store.run_plan(single("analyze", Statement(analyze.as_string(None), ()), lambda r: r))
        jobs = [job for _ in range(RUNNING // 100) for job in store.fetch("q", batch_size=100)]
        assert len(jobs) == RUNNING
        yield store, jobs[:100]
    finally:
        store.close()


def _plan_of(store: StoreHandle, statement: Statement) -> str:
    explain = Statement("EXPLAIN " + statement.sql, statement.params)
    rows = store.run_plan(single("explain", explain, lambda rows: rows))
    return "\n".join(row["QUERY PLAN"] for row in rows)


@pytest.mark.parametrize("operation", ["complete", "touch", "complete_and_fetch"])
def test_a_settlement_looks_its_targets_up_by_primary_key(running, operation):
    store, jobs = running
    engine = store.engine
    if operation == "complete":
        plan = engine.complete("q", targets(jobs), None)
    elif operation == "touch":
        plan = engine.touch("q", targets(jobs))
    else:
        plan = engine.complete_and_fetch("q", targets(jobs), None, 100, False)
    text = _plan_of(store, next(plan.steps()))
    assert "Index Scan using job_default_pkey" in text, text
    assert "(id = t.id)" in text, text  # the index condition of the lookup per target
    assert "started_on" not in text, text  # job_active: (name, started_on)
    # And the operation does what it says on the jobs looked up that way.
    if operation == "touch":
        assert store.touch("q", jobs) == 100
    elif operation == "complete":
        assert store.complete("q", jobs) == 100
    else:
        assert store.complete_and_fetch("q", jobs, batch_size=100).completed == 100


def test_a_prepared_one_job_completion_is_planned_once(running, alkstore_backend):
    store, jobs = running
    completion = next(store.engine.complete("q", targets(jobs[:1]), None).steps())
    with psycopg.connect(alkstore_backend.dsn, autocommit=True) as conn:
        cur = psycopg.RawCursor(conn)
        done = [
            cur.execute(completion.sql, completion.params, prepare=True).fetchone()[0]
            for _ in range(8)
        ]
        assert done == [1] + [0] * 7  # the job completes once
        generic, custom = cur.execute(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
        ).fetchone()
    # PostgreSQL makes five custom plans before it weighs the generic one.
    assert generic >= 3 and custom <= 5, (generic, custom)
