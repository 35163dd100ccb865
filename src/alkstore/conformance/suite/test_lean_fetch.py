"""Lean and full fetch results: ``include_metadata`` (docs/guide.md, "Lean jobs")."""

from __future__ import annotations

import pickle

import attrs
import pytest

from alkstore import InvalidOptions, Job, JobState, MetadataNotFetched
from alkstore.core.lean import LEAN_FIELDS, METADATA_FIELDS


def _same_lean_fields(job: Job, full: Job) -> None:
    for name in LEAN_FIELDS:
        assert getattr(job, name) == getattr(full, name), name


def test_fetch_is_lean_by_default(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=4, expire_seconds=60)
    sent = alkstore_store.send(
        "q", {"n": 1}, priority=3, singleton_key="k", group_id="g", heartbeat_seconds=30
    )
    (job,) = alkstore_store.fetch("q")
    assert isinstance(job, Job) and job.has_metadata is False
    assert (job.id, job.queue, job.data, job.state) == (sent, "q", {"n": 1}, JobState.ACTIVE)
    assert (job.priority, job.retry_count, job.retry_limit) == (3, 0, 4)
    assert (job.expire_seconds, job.heartbeat_seconds) == (60, 30)
    assert (job.singleton_key, job.group_id) == ("k", "g")
    _same_lean_fields(job, alkstore_store.get_job("q", sent))
    for name in METADATA_FIELDS:
        assert not hasattr(job, name)
        with pytest.raises(MetadataNotFetched, match=f"Job.{name} was not fetched") as err:
            getattr(job, name)
        assert err.value.field == name
    assert "metadata not fetched" in repr(job)
    assert pickle.loads(pickle.dumps(job)) == job


def test_fetch_with_metadata_is_the_full_record(alkstore_store):
    alkstore_store.create_queue("q")
    sent = alkstore_store.send("q", {"n": 2}, retry_delay=7)
    (job,) = alkstore_store.fetch("q", include_metadata=True)
    assert job.has_metadata is True and type(job) is Job
    assert job.started_on is not None and job.retry_delay == 7 and job.output is None
    assert job == alkstore_store.get_job("q", sent)
    assert attrs.asdict(job)["queue"] == "q"


def test_get_job_stays_full(alkstore_store):
    alkstore_store.create_queue("q")
    sent = alkstore_store.send("q", "x")
    alkstore_store.fetch("q")
    job = alkstore_store.get_job("q", sent)
    assert job.has_metadata and job.started_on is not None and job.completed_on is None


@pytest.mark.parametrize("include_metadata", [False, True])
def test_both_forms_fence_their_attempt(alkstore_store, include_metadata):
    alkstore_store.create_queue("q", retry_limit=2, retry_delay=0)
    alkstore_store.send("q", "x")
    (first,) = alkstore_store.fetch("q", include_metadata=include_metadata)
    assert alkstore_store.fail("q", first, "boom") == 1
    (second,) = alkstore_store.fetch("q", include_metadata=include_metadata)
    assert second.retry_count == first.retry_count + 1
    assert alkstore_store.complete("q", first) == 0  # the old attempt's fence matches nothing
    assert alkstore_store.complete("q", second) == 1


@pytest.mark.parametrize("include_metadata", [False, True])
def test_complete_and_fetch_returns_either_form(alkstore_store, include_metadata):
    alkstore_store.create_queue("q")
    alkstore_store.send_many("q", [{"data": n} for n in range(3)])
    jobs = alkstore_store.fetch("q")
    completed, nxt = alkstore_store.complete_and_fetch(
        "q", jobs, batch_size=5, include_metadata=include_metadata
    )
    assert completed == 1 and [j.data for j in nxt] == [1, 2]
    assert all(j.has_metadata is include_metadata for j in nxt)
    for job in nxt:
        _same_lean_fields(job, alkstore_store.get_job("q", job.id))


@pytest.mark.parametrize("include_metadata", [False, True])
def test_the_keyed_claim_returns_either_form(alkstore_store, include_metadata):
    alkstore_store.create_queue("q")
    alkstore_store.send_many("q", [{"data": n, "group_id": f"g{n % 2}"} for n in range(4)])
    jobs = alkstore_store.fetch(
        "q", batch_size=4, group_concurrency=1, include_metadata=include_metadata
    )
    assert sorted(j.data for j in jobs) == [0, 1]
    assert all(j.has_metadata is include_metadata for j in jobs)
    completed, nxt = alkstore_store.complete_and_fetch(
        "q", jobs, batch_size=4, group_concurrency=1, include_metadata=include_metadata
    )
    assert completed == 2 and sorted(j.data for j in nxt) == [2, 3]
    assert all(j.has_metadata is include_metadata for j in nxt)


@pytest.mark.parametrize("bad", [None, 1, "yes"])
def test_include_metadata_must_be_a_bool(alkstore_store, bad):
    alkstore_store.create_queue("q")
    alkstore_store.send("q", "x")
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.fetch("q", include_metadata=bad)
    assert (err.value.field, err.value.value) == ("include_metadata", bad)
    with pytest.raises(InvalidOptions):
        alkstore_store.complete_and_fetch("q", [], include_metadata=bad)
    assert alkstore_store.queue_stats("q").queued == 1
