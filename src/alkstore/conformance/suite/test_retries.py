"""Retries, backoff, dead letters and redrive (spec §4)."""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import InvalidOptions, JobState, QueueNotFound
from alkstore.core.retry import retry_delay_bounds


def _attempts_until_failed(alkstore_store: Any, queue: str, job_id: Any) -> tuple[int, Any]:
    attempts = 0
    while True:
        jobs = alkstore_store.fetch(queue)
        if not jobs:
            return attempts, alkstore_store.get_job(queue, job_id)
        attempts += 1
        assert jobs[0].retry_count == attempts - 1
        alkstore_store.fail(queue, jobs[0], {"attempt": attempts})


@pytest.mark.parametrize("limit", [0, 1, 3])
def test_retry_limit_n_allows_n_plus_one_attempts(alkstore_store, limit):
    alkstore_store.create_queue("q", retry_limit=limit)
    job_id = alkstore_store.send("q", 1)
    attempts, job = _attempts_until_failed(alkstore_store, "q", job_id)
    assert attempts == limit + 1
    assert job.state is JobState.FAILED and job.retry_count == limit
    assert job.output == {"attempt": limit + 1} and job.completed_on is not None


def test_failing_an_unstarted_job_does_not_use_a_retry(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=1)
    job_id = alkstore_store.send("q", 1)
    assert alkstore_store.fail("q", job_id, "before start") == 1
    job = alkstore_store.get_job("q", job_id)
    assert job.state is JobState.RETRY and job.retry_count == 0
    (fetched,) = alkstore_store.fetch("q")
    assert fetched.retry_count == 0
    alkstore_store.fail("q", fetched)
    (again,) = alkstore_store.fetch("q")
    assert again.retry_count == 1
    alkstore_store.fail("q", again)
    assert alkstore_store.get_job("q", job_id).state is JobState.FAILED


