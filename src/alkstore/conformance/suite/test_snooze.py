"""Snooze: a job goes back to its queue for a while without spending an attempt
(``store.snooze`` and ``raise alkstore.Snooze(seconds)`` in a handler; docs/workers.md)."""

from __future__ import annotations

import datetime as dt

import pytest

from alkstore import InvalidOptions, JobState, Snooze

from .conftest import eventually, make_queue
from .test_worker import FAST
from .workers import execute, side_table, work


@pytest.mark.parametrize("partition", [False, True])
def test_snooze_puts_the_job_back_without_spending_an_attempt(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition, retry_limit=0)
    job_id = alkstore_store.send("q", {"n": 1})
    (job,) = alkstore_store.fetch("q", include_metadata=True)
    assert alkstore_store.snooze("q", job, 60) == 1
    snoozed = alkstore_store.get_job("q", job_id)
    assert snoozed.state is JobState.RETRY and snoozed.retry_limit == 1
    assert snoozed.errors == () and snoozed.output is None
    waits = (snoozed.start_after - job.started_on).total_seconds()
    assert 59 <= waits <= 65
    assert snoozed.keep_until == snoozed.start_after + dt.timedelta(
        seconds=snoozed.retention_seconds
    )
    assert alkstore_store.fetch("q") == []
    alkstore_store.advance(61)
    (again,) = alkstore_store.fetch("q")
    assert again.retry_count == 1 and again.retry_limit == 1
    # The snooze spent no attempt: with retry_limit 0 this failure is final, as the first
    # attempt's would have been.
    alkstore_store.fail("q", again, "now it fails")
    assert alkstore_store.get_job("q", job_id).state is JobState.FAILED


def test_snooze_is_fenced_to_the_attempt(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=5)
    job_id = alkstore_store.send("q", 1)
    (first,) = alkstore_store.fetch("q")
    alkstore_store.snooze("q", first, 0)
    (second,) = alkstore_store.fetch("q")
    assert second.retry_count == first.retry_count + 1
    assert alkstore_store.snooze("q", first, 10) == 0  # the old attempt matches nothing
    assert alkstore_store.complete("q", first) == 0
    assert alkstore_store.get_job("q", job_id).state is JobState.ACTIVE
    assert alkstore_store.snooze("q", job_id, 10) == 1  # a bare id snoozes the active job


def test_only_active_jobs_snooze(alkstore_store):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", 1)
    assert alkstore_store.snooze("q", job_id, 5) == 0
    job = alkstore_store.get_job("q", job_id)
    assert job.state is JobState.CREATED and job.retry_limit == 2


@pytest.mark.parametrize("seconds", [-1, 365 * 86_400 + 1, float("nan"), True, "5", None])
def test_bad_seconds_are_refused_naming_the_value(alkstore_store, seconds):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", 1)
    (job,) = alkstore_store.fetch("q")
    with pytest.raises(InvalidOptions) as caught:
        alkstore_store.snooze("q", job, seconds)
    assert caught.value.field == "seconds"
    assert alkstore_store.get_job("q", job_id).state is JobState.ACTIVE
    with pytest.raises(InvalidOptions):
        Snooze(seconds)


def test_a_timedelta_is_seconds(alkstore_store):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", 1)
    (job,) = alkstore_store.fetch("q", include_metadata=True)
    assert alkstore_store.snooze("q", job, dt.timedelta(minutes=2)) == 1
    snoozed = alkstore_store.get_job("q", job_id)
    assert 119 <= (snoozed.start_after - job.started_on).total_seconds() <= 125


def test_a_handler_raising_snooze_snoozes_its_job(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    runs = []

    def handler(job, ctx):
        runs.append(job.retry_count)
        if len(runs) == 1:
            raise Snooze(3600)
        return {"runs": len(runs)}

    with work(alkstore_store, "q", handler, **FAST):
        job_id = alkstore_store.send("q", 1)
        eventually(lambda: alkstore_store.get_job("q", job_id).state is JobState.RETRY)
        snoozed = alkstore_store.get_job("q", job_id)
        assert snoozed.errors == () and snoozed.retry_limit == 1
        alkstore_store.advance(3601)
        eventually(lambda: alkstore_store.get_job("q", job_id).state is JobState.COMPLETED)
    assert runs == [0, 1]
    assert alkstore_store.get_job("q", job_id).output == {"runs": 2}


def test_a_transactional_snooze_rolls_the_handlers_writes_back(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    table, written = side_table(alkstore_store)

    def handler(job, ctx):
        execute(ctx, f"INSERT INTO {table} (id) VALUES ($1)", job.id)
        raise Snooze(3600)

    with work(alkstore_store, "q", handler, transactional=True, **FAST):
        job_id = alkstore_store.send("q", 1)
        eventually(lambda: alkstore_store.get_job("q", job_id).state is JobState.RETRY)
    snoozed = alkstore_store.get_job("q", job_id)
    assert snoozed.retry_limit == 1 and snoozed.errors == ()
    assert written() == []


def test_a_batch_handler_snoozes_one_job_of_its_batch(alkstore_store):
    alkstore_store.create_queue("q")

    def handler(jobs, ctx):
        return {job.id: Snooze(3600) for job in jobs if job.data == "later"}

    with work(alkstore_store, "q", handler, batch=True, batch_size=5, **FAST):
        later, now = alkstore_store.send_many("q", [{"data": "later"}, {"data": "now"}])
        eventually(lambda: alkstore_store.get_job("q", now).state is JobState.COMPLETED)
        eventually(lambda: alkstore_store.get_job("q", later).state is JobState.RETRY)


def test_a_stately_snooze_whose_retry_slot_is_taken_fails_instead(alkstore_store):
    alkstore_store.create_queue("q", policy="stately", retry_limit=3, retry_delay=3600)
    first = alkstore_store.send("q", 1, singleton_key="k")
    (job,) = alkstore_store.fetch("q")
    alkstore_store.fail("q", job, "to retry")  # the key's one retry slot
    second = alkstore_store.send("q", 2, singleton_key="k")
    (other,) = alkstore_store.fetch("q")
    assert other.id == second
    assert alkstore_store.snooze("q", other, 10) == 0
    assert alkstore_store.get_job("q", second).state is JobState.ACTIVE
    assert alkstore_store.get_job("q", first).state is JobState.RETRY

    def handler(job, ctx):
        raise Snooze(10)

    alkstore_store.cancel("q", second)
    third = alkstore_store.send("q", 3, singleton_key="k")
    with work(alkstore_store, "q", handler, **FAST):
        # The worker fails what it could not snooze: nothing is left active until expiry.
        eventually(lambda: alkstore_store.get_job("q", third).state is not JobState.CREATED)
        eventually(lambda: alkstore_store.get_job("q", third).state is not JobState.ACTIVE)
    assert alkstore_store.get_job("q", third).errors[0].name == "Snooze"
