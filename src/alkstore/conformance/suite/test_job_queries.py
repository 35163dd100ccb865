"""Finding and editing jobs (issue 12, item 6): find_jobs, update, upsert, a job's own
dead-letter queue, complete(include_queued=True)."""

from __future__ import annotations

import uuid

import pytest

from alkstore import InvalidOptions, JobConflict, JobState, QueueNotFound


def test_find_jobs_by_id_key_data_and_queued(alkstore_store):
    alkstore_store.create_queue("q")
    a = alkstore_store.send("q", {"user": 1, "kind": "mail", "extra": {"x": 1}}, singleton_key="k")
    b = alkstore_store.send("q", {"user": 2, "kind": "mail"}, singleton_key="k")
    c = alkstore_store.send("q", {"user": 1, "kind": "sms"})
    assert [j.id for j in alkstore_store.find_jobs("q")] == [a, b, c]
    assert [j.id for j in alkstore_store.find_jobs("q", id=b)] == [b]
    assert [j.id for j in alkstore_store.find_jobs("q", id=str(b))] == [b]
    assert [j.id for j in alkstore_store.find_jobs("q", key="k")] == [a, b]
    assert [j.id for j in alkstore_store.find_jobs("q", data={"user": 1})] == [a, c]
    assert [j.id for j in alkstore_store.find_jobs("q", data={"user": 1, "kind": "mail"})] == [a]
    assert [j.id for j in alkstore_store.find_jobs("q", key="k", data={"user": 1})] == [a]
    assert alkstore_store.find_jobs("q", data={"user": 3}) == []
    (fetched,) = alkstore_store.fetch("q")
    assert fetched.id == a
    assert [j.id for j in alkstore_store.find_jobs("q", queued=True)] == [b, c]
    assert [j.state for j in alkstore_store.find_jobs("q", id=a)] == [JobState.ACTIVE]


def test_find_jobs_refuses_bad_arguments_and_missing_queues(alkstore_store):
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions, match="data"):
        alkstore_store.find_jobs("q", data=[1, 2])
    with pytest.raises(InvalidOptions, match="id"):
        alkstore_store.find_jobs("q", id="not-a-uuid")
    with pytest.raises(InvalidOptions, match="queued"):
        alkstore_store.find_jobs("q", queued="yes")
    with pytest.raises(QueueNotFound):
        alkstore_store.find_jobs("nowhere")


def test_update_changes_the_newest_oldest_or_all_queued_jobs_of_a_key(alkstore_store):
    alkstore_store.create_queue("q")
    first = alkstore_store.send("q", "v1", singleton_key="k")
    second = alkstore_store.send("q", "v2", singleton_key="k")
    other = alkstore_store.send("q", "other", singleton_key="x")
    assert alkstore_store.update("q", "new", singleton_key="k") == 1
    assert alkstore_store.get_job("q", second).data == "new"
    assert alkstore_store.get_job("q", first).data == "v1"
    assert alkstore_store.update("q", "old", singleton_key="k", match="oldest") == 1
    assert alkstore_store.get_job("q", first).data == "old"
    assert alkstore_store.update("q", {"all": True}, singleton_key="k", match="all") == 2
    assert {j.data["all"] for j in alkstore_store.find_jobs("q", key="k")} == {True}
    assert alkstore_store.get_job("q", other).data == "other"
    assert alkstore_store.update("q", "by id", id=other) == 1
    assert alkstore_store.get_job("q", other).data == "by id"


def test_update_leaves_active_and_finished_jobs_alone(alkstore_store):
    alkstore_store.create_queue("q")
    job_id = alkstore_store.send("q", "v1", singleton_key="k")
    alkstore_store.fetch("q")
    assert alkstore_store.update("q", "v2", id=job_id) == 0
    assert alkstore_store.update("q", "v2", singleton_key="k") == 0
    assert alkstore_store.get_job("q", job_id).data == "v1"


def test_update_refuses_bad_arguments_and_missing_queues(alkstore_store):
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions, match="id"):
        alkstore_store.update("q", 1)
    with pytest.raises(InvalidOptions, match="match"):
        alkstore_store.update("q", 1, singleton_key="k", match="latest")
    with pytest.raises(QueueNotFound):
        alkstore_store.update("nowhere", 1, singleton_key="k")


