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


@pytest.mark.parametrize("policy", ["singleton", "stately", "key_strict_fifo"])
def test_complete_and_fetch_claims_the_next_job_of_the_completed_key(alkstore_store, policy):
    alkstore_store.create_queue("q", policy=policy)
    a1 = alkstore_store.send("q", "a1", singleton_key="a")
    b1 = alkstore_store.send("q", "b1", singleton_key="b")
    first = {j.id: j for j in alkstore_store.fetch("q", batch_size=10)}
    assert sorted(first) == sorted([a1, b1])
    a2 = alkstore_store.send("q", "a2", singleton_key="a")
    alkstore_store.send("q", "b2", singleton_key="b")
    # Key "a" is free once a1 completes; key "b" is still busy with b1.
    handoff = alkstore_store.complete_and_fetch("q", first[a1], batch_size=10)
    assert handoff.completed == 1
    assert [j.id for j in handoff.jobs] == [a2]
    assert state(alkstore_store, "q", a1) is JobState.COMPLETED
    # Completing the other key's job and the new one frees both keys at once.
    both = [first[b1], *handoff.jobs]
    again = alkstore_store.complete_and_fetch("q", both, batch_size=10)
    assert again.completed == 2
    assert [j.data for j in again.jobs] == ["b2"]


def test_complete_and_fetch_on_a_keyed_queue_releases_flow_children(alkstore_store):
    alkstore_store.create_queue("q", policy="singleton")
    ids = alkstore_store.flow(
        [
            {"ref": "a", "queue": "q", "data": "a", "singleton_key": "k"},
            {"ref": "b", "queue": "q", "data": "b", "singleton_key": "k", "depends_on": ["a"]},
        ]
    )
    (a,) = alkstore_store.fetch("q")
    handoff = alkstore_store.complete_and_fetch("q", a, batch_size=10)
    assert handoff.completed == 1
    # As a fetch after the completion would: the child it released, of the key it freed.
    assert [j.id for j in handoff.jobs] == [ids["b"]]


RACE_KEYS = 4
RACE_JOBS = 120


@pytest.mark.requires("several_sessions")
@pytest.mark.parametrize("policy", ["singleton", "stately", "key_strict_fifo"])
def test_racing_fetchers_and_senders_never_run_two_jobs_of_a_key(alkstore_store, policy):
    # Fetchers race each other and a sender whose jobs of rising priority change a key's head
    # between the fetchers' snapshots (the race the lock-free keyed claim loses on the unique
    # index and runs again, docs/queues.md): no fetch fails, and each fetcher finds, in the
    # database, its job as the only active one of the key while it holds it.
    import threading
    from concurrent.futures import ThreadPoolExecutor

    alkstore_store.create_queue("q", policy=policy)
    stores = [alkstore_store.sibling() for _ in range(4)]
    sent: list[Any] = []
    done = threading.Event()

    def send() -> None:
        for n in range(RACE_JOBS):
            key = str(n % RACE_KEYS)
            sent.append(stores[0].send("q", n, singleton_key=key, priority=n))

    def fetch(store: Any) -> list[Any]:
        taken = []
        while not done.is_set():
            jobs = store.fetch("q", batch_size=RACE_KEYS)
            assert len({j.singleton_key for j in jobs}) == len(jobs)
            for job in jobs:
                active = [
                    j.id for j in store.find_jobs("q", key=job.singleton_key) if j.state == "active"
                ]
                assert active == [job.id]
            taken += [j.id for j in jobs]
            store.complete("q", jobs)
            if len(sent) == RACE_JOBS and not store.find_jobs("q", queued=True):
                done.set()
        return taken

    try:
        with ThreadPoolExecutor(4) as pool:
            sender = pool.submit(send)
            fetchers = [pool.submit(fetch, s) for s in stores[1:]]
            sender.result()
            taken = [i for f in fetchers for i in f.result()]
    finally:
        done.set()
        for store in stores:
            store.close()
    # A stately queue refuses a send while the key has a created job (None).
    assert sorted(taken) == sorted(i for i in sent if i is not None)


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


@pytest.mark.parametrize("dlq_policy", ["short", "stately", "exclusive"])
def test_a_dead_letter_copy_the_dlq_policy_refuses_is_recorded_on_the_failed_job(
    alkstore_store, dlq_policy
):
    alkstore_store.create_queue("dlq", policy=dlq_policy)
    alkstore_store.create_queue("q", retry_limit=0, dead_letter="dlq")
    first, second = (alkstore_store.send("q", i, singleton_key="k") for i in range(2))
    alkstore_store.fetch("q", batch_size=2)
    # Both fail in one call: the dead-letter queue takes one copy of key k, refuses the other.
    assert alkstore_store.fail("q", [first, second], {"message": "boom"}) == 2
    jobs = [alkstore_store.get_job("q", i) for i in (first, second)]
    assert [j.state for j in jobs] == ["failed", "failed"]
    assert len(alkstore_store.find_jobs("dlq")) == 1
    refused = [j for j in jobs if "dead_letter_refused" in j.output]
    assert len(refused) == 1
    assert refused[0].output == {"message": "boom", "dead_letter_refused": "dlq"}
    # A later failure is refused too while the copy waits; a non-object output is wrapped.
    third = alkstore_store.send("q", 3, singleton_key="k")
    alkstore_store.fetch("q")
    assert alkstore_store.fail("q", third, "plain") == 1
    assert alkstore_store.get_job("q", third).output == {
        "output": "plain",
        "dead_letter_refused": "dlq",
    }


