"""Per-queue counters (docs/dashboard.md, "Counters"): a maintenance pass tallies the events
the jobs recorded since the last one, each event once, including those of jobs a maintenance
deletion removed before any pass counted them."""

from __future__ import annotations

from alkstore.core.counters import QueueCounters


def test_each_event_is_counted_once(alkstore_store):
    alkstore_store.create_queue("dlq")
    alkstore_store.create_queue("q", retry_limit=1, retry_delay=0, dead_letter="dlq")
    alkstore_store.send_many("q", [{"data": n} for n in range(3)])
    assert alkstore_store.counters().queues == {}
    (done,) = alkstore_store.fetch("q")
    alkstore_store.complete("q", done.id)
    (flaky,) = alkstore_store.fetch("q")
    alkstore_store.fail("q", flaky.id, "first")
    (again,) = alkstore_store.fetch("q")
    assert again.id == flaky.id
    alkstore_store.fail("q", again.id, "second")
    alkstore_store.maintain()
    counters = alkstore_store.counters()
    expected = {
        "q": QueueCounters(sent=3, completed=1, failed=1, retried=1, dead_lettered=1),
        "dlq": QueueCounters(sent=1),
    }
    assert counters.queues == expected and counters.counted_until is not None
    alkstore_store.maintain()
    assert alkstore_store.counters().queues == expected


def test_expired_attempts_are_counted(alkstore_store):
    alkstore_store.create_queue("q", expire_seconds=60, retry_limit=1, retry_delay=0)
    alkstore_store.send("q", None)
    alkstore_store.fetch("q")
    alkstore_store.advance(61)
    alkstore_store.maintain()
    (again,) = alkstore_store.fetch("q")
    alkstore_store.fail("q", again.id, "handler error")
    alkstore_store.maintain()
    # The expired attempt was retried; the handler's failure was the last attempt.
    assert alkstore_store.counters().queues == {
        "q": QueueCounters(sent=1, failed=1, retried=1, expired=1)
    }


def test_jobs_deleted_before_a_pass_are_counted(alkstore_store):
    alkstore_store.create_queue("q", deletion_seconds=1)
    alkstore_store.send("q", None)
    (job,) = alkstore_store.fetch("q")
    alkstore_store.complete("q", job.id)
    alkstore_store.advance(5)
    assert alkstore_store.maintain().deleted == 1
    assert alkstore_store.counters().queues == {"q": QueueCounters(sent=1, completed=1)}
    alkstore_store.maintain()
    assert alkstore_store.counters().queues == {"q": QueueCounters(sent=1, completed=1)}


def test_purged_jobs_are_counted(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.send_many("q", [{"data": {"n": n}} for n in range(5)])
    for job in alkstore_store.fetch("q", batch_size=5):
        alkstore_store.complete("q", job.id)
    assert alkstore_store.purge_jobs("q", ["completed"], batch_size=2) == 5
    alkstore_store.maintain()
    assert alkstore_store.counters().queues == {"q": QueueCounters(sent=5, completed=5)}


def test_a_pass_may_leave_counters_that_are_recent_enough(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.send("q", None)
    alkstore_store.maintain()
    alkstore_store.send("q", None)
    alkstore_store.maintain(count_every=3600)  # as a worker's pass: counted a moment ago
    assert alkstore_store.counters().queues == {"q": QueueCounters(sent=1)}
    alkstore_store.maintain()
    assert alkstore_store.counters().queues == {"q": QueueCounters(sent=2)}
