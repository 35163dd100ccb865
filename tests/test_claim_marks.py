"""The claim's mark (engines/postgres/claim_marks.py): a claim walks from where the last
claim of its store left off, and a job another store puts behind that mark is still fetched,
by the walk from the start each queue gets at least every REWALK_SECONDS."""

from __future__ import annotations

import time

import alkstore
from alkstore.engines.postgres.claim_marks import REWALK_SECONDS


def test_a_retry_behind_another_stores_mark_is_fetched_within_the_rewalk(pg_dsn, schema_name):
    with (
        alkstore.connect(pg_dsn, schema=schema_name) as store,
        alkstore.connect(pg_dsn, schema=schema_name) as other,
    ):
        store.create_queue("q", retry_limit=1, retry_delay=0)
        first, second, third = store.send_many("q", [{"data": n} for n in (1, 2, 3)])
        (a,) = other.fetch("q")  # the other store claims the oldest job
        (b,) = store.fetch("q")  # this store's mark moves past it
        assert (a.id, b.id) == (first, second)
        other.fail("q", a, "again")  # a retry, behind this store's mark, due now
        seen: list[object] = []
        deadline = time.monotonic() + REWALK_SECONDS + 10
        while len(seen) < 2 and time.monotonic() < deadline:
            jobs = store.fetch("q")
            seen += [j.id for j in jobs]
            store.complete("q", jobs)
            if not jobs:
                time.sleep(0.05)
        assert sorted(seen, key=str) == sorted([first, third], key=str)


def test_a_higher_priority_job_is_found_by_every_claim(pg_dsn, schema_name):
    with (
        alkstore.connect(pg_dsn, schema=schema_name) as store,
        alkstore.connect(pg_dsn, schema=schema_name) as other,
    ):
        store.create_queue("q")
        store.send_many("q", [{"data": n} for n in range(3)])
        assert [j.data for j in store.fetch("q")] == [0]  # the mark is at job 0
        urgent = other.send("q", "urgent", priority=5)  # sorts before the mark
        assert [j.id for j in store.fetch("q")] == [urgent]
        assert [j.data for j in store.fetch("q")] == [1]
