"""The hot path's plans do not depend on the statistics the server has of the job table.

The plans of a prepared claim and completion are made once, from the statistics of the
moment, and kept. Under a held transaction (an idle session in a transaction pins the MVCC
horizon) every claimed and completed job leaves dead versions that no vacuum removes, and a
plan that walks an index with no bound visits all of them on every call. Seen in the
pressure bench: a claim whose plan was made while the statistics counted no queued job
walked ``job_retention`` (then over the same queued jobs as ``job_fetch``) whole and sorted
it, and a claim's re-find walked ``job_pkey`` on the queue name alone (docs/benchmarks.md,
"A claim planned without statistics").

Each case checks the generic plan (the one a prepared statement keeps) and the plan made for
the values, through ``EXPLAIN (FORMAT JSON)``.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from alkstore.bench.scale import vacuum_analyze
from alkstore.conformance.harness import Backend, StoreHandle
from alkstore.core.plans import Statement
from alkstore.core.targets import targets
from plans import plan_counts

MODES = ("force_generic_plan", "force_custom_plan")


def scans(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The nodes of ``plan`` that read a table or an index, and the sorts."""
    if plan["Node Type"] in ("Index Scan", "Index Only Scan", "Seq Scan", "Tid Scan", "Sort"):
        yield plan
    for child in plan.get("Plans", []):
        yield from scans(child)


def explained(dsn: str, statement: Statement, mode: str) -> dict[str, Any]:
    """The plan of ``statement`` prepared under ``plan_cache_mode = mode`` on a session set
    up as a store's own (no bitmap scans), as ``EXPLAIN (FORMAT JSON)`` gives it."""
    with psycopg.connect(dsn) as conn:
        conn.execute("SET enable_bitmapscan = off")
        conn.execute(psycopg.sql.SQL("SET plan_cache_mode = {}").format(psycopg.sql.Literal(mode)))
        conn.execute("PREPARE under_test AS " + statement.sql)
        args = ", ".join("%s" for _ in statement.params)
        explain = f"EXPLAIN (FORMAT JSON) EXECUTE under_test({args})"
        row = psycopg.ClientCursor(conn).execute(explain, statement.params).fetchone()
        assert row is not None
        plan: dict[str, Any] = row[0][0]["Plan"]
        return plan


def plan_of(dsn: str, statement: Statement, mode: str) -> list[dict[str, Any]]:
    """The scans of ``statement``'s plan (see :func:`explained`)."""
    return list(scans(explained(dsn, statement, mode)))


def cost_of(dsn: str, statement: Statement, mode: str) -> float:
    """The total cost of ``statement``'s plan (see :func:`explained`)."""
    return float(explained(dsn, statement, mode)["Total Cost"])


def assert_claim_walks_job_fetch(dsn: str, store: StoreHandle) -> None:
    """The claim reads the queued jobs only through job_fetch, in its order (no sort), and
    re-finds the rows it locked by tuple id, never by a walk of the queue's rows: from the
    head of the queue and from a mark (claim_marks.py)."""
    head = next(store.engine.fetch("q", 8).steps())
    mark = (0, dt.datetime.now(dt.UTC), uuid.UUID(int=1))
    from_mark = store.engine._plain_claim("q", 8, True, mark)
    for claim, bounds in ((head, ()), (from_mark, ("(priority >= ", "(priority <= ", "ROW("))):
        for mode in MODES:
            nodes = plan_of(dsn, claim, mode)
            job_scans = [n for n in nodes if n.get("Relation Name", "").startswith("job")]
            assert not any(n["Node Type"] == "Sort" for n in nodes), (mode, nodes)
            picks = [n for n in job_scans if n["Node Type"] == "Index Scan"]
            # job_fetch's partition index is named after its columns; a claim walks it once
            # (from a mark: for each of three ranges in turn, each bounded by index
            # conditions: the higher priorities, the mark's from the mark, the lower)
            assert [n["Index Name"] for n in picks] == [
                "job_default_name_priority_created_on_id_start_after_idx"
            ], (mode, nodes)
            cond = picks[0]["Index Cond"]
            assert cond.lstrip("(").startswith("name = $1)") or "'q'" in cond, cond
            assert all(bound in cond for bound in bounds), (mode, cond)
            refinds = [(n["Node Type"], n["Relation Name"]) for n in job_scans if n not in picks]
            assert refinds == [("Tid Scan", "job_default")], (mode, nodes)


