"""Queue policies, each with and without a partition of its own (spec §6, docs/queues.md)."""

from __future__ import annotations

from typing import Any

import pytest

from alkstore import InvalidOptions
from alkstore.core.states import JobState

from .conftest import make_queue

PARTITIONS = [pytest.param(False, id="shared"), pytest.param(True, id="partition")]


def state(store: Any, queue: str, job_id: Any) -> JobState:
    return JobState(store.get_job(queue, job_id).state)


@pytest.mark.parametrize("partition", PARTITIONS)
def test_short_allows_one_created_job_per_key(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition, policy="short")
    first = alkstore_store.send("q", 1, singleton_key="a")
    assert first is not None
    assert alkstore_store.send("q", 2, singleton_key="a") is None
    assert alkstore_store.send("q", 3, singleton_key="b") is not None
    # A missing key is one shared key.
    assert alkstore_store.send("q", 4) is not None
    assert alkstore_store.send("q", 5) is None
    # Once the created job is active, the key takes a created job again.
    fetched = alkstore_store.fetch("q", batch_size=10)
    assert first in [j.id for j in fetched]
    assert alkstore_store.send("q", 6, singleton_key="a") is not None


@pytest.mark.parametrize("partition", PARTITIONS)
def test_singleton_hands_out_one_active_job_per_key(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition, policy="singleton")
    a = [alkstore_store.send("q", i, singleton_key="a") for i in range(3)]
    b = [alkstore_store.send("q", i, singleton_key="b") for i in range(2)]
    first = alkstore_store.fetch("q", batch_size=10)
    assert [j.id for j in first] == [a[0], b[0]]
    assert alkstore_store.fetch("q", batch_size=10) == []
    alkstore_store.complete("q", first[0])
    assert [j.id for j in alkstore_store.fetch("q", batch_size=10)] == [a[1]]


@pytest.mark.parametrize("partition", PARTITIONS)
def test_stately_holds_one_job_per_state_and_key(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition, policy="stately")
    first = alkstore_store.send("q", 1, singleton_key="k")
    assert alkstore_store.send("q", 2, singleton_key="k") is None
    (active,) = alkstore_store.fetch("q", batch_size=5)
    assert active.id == first
    second = alkstore_store.send("q", 3, singleton_key="k")
    assert second is not None
    assert alkstore_store.send("q", 4, singleton_key="k") is None
    # One active job per key: the created one waits.
    assert alkstore_store.fetch("q", batch_size=5) == []


@pytest.mark.parametrize("partition", PARTITIONS)
def test_stately_retry_bypass_fails_a_job_whose_retry_slot_is_taken(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition, policy="stately", retry_limit=3, retry_delay=600)
    a = alkstore_store.send("q", "a", singleton_key="k")
    alkstore_store.fetch("q")
    alkstore_store.fail("q", a, "boom")
    assert state(alkstore_store, "q", a) is JobState.RETRY
    b = alkstore_store.send("q", "b", singleton_key="k")
    (job,) = alkstore_store.fetch("q")
    assert job.id == b
    # b would retry, but a already waits for its retry: b fails for good.
    assert alkstore_store.fail("q", job, "boom") == 1
    assert state(alkstore_store, "q", b) is JobState.FAILED
    assert state(alkstore_store, "q", a) is JobState.RETRY


@pytest.mark.parametrize("partition", PARTITIONS)
def test_exclusive_allows_one_unfinished_job_per_key(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition, policy="exclusive")
    first = alkstore_store.send("q", 1, singleton_key="k")
    assert alkstore_store.send("q", 2, singleton_key="k") is None
    (job,) = alkstore_store.fetch("q")
    assert job.id == first
    assert alkstore_store.send("q", 3, singleton_key="k") is None
    alkstore_store.complete("q", job)
    assert alkstore_store.send("q", 4, singleton_key="k") is not None


