"""One bad row never stops maintenance for the others (issue 13, item 4).

Rows stored before validation bounded delays (``retry_delay`` 2**31 - 1 with backoff) are
planted through the ``set_job_columns`` test hook: their next retry time would overflow a
timestamp, which once made every ``maintain()`` raise and stalled expiry in every queue.
"""

from __future__ import annotations

import datetime as dt

import pytest

from alkstore import JobState

OVERFLOWING = {"retry_delay": 2**31 - 1, "retry_delay_max": None, "retry_count": 16}
"""A retry delay of 2**31 - 1 s doubled 16 times: about 4.5 billion years."""


@pytest.mark.parametrize("duty", ["expired", "heartbeat_expired"])
def test_a_row_whose_retry_time_overflows_does_not_stop_maintenance(alkstore_store, duty):
    store = alkstore_store
    timeouts = {"expire_seconds": 60} if duty == "expired" else {"heartbeat_seconds": 60}
    store.create_queue("bad", retry_backoff=True, retry_limit=20, **timeouts)
    store.create_queue("good", expire_seconds=60, retry_limit=0)
    bad = store.send("bad", "bad")
    good = store.send("good", "good")
    assert [j.id for j in store.fetch("bad")] == [bad]
    assert [j.id for j in store.fetch("good")] == [good]
    assert store.run_plan(store.hooks.set_job_columns("bad", bad, OVERFLOWING)) == 1
    store.advance(61)

    report = store.maintain()

    assert report.expired == 1 + (duty == "expired")
    assert report.heartbeat_expired == (duty == "heartbeat_expired")
    assert store.get_job("good", good).state is JobState.FAILED
    # The bad job retries as its options say, its delay capped far in the future: it is
    # never due, and retention (which counts from the retry) leaves it alone.
    job = store.get_job("bad", bad)
    assert job.state is JobState.RETRY and job.retry_count == 16
    assert job.start_after > dt.datetime.now(dt.UTC) + dt.timedelta(days=1000 * 365)
    assert job.keep_until >= job.start_after
    assert store.fetch("bad") == []
    store.advance(10 * 365 * 86_400)
    later = store.maintain()
    assert (later.expired, later.heartbeat_expired, later.retention_removed) == (0, 0, 0)
    assert store.get_job("bad", bad).state is JobState.RETRY


def test_failing_a_row_whose_retry_time_overflows_retries_it(alkstore_store):
    store = alkstore_store
    store.create_queue("bad", retry_backoff=True, retry_limit=20)
    bad = store.send("bad", "bad")
    assert [j.id for j in store.fetch("bad")] == [bad]
    assert store.run_plan(store.hooks.set_job_columns("bad", bad, OVERFLOWING)) == 1
    assert store.fail("bad", bad) == 1
    failed = store.get_job("bad", bad)
    assert failed.state is JobState.RETRY
    assert failed.start_after > dt.datetime.now(dt.UTC) + dt.timedelta(days=1000 * 365)
