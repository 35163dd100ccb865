"""Settling reaches its targets by primary key, however many jobs of the queue are running.

``job_active`` holds every running job of a queue and ``job_finished`` every finished job. A
completion, a heartbeat, a resume or a retry whose state check implied one of those indexes'
predicates was planned as a read of all of them hashed against the targets (a 100-job
completion with 20,000 running took 7-10 ms, against 1.3 ms by primary key), and the
statistics of a queue analyzed while nothing ran made that plan look cheapest
(docs/benchmarks.md, "Settling by primary key"). Once prepared, a completion keeps one
generic plan, however many targets it has.
"""

from __future__ import annotations

import psycopg
import pytest

from alkstore.bench.scale import vacuum_analyze
from alkstore.conformance.harness import Backend, StoreHandle
from alkstore.core.targets import targets
from alkstore.engines.postgres.runtime import watch
from plans import explained, plan_counts

RUNNING = 3000
QUEUED = 50_000


@pytest.fixture
def running(alkstore_backend: Backend, schema_name: str):
    """A store whose queue ``q`` holds QUEUED jobs, analyzed before any was fetched, of which
    RUNNING are then fetched; and the first 100 of those."""
    store = StoreHandle(alkstore_backend, "psycopg", schema_name)
    store.recyclable = False  # its statistics are this test's: not for the next test
    try:
        store.create_queue("q")
        for start in range(0, QUEUED, 1000):
            store.send_many("q", [{"data": n} for n in range(start, start + 1000)])
        vacuum_analyze(alkstore_backend.dsn, schema_name)
        jobs = [job for _ in range(RUNNING // 100) for job in store.fetch("q", batch_size=100)]
        assert len(jobs) == RUNNING
        yield store, jobs[:100]
    finally:
        store.close()


SETTLEMENTS = {
    "complete": lambda engine, jobs: engine.complete("q", targets(jobs), None),
    "touch": lambda engine, jobs: engine.touch("q", targets(jobs)),
    "watch": lambda engine, jobs: watch(engine, "q", targets(jobs)),
    "complete_and_fetch": lambda engine, jobs: engine.complete_and_fetch(
        "q", targets(jobs), None, 100, False
    ),
    "resume": lambda engine, jobs: engine.resume("q", targets(jobs)),
    "retry": lambda engine, jobs: engine.retry("q", targets(jobs)),
}


@pytest.mark.parametrize("operation", sorted(SETTLEMENTS))
def test_a_settlement_looks_its_targets_up_by_primary_key(running, operation):
    store, jobs = running
    text = explained(store, next(SETTLEMENTS[operation](store.engine, jobs).steps()))
    assert "Index Scan using job_default_pkey" in text, text
    assert "(id = t.id)" in text, text  # the index condition of the lookup per target
    # job_active is (name, started_on), job_finished (completed_on)
    assert "started_on_idx" not in text and "completed_on_idx" not in text, text


def test_the_settlements_do_what_they_say_on_the_jobs_looked_up_that_way(running):
    store, jobs = running
    assert store.touch("q", jobs[:10]) == 10
    assert store.complete("q", jobs[:50]) == 50
    assert store.complete_and_fetch("q", jobs[50:], batch_size=100).completed == 50


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
        _name, generic, custom = plan_counts(cur, completion.sql)
    # PostgreSQL makes five custom plans before it weighs the generic one.
    assert generic >= 3 and custom <= 5, (generic, custom)
