"""A row holding an extreme time never breaks a read (issue 29, item 2).

``send`` refuses absolute times outside the range every driver round-trips, but a row stored
before that check (or by hand) may hold the earliest or latest time a driver can write
(asyncpg writes them as ``-infinity`` / ``infinity``). Planted through the
``set_job_columns`` test hook, as the poisoned ``maintain()`` row is.
"""

from __future__ import annotations

import datetime as dt

import pytest

EXTREMES = {
    "earliest": dt.datetime.min.replace(tzinfo=dt.UTC),
    "latest": dt.datetime.max.replace(tzinfo=dt.UTC),
}


@pytest.mark.parametrize("moment", sorted(EXTREMES))
@pytest.mark.parametrize("column", ["start_after", "keep_until", "created_on"])
def test_a_planted_extreme_time_does_not_break_reads(alkstore_store, column, moment):
    store = alkstore_store
    store.create_queue("q")
    job_id = store.send("q", {"n": 1})
    planted = store.hooks.set_job_columns("q", job_id, {column: EXTREMES[moment]})
    assert store.run_plan(planted) == 1

    assert [job.id for job in store.list_jobs("q")] == [job_id]
    job = store.get_job("q", job_id)
    assert getattr(job, column) == EXTREMES[moment]
    stats = store.queue_stats("q")
    assert stats.total == 1
    store.maintain()  # and maintenance passes over it
