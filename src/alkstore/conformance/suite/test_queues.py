"""Queues: create, read, update, delete, and their errors (spec §1, §5, §10)."""

from __future__ import annotations

import pytest

from alkstore import InvalidOptions, QueueExists, QueueInUse, QueueNotFound, QueueOptionsDiffer
from alkstore.core.options import Policy


def test_create_and_get_queue_with_defaults(alkstore_store):
    alkstore_store.create_queue("email")
    queue = alkstore_store.get_queue("email")
    assert queue is not None
    assert queue.name == "email"
    o = queue.options
    assert (o.retry_limit, o.retry_delay, o.retry_backoff, o.retry_delay_max) == (2, 0, False, None)
    assert (o.expire_seconds, o.heartbeat_seconds) == (900, None)
    assert (o.retention_seconds, o.deletion_seconds) == (14 * 86400, 7 * 86400)
    assert queue.policy is Policy.STANDARD
    assert queue.dead_letter is None


def test_create_queue_with_options_round_trips(alkstore_store):
    alkstore_store.create_queue("dlq")
    alkstore_store.create_queue(
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
    o = alkstore_store.get_queue("work").options
    assert o.retry_limit == 5 and o.retry_delay == 3 and o.retry_backoff is True
    assert o.retry_delay_max == 60 and o.expire_seconds == 30 and o.heartbeat_seconds == 20
    assert o.retention_seconds == 100 and o.deletion_seconds == 0 and o.dead_letter == "dlq"


def test_queues_lists_by_name(alkstore_store):
    for name in ("b", "a", "c.d/e-f_g"):
        alkstore_store.create_queue(name)
    assert [q.name for q in alkstore_store.queues()] == ["a", "b", "c.d/e-f_g"]


def test_get_unknown_queue_is_none(alkstore_store):
    assert alkstore_store.get_queue("nope") is None


def test_duplicate_queue_raises_queue_exists(alkstore_store):
    alkstore_store.create_queue("q")
    with pytest.raises(QueueExists):
        alkstore_store.create_queue("q", retry_limit=9)
    assert alkstore_store.get_queue("q").options.retry_limit == 2


def test_create_queue_exist_ok_creates_then_accepts_the_same_queue(alkstore_store):
    alkstore_store.create_queue("q", exist_ok=True, retry_limit=3, retry_backoff=True)
    created = alkstore_store.get_queue("q")
    assert created.options.retry_limit == 3 and created.options.retry_backoff is True
    job_id = alkstore_store.send("q", 1)
    alkstore_store.create_queue("q", exist_ok=True, retry_limit=3, retry_backoff=True)
    assert alkstore_store.get_queue("q") == created
    assert [j.id for j in alkstore_store.fetch("q")] == [job_id]


def test_create_queue_exist_ok_names_the_options_that_differ(alkstore_store):
    alkstore_store.create_queue("q", retry_limit=3, retry_backoff=True)
    with pytest.raises(QueueOptionsDiffer) as err:
        alkstore_store.create_queue("q", exist_ok=True, retry_limit=5)
    assert isinstance(err.value, QueueExists)
    assert err.value.differences == {"retry_limit": (3, 5), "retry_backoff": (True, False)}
    assert "retry_limit: existing 3, requested 5" in str(err.value)
    assert "retry_backoff: existing True, requested False" in str(err.value)
    assert alkstore_store.get_queue("q").options.retry_limit == 3


def test_create_queue_exist_ok_still_refuses_bad_options(alkstore_store):
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.create_queue("q", exist_ok=True, retry_limit=-1)
    assert err.value.field == "retry_limit"
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.create_queue("q", exist_ok=True, retires=3)
    assert "retires" in str(err.value)


def test_dead_letter_must_exist(alkstore_store):
    with pytest.raises(QueueNotFound) as err:
        alkstore_store.create_queue("q", dead_letter="missing")
    assert "missing" in str(err.value) and "dead_letter" in str(err.value)
    assert alkstore_store.queues() == []


def test_dead_letter_may_not_be_itself(alkstore_store):
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.create_queue("q", dead_letter="q")
    assert err.value.field == "dead_letter"
    assert alkstore_store.queues() == []


@pytest.mark.parametrize(
    "name", ["", "-leading", "_x", "has space", "semi;colon", "quote'", "x" * 101, 42, None]
)
def test_invalid_queue_names_are_refused(alkstore_store, name):
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.create_queue(name)
    assert err.value.field == "queue" and err.value.value == name
    assert alkstore_store.queues() == []


def test_update_queue_changes_settings(alkstore_store):
    alkstore_store.create_queue("dlq")
    alkstore_store.create_queue("q")
    updated = alkstore_store.update_queue("q", retry_limit=7, dead_letter="dlq")
    assert updated.options.retry_limit == 7 and updated.dead_letter == "dlq"
    assert alkstore_store.get_queue("q").options.retry_limit == 7
    assert updated.updated_on >= updated.created_on


def test_update_queue_refuses_policy_and_partition(alkstore_store):
    alkstore_store.create_queue("q")
    for field, value in (("policy", "short"), ("partition", True)):
        with pytest.raises(InvalidOptions) as err:
            alkstore_store.update_queue("q", **{field: value})
        assert err.value.field == field


def test_update_queue_checks_dead_letter(alkstore_store):
    alkstore_store.create_queue("q")
    with pytest.raises(QueueNotFound):
        alkstore_store.update_queue("q", dead_letter="missing")
    with pytest.raises(InvalidOptions):
        alkstore_store.update_queue("q", dead_letter="q")
    assert alkstore_store.get_queue("q").dead_letter is None


def test_update_unknown_queue_raises(alkstore_store):
    with pytest.raises(QueueNotFound):
        alkstore_store.update_queue("nope", retry_limit=1)


def test_update_queue_bad_value_writes_nothing(alkstore_store):
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.update_queue("q", retry_limit=-1)
    assert (err.value.field, err.value.value) == ("retry_limit", -1)
    assert alkstore_store.get_queue("q").options.retry_limit == 2


def test_delete_queue_removes_it_and_its_jobs(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.create_queue("other")
    alkstore_store.send("q", {"n": 1})
    keep = alkstore_store.send("other", {"n": 2})
    alkstore_store.delete_queue("q")
    assert alkstore_store.get_queue("q") is None
    assert alkstore_store.job_count() == 1
    assert alkstore_store.get_job("other", keep) is not None


def test_delete_unknown_queue_raises(alkstore_store):
    with pytest.raises(QueueNotFound):
        alkstore_store.delete_queue("nope")


def test_delete_queue_used_as_dead_letter_is_refused(alkstore_store):
    alkstore_store.create_queue("dlq")
    alkstore_store.create_queue("q", dead_letter="dlq")
    with pytest.raises(QueueInUse):
        alkstore_store.delete_queue("dlq")
    assert alkstore_store.get_queue("dlq") is not None


def test_queue_stats_counts_per_state(alkstore_store):
    alkstore_store.create_queue("q")
    ids = alkstore_store.send_many("q", [{"data": i} for i in range(5)])
    jobs = alkstore_store.fetch("q", batch_size=3)
    alkstore_store.complete("q", jobs[0])
    alkstore_store.fail("q", jobs[1])
    alkstore_store.cancel("q", ids[4])
    stats = alkstore_store.queue_stats("q")
    assert stats.counts["created"] == 1
    assert stats.counts["retry"] == 1
    assert stats.counts["active"] == 1
    assert stats.counts["completed"] == 1
    assert stats.counts["cancelled"] == 1
    assert stats.counts["failed"] == 0
    assert stats.queued == 2 and stats.total == 5
    assert stats.oldest_queued_age is not None


def test_queue_stats_unknown_queue_raises(alkstore_store):
    with pytest.raises(QueueNotFound):
        alkstore_store.queue_stats("nope")
