"""Fetch, complete, fail, cancel, resume, retry, delete, touch (spec §3)."""

from __future__ import annotations

import uuid

import pytest

from alkstore import InvalidOptions, JobState, QueueNotFound


def test_fetch_claims_in_priority_then_fifo_order(alkstore_store):
    alkstore_store.create_queue("q")
    a = alkstore_store.send("q", "a")
    b = alkstore_store.send("q", "b", priority=5)
    c = alkstore_store.send("q", "c")
    d = alkstore_store.send("q", "d", priority=-1)
    e = alkstore_store.send("q", "e", priority=5)
    jobs = alkstore_store.fetch("q", batch_size=10, include_metadata=True)
    assert [j.id for j in jobs] == [b, e, a, c, d]
    for job in jobs:
        assert job.state is JobState.ACTIVE
        assert job.started_on is not None and job.retry_count == 0
    assert alkstore_store.fetch("q", batch_size=10) == []


def test_fetch_respects_batch_size_and_queue(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.create_queue("other")
    alkstore_store.send_many("q", [{"data": i} for i in range(5)])
    alkstore_store.send("other", "x")
    assert [j.data for j in alkstore_store.fetch("q", batch_size=2)] == [0, 1]
    assert [j.data for j in alkstore_store.fetch("q", batch_size=2)] == [2, 3]
    assert [j.data for j in alkstore_store.fetch("q", batch_size=2)] == [4]
    assert all(j.queue == "q" for j in alkstore_store.fetch("q", batch_size=2)) is True
    assert [j.data for j in alkstore_store.fetch("other")] == ["x"]


@pytest.mark.parametrize("bad", [0, -1, 1.5, "2", True, None])
def test_fetch_batch_size_below_one_is_refused(alkstore_store, bad):
    alkstore_store.create_queue("q")
    alkstore_store.send("q", 1)
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.fetch("q", batch_size=bad)
    assert (err.value.field, err.value.value) == ("batch_size", bad)
    assert alkstore_store.queue_stats("q").queued == 1


def test_fetch_unknown_queue_raises(alkstore_store):
    with pytest.raises(QueueNotFound):
        alkstore_store.fetch("nope")


def test_complete_stores_output_and_counts_only_active_jobs(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.create_queue("other")
    ids = alkstore_store.send_many("q", [{"data": i} for i in range(3)])
    other = alkstore_store.send("other", "o")
    alkstore_store.fetch("q", batch_size=2)
    alkstore_store.fetch("other")
    # ids[2] is still queued, `other` is in another queue, one id does not exist
    changed = alkstore_store.complete(
        "q", [ids[0], ids[1], ids[2], other, uuid.uuid4()], {"ok": True}
    )
    assert changed == 2
    done = alkstore_store.get_job("q", ids[0])
    assert done.state is JobState.COMPLETED and done.output == {"ok": True}
    assert done.completed_on is not None
    assert alkstore_store.get_job("q", ids[2]).state is JobState.CREATED
    assert alkstore_store.get_job("other", other).state is JobState.ACTIVE
    assert alkstore_store.complete("q", ids[0]) == 0  # already completed


def test_ids_accept_one_id_strings_and_jobs(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.send_many("q", [{"data": i} for i in range(3)])
    a, b, c = alkstore_store.fetch("q", batch_size=3)
    assert alkstore_store.complete("q", a.id) == 1
    assert alkstore_store.complete("q", str(b.id)) == 1
    assert alkstore_store.complete("q", c) == 1
    assert alkstore_store.complete("q", []) == 0


def test_invalid_ids_are_refused(alkstore_store):
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.complete("q", ["not-a-uuid"])
    assert err.value.field == "ids"
    with pytest.raises(InvalidOptions):
        alkstore_store.cancel("q", 42)


def test_complete_refuses_non_json_output(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.send("q", 1)
    (job,) = alkstore_store.fetch("q")
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.complete("q", job, {1, 2})
    assert err.value.field == "output"
    assert alkstore_store.get_job("q", job.id).state is JobState.ACTIVE


def test_complete_and_fetch_completes_then_claims_the_next_jobs(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.send_many("q", [{"data": i} for i in range(5)])
    first = alkstore_store.fetch("q", batch_size=2)
    done, jobs = alkstore_store.complete_and_fetch(
        "q", first, {"ok": 1}, batch_size=2, include_metadata=True
    )
    assert done == 2
    assert [j.data for j in jobs] == [2, 3]
    assert all(j.state is JobState.ACTIVE and j.started_on is not None for j in jobs)
    for job in first:
        stored = alkstore_store.get_job("q", job.id)
        assert stored.state is JobState.COMPLETED and stored.output == {"ok": 1}
    done, jobs = alkstore_store.complete_and_fetch("q", [j.id for j in jobs], batch_size=5)
    assert (done, [j.data for j in jobs]) == (2, [4])
    assert alkstore_store.complete_and_fetch("q", jobs) == (1, [])
    assert alkstore_store.queue_stats("q").counts[JobState.COMPLETED] == 5


def test_complete_and_fetch_fetches_in_priority_order_from_its_queue(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.create_queue("other")
    alkstore_store.send("other", "elsewhere", priority=9)
    low = alkstore_store.send("q", "low")
    high = alkstore_store.send("q", "high", priority=3)
    alkstore_store.send("q", "first", priority=5)  # fetched below: `low` and `high` remain queued
    (first,) = alkstore_store.fetch("q")
    result = alkstore_store.complete_and_fetch("q", first, batch_size=3)
    assert result.completed == 1
    assert [j.id for j in result.jobs] == [high, low]


def test_complete_and_fetch_counts_only_the_active_attempt(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.send_many("q", [{"data": i} for i in range(2)])
    (job,) = alkstore_store.fetch("q")
    assert alkstore_store.cancel("q", job) == 1
    result = alkstore_store.complete_and_fetch("q", job)
    assert result.completed == 0
    assert [j.data for j in result.jobs] == [1]
    assert alkstore_store.get_job("q", job.id).state is JobState.CANCELLED


def test_complete_and_fetch_checks_its_arguments_before_changing_anything(alkstore_store):
    with pytest.raises(QueueNotFound):
        alkstore_store.complete_and_fetch("nope", [])
    alkstore_store.create_queue("q")
    alkstore_store.send_many("q", [{"data": i} for i in range(2)])
    (job,) = alkstore_store.fetch("q")
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.complete_and_fetch("q", job, batch_size=0)
    assert (err.value.field, err.value.value) == ("batch_size", 0)
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.complete_and_fetch("q", job, {1, 2})
    assert err.value.field == "output"
    assert alkstore_store.get_job("q", job.id).state is JobState.ACTIVE
    assert alkstore_store.queue_stats("q").queued == 1


def test_cancel_queued_and_active_then_resume(alkstore_store):
    alkstore_store.create_queue("q")
    queued, active, done = alkstore_store.send_many("q", [{"data": i} for i in range(3)])
    alkstore_store.fetch("q", batch_size=1)  # claims `queued`
    # `queued` is now active; fetch again to make the second active, complete the third
    alkstore_store.fetch("q")
    (third,) = alkstore_store.fetch("q")
    alkstore_store.complete("q", third)
    assert alkstore_store.cancel("q", [queued, active, done]) == 2
    for job_id in (queued, active):
        job = alkstore_store.get_job("q", job_id)
        assert job.state is JobState.CANCELLED and job.completed_on is not None
    assert alkstore_store.get_job("q", done).state is JobState.COMPLETED
    assert alkstore_store.resume("q", [queued, active, done]) == 2
    resumed = alkstore_store.get_job("q", queued)
    assert resumed.state is JobState.CREATED and resumed.completed_on is None
    assert {j.id for j in alkstore_store.fetch("q", batch_size=5)} == {queued, active}


def test_cancel_unstarted_job_then_resume(alkstore_store):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", 1)
    assert alkstore_store.cancel("q", job_id) == 1
    assert alkstore_store.fetch("q") == []
    assert alkstore_store.resume("q", job_id) == 1
    assert alkstore_store.resume("q", job_id) == 0
    assert [j.id for j in alkstore_store.fetch("q")] == [job_id]


def test_delete_jobs_in_any_state(alkstore_store):
    alkstore_store.create_queue("q")
    ids = alkstore_store.send_many("q", [{"data": i} for i in range(3)])
    (first,) = alkstore_store.fetch("q")
    alkstore_store.complete("q", first)
    alkstore_store.fetch("q")
    assert alkstore_store.delete_jobs("q", [*ids, uuid.uuid4()]) == 3
    assert alkstore_store.job_count() == 0
    assert alkstore_store.delete_jobs("q", ids) == 0


def test_purge_deletes_a_queues_jobs_in_the_named_states_in_batches(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0)
    alkstore_store.create_queue("other")
    kept = alkstore_store.send("other", "x")
    ids = alkstore_store.send_many("q", [{"data": i} for i in range(7)])
    done = alkstore_store.fetch("q", batch_size=5)
    alkstore_store.complete("q", done[:3])
    alkstore_store.fail("q", done[3], "no")
    alkstore_store.complete("other", alkstore_store.fetch("other"))
    assert alkstore_store.purge_jobs("q", ["completed", "failed"], batch_size=2) == 4
    left = {j.id: j.state for j in alkstore_store.list_jobs("q")}
    assert left == {done[4].id: JobState.ACTIVE, ids[5]: JobState.CREATED, ids[6]: JobState.CREATED}
    assert alkstore_store.get_job("other", kept).state is JobState.COMPLETED
    assert alkstore_store.purge_jobs("q", "completed") == 0
    assert alkstore_store.purge_jobs("q", [JobState.CREATED, JobState.ACTIVE]) == 3
    assert alkstore_store.list_jobs("q") == []
    with pytest.raises(InvalidOptions, match="states"):
        alkstore_store.purge_jobs("q", [])
    with pytest.raises(InvalidOptions, match="states"):
        alkstore_store.purge_jobs("q", ["done"])
    with pytest.raises(InvalidOptions, match="batch_size"):
        alkstore_store.purge_jobs("q", ["failed"], batch_size=0)
    with pytest.raises(QueueNotFound):
        alkstore_store.purge_jobs("nope", ["failed"])


def test_delete_jobs_ignores_other_queues(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.create_queue("other")
    other = alkstore_store.send("other", 1)
    assert alkstore_store.delete_jobs("q", other) == 0
    assert alkstore_store.get_job("other", other) is not None


def test_touch_only_active_jobs(alkstore_store):
    alkstore_store.create_queue("q", heartbeat_seconds=30)
    queued = alkstore_store.send("q", 1)
    running = alkstore_store.send("q", 2)
    alkstore_store.delete_jobs("q", queued)
    queued = alkstore_store.send("q", 3, priority=-1)
    (job,) = alkstore_store.fetch("q", include_metadata=True)
    assert job.id == running and job.heartbeat_on is not None
    alkstore_store.advance(10)
    before = alkstore_store.get_job("q", running)  # advance() moved the stored times, so re-read
    assert alkstore_store.touch("q", [before, queued]) == 1
    assert alkstore_store.get_job("q", running).heartbeat_on > before.heartbeat_on
    assert alkstore_store.get_job("q", queued).heartbeat_on is None


def test_get_job_of_other_queue_is_none(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.create_queue("other")
    job_id = alkstore_store.send("q", 1)
    assert alkstore_store.get_job("other", job_id) is None
    assert alkstore_store.get_job("q", uuid.uuid4()) is None
