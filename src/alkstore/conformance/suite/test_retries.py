"""Retries, backoff, dead letters and redrive (spec §4)."""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import InvalidOptions, JobState, QueueNotFound
from alkstore.core.retry import retry_delay_bounds


def _attempts_until_failed(store: Any, queue: str, job_id: Any) -> tuple[int, Any]:
    attempts = 0
    while True:
        jobs = store.fetch(queue)
        if not jobs:
            return attempts, store.get_job(queue, job_id)
        attempts += 1
        assert jobs[0].retry_count == attempts - 1
        store.fail(queue, jobs[0], {"attempt": attempts})


@pytest.mark.parametrize("limit", [0, 1, 3])
def test_retry_limit_n_allows_n_plus_one_attempts(store, limit):
    store.create_queue("q", retry_limit=limit)
    job_id = store.send("q", 1)
    attempts, job = _attempts_until_failed(store, "q", job_id)
    assert attempts == limit + 1
    assert job.state is JobState.FAILED and job.retry_count == limit
    assert job.output == {"attempt": limit + 1} and job.completed_on is not None


def test_failing_an_unstarted_job_does_not_use_a_retry(store):
    store.create_queue("q", retry_limit=1)
    job_id = store.send("q", 1)
    assert store.fail("q", job_id, "before start") == 1
    job = store.get_job("q", job_id)
    assert job.state is JobState.RETRY and job.retry_count == 0
    (fetched,) = store.fetch("q")
    assert fetched.retry_count == 0
    store.fail("q", fetched)
    (again,) = store.fetch("q")
    assert again.retry_count == 1
    store.fail("q", again)
    assert store.get_job("q", job_id).state is JobState.FAILED


def test_fail_stores_exception_as_name_and_message(store):
    store.create_queue("q", retry_limit=0)
    job_id = store.send("q", 1)
    (job,) = store.fetch("q")
    assert store.fail("q", job, ValueError("bad input 42")) == 1
    assert store.get_job("q", job_id).output == {"name": "ValueError", "message": "bad input 42"}


def test_fail_only_counts_unfinished_jobs(store):
    store.create_queue("q")
    done = store.send("q", 1)
    (job,) = store.fetch("q")
    store.complete("q", job)
    assert store.fail("q", done) == 0
    assert store.get_job("q", done).state is JobState.COMPLETED


def test_fixed_retry_delay(store):
    store.create_queue("q", retry_delay=30)
    job_id = store.send("q", 1)
    (job,) = store.fetch("q")
    store.fail("q", job)
    failed = store.get_job("q", job_id)
    waited = (failed.start_after - job.started_on).total_seconds()
    assert 30 <= waited < 40
    assert failed.keep_until == failed.start_after + __import__("datetime").timedelta(
        seconds=failed.retention_seconds
    )
    assert store.fetch("q") == []
    store.advance(31)
    assert [j.id for j in store.fetch("q")] == [job_id]


@pytest.mark.parametrize(("delay", "cap"), [(0, None), (2, None), (5, 12)])
def test_exponential_backoff_stays_within_the_formula(store, delay, cap):
    options = {"retry_limit": 6, "retry_delay": delay, "retry_backoff": True}
    if cap is not None:
        options["retry_delay_max"] = cap
    store.create_queue("q", **options)
    job_id = store.send("q", 1)
    for count in range(5):
        (job,) = store.fetch("q")
        assert job.retry_count == count
        store.fail("q", job)
        waiting = store.get_job("q", job_id)
        waited = (waiting.start_after - job.started_on).total_seconds()
        low, high = retry_delay_bounds(
            retry_delay=delay, retry_count=count, retry_backoff=True, retry_delay_max=cap
        )
        assert low - 0.001 <= waited <= high + 5, (count, waited, low, high)
        store.advance(high + 1)


def test_retry_gives_a_failed_job_one_more_attempt(store):
    store.create_queue("q", retry_limit=0)
    job_id = store.send("q", 1)
    store.fail("q", store.fetch("q"))
    assert store.get_job("q", job_id).state is JobState.FAILED
    assert store.retry("q", job_id) == 1
    job = store.get_job("q", job_id)
    assert job.state is JobState.RETRY and job.retry_limit == 1 and job.completed_on is None
    (again,) = store.fetch("q")
    assert again.retry_count == 1
    store.fail("q", again)
    assert store.get_job("q", job_id).state is JobState.FAILED
    assert store.retry("q", [job_id, job_id]) == 1


def test_retry_only_touches_failed_jobs(store):
    store.create_queue("q")
    job_id = store.send("q", 1)
    assert store.retry("q", job_id) == 0
    assert store.get_job("q", job_id).retry_limit == 2


def test_dead_letter_copy_on_final_failure(store):
    store.create_queue("dlq", retry_limit=7, expire_seconds=99)
    store.create_queue("q", retry_limit=1, dead_letter="dlq")
    job_id = store.send("q", {"order": 5}, priority=3)
    store.fail("q", store.fetch("q"), "first")
    assert store.queue_stats("dlq").total == 0
    store.fail("q", store.fetch("q"), "second")
    assert store.get_job("q", job_id).state is JobState.FAILED
    (dead,) = store.fetch("dlq")
    assert dead.id != job_id
    assert dead.data == {"order": 5} and dead.output == "second"
    assert (dead.source_queue, dead.source_id, dead.source_retry_count) == ("q", job_id, 1)
    assert (dead.retry_limit, dead.expire_seconds, dead.retry_count) == (7, 99, 0)


def test_dead_letter_follows_the_queue_setting_at_failure_time(store):
    store.create_queue("dlq")
    store.create_queue("q", retry_limit=0)
    store.send("q", 1)
    (job,) = store.fetch("q")
    store.update_queue("q", dead_letter="dlq")
    store.fail("q", job)
    assert store.queue_stats("dlq").queued == 1


def test_redrive_moves_dead_letters_back_as_fresh_jobs(store):
    store.create_queue("dlq")
    store.create_queue("q", retry_limit=0, dead_letter="dlq")
    store.create_queue("elsewhere")
    ids = store.send_many("q", [{"data": i} for i in range(5)])
    store.fail("q", store.fetch("q", batch_size=5))
    assert store.queue_stats("dlq").queued == 5
    assert store.redrive("dlq", limit=2) == 2
    assert store.queue_stats("dlq").queued == 3
    assert store.redrive("dlq", to="elsewhere") == 3
    assert store.queue_stats("dlq").total == 0
    back = store.fetch("q", batch_size=10)
    assert len(back) == 2
    assert all(j.retry_count == 0 and j.id not in ids and j.source_id is None for j in back)
    elsewhere = store.fetch("elsewhere", batch_size=10)
    assert sorted(j.data for j in back + elsewhere) == [0, 1, 2, 3, 4]


def test_redrive_errors(store):
    store.create_queue("dlq")
    with pytest.raises(QueueNotFound) as err:
        store.redrive("nope")
    assert err.value.field == "dlq"
    with pytest.raises(QueueNotFound) as err:
        store.redrive("dlq", to="nope")
    assert err.value.field == "to"
    with pytest.raises(InvalidOptions):
        store.redrive("dlq", limit=0)
    assert store.redrive("dlq") == 0
