"""Delivery guarantees: fencing, and concurrent fetchers never sharing a job (spec §9)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from alkstore import JobState


def test_a_stale_attempt_cannot_settle_the_new_one(alkstore_store):
    alkstore_store.create_queue("q", expire_seconds=10)
    job_id = alkstore_store.send("q", 1)
    alkstore_store.fetch("q")
    alkstore_store.advance(11)
    assert alkstore_store.maintain().expired == 1
    stale = alkstore_store.get_job("q", job_id)  # the expired attempt, as its worker last saw it
    (fresh,) = alkstore_store.fetch("q")
    assert fresh.retry_count == stale.retry_count + 1
    assert alkstore_store.complete("q", stale, "late") == 0
    assert alkstore_store.fail("q", stale, "late") == 0
    assert alkstore_store.touch("q", stale) == 0
    assert alkstore_store.get_job("q", job_id).state is JobState.ACTIVE
    assert alkstore_store.complete("q", fresh, "on time") == 1
    assert alkstore_store.get_job("q", job_id).output == "on time"


def test_a_bare_id_settles_the_current_attempt(alkstore_store):
    alkstore_store.create_queue("q", expire_seconds=10)
    job_id = alkstore_store.send("q", 1)
    alkstore_store.fetch("q")
    alkstore_store.advance(11)
    alkstore_store.maintain()
    alkstore_store.fetch("q")
    assert alkstore_store.complete("q", job_id, "by id") == 1
    assert alkstore_store.get_job("q", job_id).state is JobState.COMPLETED


def test_concurrent_fetchers_never_share_a_job_and_drain_everything(alkstore_store):
    alkstore_store.create_queue("q")
    sent = set(alkstore_store.send_many("q", [{"data": i} for i in range(2000)]))
    seen: list[list[object]] = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def worker(slot: int) -> None:
        start.wait()
        while True:
            jobs = alkstore_store.fetch("q", batch_size=7)
            if not jobs:
                return
            seen[slot].extend(j.id for j in jobs)
            assert alkstore_store.complete("q", jobs) == len(jobs)

    with ThreadPoolExecutor(8) as pool:
        for future in [pool.submit(worker, i) for i in range(8)]:
            future.result()
    delivered = [job_id for ids in seen for job_id in ids]
    assert len(delivered) == len(set(delivered)) == 2000
    assert set(delivered) == sent
    assert alkstore_store.queue_stats("q").counts[JobState.COMPLETED] == 2000


def test_a_job_of_an_ended_attempt_cannot_fail_the_waiting_retry(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=3, retry_delay=60)
    job_id = alkstore_store.send("q", 1)
    (attempt,) = alkstore_store.fetch("q")
    assert alkstore_store.fail("q", attempt, "first") == 1
    assert alkstore_store.fail("q", attempt, "again") == 0  # the attempt ended with the first fail
    assert alkstore_store.get_job("q", job_id).output == "first"
    assert alkstore_store.fail("q", job_id, "by id") == 1  # a bare id still acts on the queued job
    assert alkstore_store.get_job("q", job_id).output == "by id"


def test_a_job_of_a_cancelled_attempt_cannot_fail_the_resumed_job(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=0, dead_letter=None)
    job_id = alkstore_store.send("q", 1)
    (attempt,) = alkstore_store.fetch("q")
    assert alkstore_store.cancel("q", job_id) == 1
    assert alkstore_store.resume("q", job_id) == 1
    assert alkstore_store.fail("q", attempt) == 0
    assert alkstore_store.get_job("q", job_id).state == "created"