def assert_complete_looks_ids_up(dsn: str, store: StoreHandle) -> None:
    """The completion reaches each target by its full primary key (and the queue's row, for
    its ``flow_parents`` flag, by the queue's)."""
    jobs = store.fetch("q", batch_size=8)
    completion = next(store.engine.complete("q", targets(jobs), None).steps())
    for mode in MODES:
        nodes = plan_of(dsn, completion, mode)
        job_nodes = [n for n in nodes if n.get("Relation Name", "").startswith("job")]
        others = [n for n in nodes if n not in job_nodes]
        assert job_nodes and all(n.get("Index Name") == "job_default_pkey" for n in job_nodes)
        assert all("id = " in n["Index Cond"] for n in job_nodes), (mode, nodes)
        assert all(n.get("Index Name") == "queue_pkey" for n in others), (mode, nodes)


def drain(store: StoreHandle, jobs: int) -> None:
    """Send ``jobs`` jobs to queue q and claim and complete them all."""
    for start in range(0, jobs, 1000):
        store.send_many("q", [{"data": n} for n in range(start, start + 1000)])
        while batch := store.fetch("q", batch_size=100):
            store.complete("q", batch)


@pytest.fixture
def store(alkstore_backend: Backend, schema_name: str) -> Iterator[StoreHandle]:
    """A store on queue q whose statistics are the test's own."""
    handle = StoreHandle(alkstore_backend, "psycopg", schema_name)
    handle.recyclable = False  # its statistics are this test's: not for the next test
    try:
        handle.create_queue("q")
        yield handle
    finally:
        handle.close()


def test_under_a_held_transaction_after_statistics_that_saw_no_queued_job(
    store: StoreHandle, alkstore_backend: Backend, schema_name: str
) -> None:
    dsn = alkstore_backend.dsn
    drain(store, 5000)
    vacuum_analyze(dsn, schema_name)  # a queue that has been running: history, none queued
    with psycopg.connect(dsn) as holder:
        holder.execute("SELECT txid_current()")  # pins the horizon until closed
        drain(store, 5000)  # 5,000 dead versions in job_fetch that no vacuum may remove
        store.send_many("q", [{"data": n} for n in range(100)])
        assert_claim_walks_job_fetch(dsn, store)
        assert_complete_looks_ids_up(dsn, store)
    assert [j.data for j in store.fetch("q", batch_size=3)] == [8, 9, 10]


def test_before_any_statistics(store: StoreHandle, alkstore_backend: Backend) -> None:
    store.create_queue("own", partition=True)  # a partition the claim of q must not probe
    store.send_many("own", [{"data": n} for n in range(2000)])
    store.send_many("q", [{"data": n} for n in range(2000)])
    assert_claim_walks_job_fetch(alkstore_backend.dsn, store)
    assert [j.data for j in store.fetch("own", batch_size=2)] == [0, 1]
    assert [j.data for j in store.fetch("q", batch_size=2)] == [0, 1]


def test_after_statistics_of_an_empty_queue(
    store: StoreHandle, alkstore_backend: Backend, schema_name: str
) -> None:
    vacuum_analyze(alkstore_backend.dsn, schema_name)
    store.send_many("q", [{"data": n} for n in range(2000)])
    assert_claim_walks_job_fetch(alkstore_backend.dsn, store)


def test_a_prepared_claim_from_a_mark_keeps_its_generic_plan(
    store: StoreHandle, alkstore_backend: Backend, schema_name: str
) -> None:
    # Bound as plain parameters, the mark let the planner cost the plans made for its values
    # below the generic plan (no higher priority, a short range of one priority), and the
    # server planned the claim anew on almost every call (docs/benchmarks.md). Bound through
    # subqueries, every plan of it costs the same: PostgreSQL keeps the generic one.
    dsn = alkstore_backend.dsn
    for start in range(0, 3000, 1000):
        store.send_many("q", [{"data": n} for n in range(start, start + 1000)])
    store.complete("q", store.fetch("q", batch_size=1000))  # the mark: a third into the queue
    vacuum_analyze(dsn, schema_name)
    (first,) = store.fetch("q")
    claim = store.engine._plain_claim("q", 100, True, (first.priority, first.created_on, first.id))
    costs = {mode: cost_of(dsn, claim, mode) for mode in MODES}
    assert costs["force_custom_plan"] == costs["force_generic_plan"], costs
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET enable_bitmapscan = off")  # as the engine's session setup does
        cur = psycopg.RawCursor(conn)
        for _ in range(10):  # each claims the next 100 jobs after the mark
            assert len(cur.execute(claim.sql, claim.params, prepare=True).fetchall()) == 100
        _name, generic, custom = plan_counts(cur, claim.sql)
    # PostgreSQL makes five custom plans before it weighs the generic one.
    assert generic == 5 and custom == 5, (generic, custom)
