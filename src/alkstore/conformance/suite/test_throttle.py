"""Throttle and debounce, pause and resume, the queue-wide active limit (docs/queues.md)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from alkstore import InvalidOptions, QueueNotFound

from .conftest import make_queue

PARTITIONS = [pytest.param(False, id="shared"), pytest.param(True, id="partition")]


@pytest.mark.parametrize("partition", PARTITIONS)
def test_throttle_takes_one_job_per_key_and_slot(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition)
    first = alkstore_store.send("q", 1, singleton_key="k", singleton_seconds=3600)
    assert first is not None
    assert alkstore_store.send("q", 2, singleton_key="k", singleton_seconds=3600) is None
    assert alkstore_store.send("q", 3, singleton_key="j", singleton_seconds=3600) is not None
    # An unthrottled send of the same key is not limited.
    assert alkstore_store.send("q", 4, singleton_key="k") is not None
    # The slot passes: the key takes a job again.
    alkstore_store.advance(3600)
    assert alkstore_store.send("q", 5, singleton_key="k", singleton_seconds=3600) is not None


@pytest.mark.parametrize("partition", PARTITIONS)
def test_debounce_places_a_refused_job_in_the_next_slot(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition)
    opts = {"singleton_key": "k", "singleton_seconds": 3600, "singleton_next_slot": True}
    now_id = alkstore_store.send("q", 1, **opts)
    later = alkstore_store.send("q", 2, **opts)
    assert now_id is not None and later is not None
    # Both slots are taken now.
    assert alkstore_store.send("q", 3, **opts) is None
    rows = {r["id"]: r for r in alkstore_store.job_rows()}
    # The debounced job waits for the next slot (start_after in the future: negative age).
    assert rows[later]["start_after"] < 0
    assert [j.id for j in alkstore_store.fetch("q", batch_size=5)] == [now_id]


def test_debounce_in_one_send_many(alkstore_store):
    alkstore_store.create_queue("q")
    opts = {"singleton_key": "k", "singleton_seconds": 60, "singleton_next_slot": True}
    ids = alkstore_store.send_many("q", [{"data": i, **opts} for i in range(3)])
    assert ids[0] is not None and ids[1] is not None and ids[2] is None


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"singleton_seconds": 0}, "singleton_seconds"),
        ({"singleton_seconds": "60"}, "singleton_seconds"),
        ({"singleton_next_slot": True}, "singleton_next_slot"),
        ({"singleton_seconds": 5, "singleton_next_slot": "yes"}, "singleton_next_slot"),
    ],
)
def test_bad_throttle_options_are_refused(alkstore_store, options, field):
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.send("q", 1, **options)
    assert err.value.field == field
    assert alkstore_store.job_count() == 0


@pytest.mark.parametrize("partition", PARTITIONS)
def test_paused_queue_accepts_sends_and_hands_out_nothing(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition)
    alkstore_store.pause_queue("q")
    job_id = alkstore_store.send("q", 1)
    assert job_id is not None
    assert alkstore_store.fetch("q", batch_size=5) == []
    assert alkstore_store.get_queue("q").paused is True
    alkstore_store.resume_queue("q")
    assert [j.id for j in alkstore_store.fetch("q", batch_size=5)] == [job_id]


@pytest.mark.requires("several_sessions")
@pytest.mark.parametrize("policy", ["standard", "singleton", "key_strict_fifo"])
def test_pause_seen_by_another_store_that_fetched_before(alkstore_store, policy):
    alkstore_store.create_queue("q", policy=policy)
    other = alkstore_store.sibling()
    try:
        alkstore_store.send("q", 1, singleton_key="a")
        assert len(other.fetch("q")) == 1
        waiting = alkstore_store.send("q", 2, singleton_key="b")
        alkstore_store.pause_queue("q")
        assert other.fetch("q") == []
        alkstore_store.resume_queue("q")
        assert [j.id for j in other.fetch("q")] == [waiting]
    finally:
        other.close()


def test_pause_of_a_missing_queue_is_refused(alkstore_store):
    with pytest.raises(QueueNotFound):
        alkstore_store.pause_queue("nope")
    with pytest.raises(QueueNotFound):
        alkstore_store.resume_queue("nope")


@pytest.mark.parametrize("partition", PARTITIONS)
def test_concurrency_limit_caps_active_jobs(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition, concurrency_limit=2)
    alkstore_store.send_many("q", [{"data": i} for i in range(5)])
    first = alkstore_store.fetch("q", batch_size=10)
    assert len(first) == 2
    assert alkstore_store.fetch("q", batch_size=10) == []
    alkstore_store.complete("q", first[0])
    assert len(alkstore_store.fetch("q", batch_size=10)) == 1
    assert (
        alkstore_store.update_queue("q", concurrency_limit=None).options.concurrency_limit is None
    )
    assert len(alkstore_store.fetch("q", batch_size=10)) == 2


@pytest.mark.requires("several_sessions")
def test_concurrency_limit_holds_across_concurrent_fetchers(alkstore_store):
    alkstore_store.create_queue("q", concurrency_limit=3)
    alkstore_store.send_many("q", [{"data": i} for i in range(30)])
    others = [alkstore_store.sibling() for _ in range(3)]
    try:
        with ThreadPoolExecutor(4) as pool:
            batches = list(
                pool.map(lambda s: s.fetch("q", batch_size=2), [alkstore_store, *others] * 2)
            )
    finally:
        for other in others:
            other.close()
    assert sum(len(b) for b in batches) == 3
    assert alkstore_store.queue_stats("q").counts["active"] == 3


@pytest.mark.requires("several_sessions")
@pytest.mark.parametrize("policy", ["standard", "singleton"])
def test_a_limit_set_by_another_store_is_honoured(alkstore_store, policy):
    alkstore_store.create_queue("q", policy=policy)
    other = alkstore_store.sibling()
    try:
        alkstore_store.send_many("q", [{"data": i, "singleton_key": str(i)} for i in range(5)])
        assert len(other.fetch("q")) == 1
        alkstore_store.update_queue("q", concurrency_limit=2)
        total = sum(len(other.fetch("q", batch_size=5)) for _ in range(3))
        assert total == 1
    finally:
        other.close()


@pytest.mark.parametrize("partition", PARTITIONS)
def test_ignore_start_after_takes_jobs_not_due_yet(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition)
    later = alkstore_store.send("q", 1, start_after=3600)
    assert alkstore_store.fetch("q") == []
    assert [j.id for j in alkstore_store.fetch("q", ignore_start_after=True)] == [later]