def test_redrive_leaves_in_the_dlq_the_jobs_the_target_policy_refuses(alkstore_store):
    alkstore_store.create_queue("dlq")
    alkstore_store.create_queue("q", policy="short")
    alkstore_store.send_many("dlq", [{"data": i, "singleton_key": "k"} for i in range(3)])
    assert alkstore_store.redrive("dlq", to="q") == 1
    assert len(alkstore_store.find_jobs("q")) == 1
    assert len(alkstore_store.find_jobs("dlq")) == 2
    alkstore_store.fetch("q")
    assert alkstore_store.redrive("dlq", to="q") == 1
    assert len(alkstore_store.find_jobs("dlq")) == 1


def test_stately_failing_two_jobs_of_a_key_at_once_retries_one(alkstore_store):
    alkstore_store.create_queue("q", policy="stately", retry_limit=3, retry_delay=600)
    a = alkstore_store.send("q", "a", singleton_key="k")
    (job_a,) = alkstore_store.fetch("q")
    b = alkstore_store.send("q", "b", singleton_key="k")
    # b is created, a active: a bare-id fail takes both; only one may hold the retry slot.
    assert alkstore_store.fail("q", [a, b], "boom") == 2
    states = sorted(state(alkstore_store, "q", i) for i in (a, b))
    assert states == [JobState.FAILED, JobState.RETRY]
    assert job_a.id == a


def test_stately_fail_of_a_key_in_any_target_order_retries_one(alkstore_store):
    alkstore_store.create_queue("q", policy="stately", retry_limit=3, retry_delay=600)
    # The second job's created slot frees when the first becomes active.
    alkstore_store.send("q", "a", singleton_key="k")
    alkstore_store.fetch("q")
    alkstore_store.send("q", "b", singleton_key="k")
    ids = [j.id for j in alkstore_store.find_jobs("q")]
    assert alkstore_store.fail("q", list(reversed(ids)), "boom") == 2
    assert sorted(state(alkstore_store, "q", i) for i in ids) == [
        JobState.FAILED,
        JobState.RETRY,
    ]


def test_retry_that_would_break_a_policy_changes_nothing(alkstore_store):
    alkstore_store.create_queue("q", policy="stately", retry_limit=0)
    failed = []
    for data in ("a", "b"):
        alkstore_store.send("q", data, singleton_key="k")
        (job,) = alkstore_store.fetch("q")
        alkstore_store.fail("q", job, "boom")
        failed.append(job.id)
    # One retry slot per key: of two failed jobs retried at once, one takes it.
    assert alkstore_store.retry("q", failed) == 1
    assert sorted(state(alkstore_store, "q", i) for i in failed) == [
        JobState.FAILED,
        JobState.RETRY,
    ]
    # The slot is still held: retrying the other one changes nothing.
    other = next(i for i in failed if state(alkstore_store, "q", i) is JobState.FAILED)
    assert alkstore_store.retry("q", other) == 0
    assert state(alkstore_store, "q", other) is JobState.FAILED


@pytest.mark.parametrize("policy", ["short", "stately", "exclusive"])
def test_resume_that_would_break_a_policy_changes_nothing(alkstore_store, policy):
    alkstore_store.create_queue("q", policy=policy)
    first = alkstore_store.send("q", 1, singleton_key="k")
    alkstore_store.cancel("q", first)
    second = alkstore_store.send("q", 2, singleton_key="k")
    alkstore_store.cancel("q", second)
    assert alkstore_store.resume("q", [first, second]) == 1
    waiting = alkstore_store.find_jobs("q", queued=True)
    assert len(waiting) == 1
    assert alkstore_store.resume("q", [first, second]) == 0
    alkstore_store.delete_jobs("q", waiting[0].id)
    assert alkstore_store.resume("q", [first, second]) == 1


def test_a_flow_job_waiting_for_its_parents_holds_its_key_on_a_short_queue(alkstore_store):
    alkstore_store.create_queue("parents")
    alkstore_store.create_queue("q", policy="short")
    ids = alkstore_store.flow(
        [
            {"ref": "a", "queue": "parents", "data": 1},
            {"ref": "b", "queue": "q", "data": 2, "singleton_key": "k", "depends_on": ["a"]},
        ]
    )
    assert alkstore_store.fetch("q") == []  # b waits for a...
    assert alkstore_store.send("q", 3, singleton_key="k") is None  # ...holding key k
    (parent,) = alkstore_store.fetch("parents")
    alkstore_store.complete("parents", parent)
    (child,) = alkstore_store.fetch("q")
    assert child.id == ids["b"]
    assert alkstore_store.send("q", 3, singleton_key="k") is not None