def test_upsert_updates_the_queued_job_of_a_key_or_sends_one(alkstore_store):
    alkstore_store.create_queue("q")
    sent = alkstore_store.upsert("q", {"v": 1}, singleton_key="k", priority=5)
    job = alkstore_store.get_job("q", sent)
    assert (job.data, job.singleton_key, job.priority) == ({"v": 1}, "k", 5)
    assert alkstore_store.upsert("q", {"v": 2}, singleton_key="k", priority=9) == sent
    job = alkstore_store.get_job("q", sent)
    assert (job.data, job.priority) == ({"v": 2}, 5)  # an update changes the data only
    alkstore_store.fetch("q")
    again = alkstore_store.upsert("q", {"v": 3}, singleton_key="k")
    assert again != sent
    assert [j.id for j in alkstore_store.find_jobs("q", key="k", queued=True)] == [again]


def test_upsert_by_id_sends_with_that_id_and_refuses_a_finished_one(alkstore_store):
    alkstore_store.create_queue("q")
    chosen = uuid.uuid4()
    assert alkstore_store.upsert("q", 1, id=chosen) == chosen
    assert alkstore_store.upsert("q", 2, id=chosen) == chosen
    assert alkstore_store.get_job("q", chosen).data == 2
    alkstore_store.cancel("q", chosen)
    with pytest.raises(JobConflict):
        alkstore_store.upsert("q", 3, id=chosen)
    assert alkstore_store.get_job("q", chosen).data == 2


def test_upsert_refuses_bad_arguments(alkstore_store):
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions, match="match"):
        alkstore_store.upsert("q", 1, singleton_key="k", match="all")
    with pytest.raises(InvalidOptions, match="retry_limit"):
        alkstore_store.upsert("q", 1, singleton_key="k", retry_limit=-1)
    with pytest.raises(InvalidOptions, match="id"):
        alkstore_store.upsert("q", 1)
    assert alkstore_store.find_jobs("q") == []


def test_a_job_with_its_own_dead_letter_queue_is_copied_there(alkstore_store):
    alkstore_store.create_queue("queue_dlq")
    alkstore_store.create_queue("own_dlq")
    alkstore_store.create_queue("q", retry_limit=0, dead_letter="queue_dlq")
    own = alkstore_store.send("q", "own", dead_letter="own_dlq")
    default = alkstore_store.send("q", "default")
    assert alkstore_store.get_job("q", own).dead_letter == "own_dlq"
    assert alkstore_store.get_job("q", default).dead_letter is None
    assert alkstore_store.fail("q", [own, default], "boom") == 2
    assert [j.source_id for j in alkstore_store.find_jobs("own_dlq")] == [own]
    assert [j.source_id for j in alkstore_store.find_jobs("queue_dlq")] == [default]


def test_a_job_dead_letter_works_on_a_queue_without_one(alkstore_store):
    alkstore_store.create_queue("dlq")
    alkstore_store.create_queue("q", retry_limit=0)
    (job_id,) = alkstore_store.send_many("q", [{"data": 1, "dead_letter": "dlq"}])
    alkstore_store.fail("q", job_id)
    assert [j.source_id for j in alkstore_store.find_jobs("dlq")] == [job_id]


def test_a_job_dead_letter_must_exist_and_not_be_its_queue(alkstore_store):
    alkstore_store.create_queue("q")
    with pytest.raises(QueueNotFound) as caught:
        alkstore_store.send("q", 1, dead_letter="nowhere")
    assert (caught.value.name, caught.value.field) == ("nowhere", "dead_letter")
    with pytest.raises(InvalidOptions, match="dead_letter"):
        alkstore_store.send("q", 1, dead_letter="q")
    with pytest.raises(InvalidOptions, match="dead_letter"):
        alkstore_store.send("q", 1, dead_letter="bad name!")
    assert alkstore_store.find_jobs("q") == []


def test_complete_include_queued_completes_waiting_jobs_too(alkstore_store):
    alkstore_store.create_queue("q")
    queued = alkstore_store.send("q", 1)
    later = alkstore_store.send("q", 2, start_after=3600)
    assert alkstore_store.complete("q", [queued, later]) == 0
    assert alkstore_store.complete("q", [queued, later], {"ok": 1}, include_queued=True) == 2
    for job_id in (queued, later):
        job = alkstore_store.get_job("q", job_id)
        assert job.state is JobState.COMPLETED and job.output == {"ok": 1}
    active = alkstore_store.send("q", 3)
    alkstore_store.fetch("q")
    assert alkstore_store.complete("q", active, include_queued=True) == 1
    assert alkstore_store.complete("q", active, include_queued=True) == 0
    with pytest.raises(InvalidOptions, match="include_queued"):
        alkstore_store.complete("q", active, include_queued="yes")