@pytest.mark.parametrize("partition", PARTITIONS)
def test_key_strict_fifo_runs_each_key_in_creation_order(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition, policy="key_strict_fifo", retry_limit=0)
    a1 = alkstore_store.send("q", "a1", singleton_key="a")
    # Priority does not overtake within a key.
    a2 = alkstore_store.send("q", "a2", singleton_key="a", priority=10)
    b1 = alkstore_store.send("q", "b1", singleton_key="b")
    b2 = alkstore_store.send("q", "b2", singleton_key="b")
    first = alkstore_store.fetch("q", batch_size=10)
    assert sorted(j.id for j in first) == sorted([a1, b1])
    assert alkstore_store.fetch("q", batch_size=10) == []
    # a1 fails for good: key a is blocked, key b is not.
    by_id = {j.id: j for j in first}
    alkstore_store.fail("q", by_id[a1], "boom")
    alkstore_store.complete("q", by_id[b1])
    assert [j.id for j in alkstore_store.fetch("q", batch_size=10)] == [b2]
    assert alkstore_store.fetch("q", batch_size=10) == []
    # Retrying the failed job unblocks the key, in order.
    assert alkstore_store.retry("q", a1) == 1
    (again,) = alkstore_store.fetch("q", batch_size=10)
    assert again.id == a1
    alkstore_store.complete("q", again)
    assert [j.id for j in alkstore_store.fetch("q", batch_size=10)] == [a2]


@pytest.mark.parametrize("partition", PARTITIONS)
def test_key_strict_fifo_deleting_the_failed_job_unblocks_its_key(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition, policy="key_strict_fifo", retry_limit=0)
    a1 = alkstore_store.send("q", "a1", singleton_key="a")
    a2 = alkstore_store.send("q", "a2", singleton_key="a")
    (job,) = alkstore_store.fetch("q", batch_size=10)
    alkstore_store.fail("q", job, "boom")
    assert alkstore_store.fetch("q", batch_size=10) == []
    alkstore_store.delete_jobs("q", a1)
    assert [j.id for j in alkstore_store.fetch("q", batch_size=10)] == [a2]


@pytest.mark.parametrize("partition", PARTITIONS)
def test_send_many_reports_each_refused_job_as_none(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition, policy="short")
    ids = alkstore_store.send_many(
        "q",
        [
            {"data": 1, "singleton_key": "a"},
            {"data": 2, "singleton_key": "a"},
            {"data": 3, "singleton_key": "b"},
        ],
    )
    assert ids[0] is not None and ids[1] is None and ids[2] is not None
    assert alkstore_store.queue_stats("q").queued == 2


@pytest.mark.parametrize("partition", PARTITIONS)
def test_a_policy_queue_still_refuses_a_duplicate_id(alkstore_store, partition):
    from alkstore import JobConflict

    make_queue(alkstore_store, "q", partition, policy="singleton")
    taken = alkstore_store.send("q", 1)
    with pytest.raises(JobConflict):
        alkstore_store.send("q", 2, id=taken)


@pytest.mark.requires("several_sessions")
def test_concurrent_singleton_fetchers_never_share_a_key(alkstore_store):
    from concurrent.futures import ThreadPoolExecutor

    alkstore_store.create_queue("q", policy="singleton")
    alkstore_store.send_many("q", [{"data": i, "singleton_key": str(i % 5)} for i in range(40)])
    others = [alkstore_store.sibling() for _ in range(3)]
    try:
        with ThreadPoolExecutor(4) as pool:
            batches = list(
                pool.map(lambda s: s.fetch("q", batch_size=10), [alkstore_store, *others])
            )
    finally:
        for other in others:
            other.close()
    jobs = [j for batch in batches for j in batch]
    keys = [j.singleton_key for j in jobs]
    assert len(keys) == len(set(keys)) == 5


def test_invalid_policy_options_name_field_and_value(alkstore_store):
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.create_queue("q", policy="fifo")
    assert err.value.field == "policy"
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.create_queue("q", concurrency_limit=0)
    assert err.value.field == "concurrency_limit"
    assert alkstore_store.queues() == []