def test_fail_stores_exception_as_name_message_and_stack(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    job_id = alkstore_store.send("q", 1)
    (job,) = alkstore_store.fetch("q")
    try:
        raise ValueError("bad input 42")
    except ValueError as exc:
        assert alkstore_store.fail("q", job, exc) == 1
    output = alkstore_store.get_job("q", job_id).output
    assert (output["name"], output["message"]) == ("ValueError", "bad input 42")
    assert "Traceback" in output["stack"] and "ValueError: bad input 42" in output["stack"]
    assert "test_fail_stores_exception_as_name_message_and_stack" in output["stack"]


def test_fail_only_counts_unfinished_jobs(alkstore_store):
    alkstore_store.create_queue("q")
    done = alkstore_store.send("q", 1)
    (job,) = alkstore_store.fetch("q")
    alkstore_store.complete("q", job)
    assert alkstore_store.fail("q", done) == 0
    assert alkstore_store.get_job("q", done).state is JobState.COMPLETED


def test_fixed_retry_delay(alkstore_store):
    alkstore_store.create_queue("q", retry_delay=30)
    job_id = alkstore_store.send("q", 1)
    (job,) = alkstore_store.fetch("q", include_metadata=True)
    alkstore_store.fail("q", job)
    failed = alkstore_store.get_job("q", job_id)
    waited = (failed.start_after - job.started_on).total_seconds()
    assert 30 <= waited < 40
    assert failed.keep_until == failed.start_after + __import__("datetime").timedelta(
        seconds=failed.retention_seconds
    )
    assert alkstore_store.fetch("q") == []
    alkstore_store.advance(31)
    assert [j.id for j in alkstore_store.fetch("q")] == [job_id]


@pytest.mark.parametrize(("delay", "cap"), [(0, None), (2, None), (5, 12)])
def test_exponential_backoff_stays_within_the_formula(alkstore_store, delay, cap):
    options = {"retry_limit": 6, "retry_delay": delay, "retry_backoff": True}
    if cap is not None:
        options["retry_delay_max"] = cap
    alkstore_store.create_queue("q", **options)
    job_id = alkstore_store.send("q", 1)
    for count in range(5):
        (job,) = alkstore_store.fetch("q", include_metadata=True)
        assert job.retry_count == count
        alkstore_store.fail("q", job)
        waiting = alkstore_store.get_job("q", job_id)
        waited = (waiting.start_after - job.started_on).total_seconds()
        low, high = retry_delay_bounds(
            retry_delay=delay, retry_count=count, retry_backoff=True, retry_delay_max=cap
        )
        assert low - 0.001 <= waited <= high + 5, (count, waited, low, high)
        alkstore_store.advance(high + 1)


def test_retry_gives_a_failed_job_one_more_attempt(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    job_id = alkstore_store.send("q", 1)
    alkstore_store.fail("q", alkstore_store.fetch("q"))
    assert alkstore_store.get_job("q", job_id).state is JobState.FAILED
    assert alkstore_store.retry("q", job_id) == 1
    job = alkstore_store.get_job("q", job_id)
    assert job.state is JobState.RETRY and job.retry_limit == 1 and job.completed_on is None
    (again,) = alkstore_store.fetch("q")
    assert again.retry_count == 1
    alkstore_store.fail("q", again)
    assert alkstore_store.get_job("q", job_id).state is JobState.FAILED
    assert alkstore_store.retry("q", [job_id, job_id]) == 1


def test_retry_only_touches_failed_jobs(alkstore_store):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", 1)
    assert alkstore_store.retry("q", job_id) == 0
    assert alkstore_store.get_job("q", job_id).retry_limit == 2


def test_dead_letter_copy_on_final_failure(alkstore_store):
    alkstore_store.create_queue("dlq", retry_limit=7, expire_seconds=99)
    alkstore_store.create_queue("q", retry_limit=1, dead_letter="dlq")
    job_id = alkstore_store.send("q", {"order": 5}, priority=3)
    alkstore_store.fail("q", alkstore_store.fetch("q"), "first")
    assert alkstore_store.queue_stats("dlq").total == 0
    alkstore_store.fail("q", alkstore_store.fetch("q"), "second")
    assert alkstore_store.get_job("q", job_id).state is JobState.FAILED
    (dead,) = alkstore_store.fetch("dlq", include_metadata=True)
    assert dead.id != job_id
    assert dead.data == {"order": 5} and dead.output == "second"
    assert (dead.source_queue, dead.source_id, dead.source_retry_count) == ("q", job_id, 1)
    assert (dead.retry_limit, dead.expire_seconds, dead.retry_count) == (7, 99, 0)


def test_dead_letter_follows_the_queue_setting_at_failure_time(alkstore_store):
    alkstore_store.create_queue("dlq")
    alkstore_store.create_queue("q", retry_limit=0)
    alkstore_store.send("q", 1)
    (job,) = alkstore_store.fetch("q")
    alkstore_store.update_queue("q", dead_letter="dlq")
    alkstore_store.fail("q", job)
    assert alkstore_store.queue_stats("dlq").queued == 1


def test_redrive_moves_dead_letters_back_as_fresh_jobs(alkstore_store):
    alkstore_store.create_queue("dlq")
    alkstore_store.create_queue("q", retry_limit=0, dead_letter="dlq")
    alkstore_store.create_queue("elsewhere")
    ids = alkstore_store.send_many("q", [{"data": i} for i in range(5)])
    alkstore_store.fail("q", alkstore_store.fetch("q", batch_size=5))
    assert alkstore_store.queue_stats("dlq").queued == 5
    assert alkstore_store.redrive("dlq", limit=2) == 2
    assert alkstore_store.queue_stats("dlq").queued == 3
    assert alkstore_store.redrive("dlq", to="elsewhere") == 3
    assert alkstore_store.queue_stats("dlq").total == 0
    back = alkstore_store.fetch("q", batch_size=10, include_metadata=True)
    assert len(back) == 2
    assert all(j.retry_count == 0 and j.id not in ids and j.source_id is None for j in back)
    elsewhere = alkstore_store.fetch("elsewhere", batch_size=10)
    assert sorted(j.data for j in back + elsewhere) == [0, 1, 2, 3, 4]


def test_redrive_errors(alkstore_store):
    alkstore_store.create_queue("dlq")
    with pytest.raises(QueueNotFound) as err:
        alkstore_store.redrive("nope")
    assert err.value.field == "dlq"
    with pytest.raises(QueueNotFound) as err:
        alkstore_store.redrive("dlq", to="nope")
    assert err.value.field == "to"
    with pytest.raises(InvalidOptions):
        alkstore_store.redrive("dlq", limit=0)
    assert alkstore_store.redrive("dlq") == 0
