"""Queues: create, read, update, delete, and their errors (spec §1, §5, §10)."""

from __future__ import annotations

import pytest

from alkstore import InvalidOptions, QueueExists, QueueInUse, QueueNotFound
from alkstore.core.options import Policy


def test_create_and_get_queue_with_defaults(store):
    store.create_queue("email")
    queue = store.get_queue("email")
    assert queue is not None
    assert queue.name == "email"
    o = queue.options
    assert (o.retry_limit, o.retry_delay, o.retry_backoff, o.retry_delay_max) == (2, 0, False, None)
    assert (o.expire_seconds, o.heartbeat_seconds) == (900, None)
    assert (o.retention_seconds, o.deletion_seconds) == (14 * 86400, 7 * 86400)
    assert queue.policy is Policy.STANDARD
    assert queue.dead_letter is None


def test_create_queue_with_options_round_trips(store):
    store.create_queue("dlq")
    store.create_queue(
        "work",
        retry_limit=5,
        retry_delay=3,
        retry_backoff=True,
        retry_delay_max=60,
        expire_seconds=30,
        heartbeat_seconds=20,
        retention_seconds=100,
        deletion_seconds=0,
        dead_letter="dlq",
    )
    o = store.get_queue("work").options
    assert o.retry_limit == 5 and o.retry_delay == 3 and o.retry_backoff is True
    assert o.retry_delay_max == 60 and o.expire_seconds == 30 and o.heartbeat_seconds == 20
    assert o.retention_seconds == 100 and o.deletion_seconds == 0 and o.dead_letter == "dlq"


def test_queues_lists_by_name(store):
    for name in ("b", "a", "c.d/e-f_g"):
        store.create_queue(name)
    assert [q.name for q in store.queues()] == ["a", "b", "c.d/e-f_g"]


def test_get_unknown_queue_is_none(store):
    assert store.get_queue("nope") is None


def test_duplicate_queue_raises_queue_exists(store):
    store.create_queue("q")
    with pytest.raises(QueueExists):
        store.create_queue("q", retry_limit=9)
    assert store.get_queue("q").options.retry_limit == 2


def test_dead_letter_must_exist(store):
    with pytest.raises(QueueNotFound) as err:
        store.create_queue("q", dead_letter="missing")
    assert "missing" in str(err.value) and "dead_letter" in str(err.value)
    assert store.queues() == []


def test_dead_letter_may_not_be_itself(store):
    with pytest.raises(InvalidOptions) as err:
        store.create_queue("q", dead_letter="q")
    assert err.value.field == "dead_letter"
    assert store.queues() == []


@pytest.mark.parametrize(
    "name", ["", "-leading", "_x", "has space", "semi;colon", "quote'", "x" * 101, 42, None]
)
def test_invalid_queue_names_are_refused(store, name):
    with pytest.raises(InvalidOptions) as err:
        store.create_queue(name)
    assert err.value.field == "queue" and err.value.value == name
    assert store.queues() == []


def test_update_queue_changes_settings(store):
    store.create_queue("dlq")
    store.create_queue("q")
    updated = store.update_queue("q", retry_limit=7, dead_letter="dlq")
    assert updated.options.retry_limit == 7 and updated.dead_letter == "dlq"
    assert store.get_queue("q").options.retry_limit == 7
    assert updated.updated_on >= updated.created_on


def test_update_queue_refuses_policy_and_partition(store):
    store.create_queue("q")
    for field, value in (("policy", "short"), ("partition", True)):
        with pytest.raises(InvalidOptions) as err:
            store.update_queue("q", **{field: value})
        assert err.value.field == field


def test_update_queue_checks_dead_letter(store):
    store.create_queue("q")
    with pytest.raises(QueueNotFound):
        store.update_queue("q", dead_letter="missing")
    with pytest.raises(InvalidOptions):
        store.update_queue("q", dead_letter="q")
    assert store.get_queue("q").dead_letter is None


def test_update_unknown_queue_raises(store):
    with pytest.raises(QueueNotFound):
        store.update_queue("nope", retry_limit=1)


def test_update_queue_bad_value_writes_nothing(store):
    store.create_queue("q")
    with pytest.raises(InvalidOptions) as err:
        store.update_queue("q", retry_limit=-1)
    assert (err.value.field, err.value.value) == ("retry_limit", -1)
    assert store.get_queue("q").options.retry_limit == 2


def test_delete_queue_removes_it_and_its_jobs(store):
    store.create_queue("q")
    store.create_queue("other")
    store.send("q", {"n": 1})
    keep = store.send("other", {"n": 2})
    store.delete_queue("q")
    assert store.get_queue("q") is None
    assert store.job_count() == 1
    assert store.get_job("other", keep) is not None


def test_delete_unknown_queue_raises(store):
    with pytest.raises(QueueNotFound):
        store.delete_queue("nope")


def test_delete_queue_used_as_dead_letter_is_refused(store):
    store.create_queue("dlq")
    store.create_queue("q", dead_letter="dlq")
    with pytest.raises(QueueInUse):
        store.delete_queue("dlq")
    assert store.get_queue("dlq") is not None


def test_queue_stats_counts_per_state(store):
    store.create_queue("q")
    ids = store.send_many("q", [{"data": i} for i in range(5)])
    jobs = store.fetch("q", batch_size=3)
    store.complete("q", jobs[0])
    store.fail("q", jobs[1])
    store.cancel("q", ids[4])
    stats = store.queue_stats("q")
    assert stats.counts["created"] == 1
    assert stats.counts["retry"] == 1
    assert stats.counts["active"] == 1
    assert stats.counts["completed"] == 1
    assert stats.counts["cancelled"] == 1
    assert stats.counts["failed"] == 0
    assert stats.queued == 2 and stats.total == 5
    assert stats.oldest_queued_age is not None


def test_queue_stats_unknown_queue_raises(store):
    with pytest.raises(QueueNotFound):
        store.queue_stats("nope")
