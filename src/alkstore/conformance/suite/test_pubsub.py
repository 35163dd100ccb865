"""Pub/sub: subscriptions, and publish sending to every subscribed queue in one statement."""

from __future__ import annotations

import pytest

from alkstore import InvalidOptions, QueueNotFound


def test_publish_sends_one_job_to_each_subscribed_queue(alkstore_store):
    for name in ("a", "b", "c", "other"):
        alkstore_store.create_queue(name, retry_limit=5)
    for name in ("c", "a", "b"):
        alkstore_store.subscribe("order.placed", name)
    alkstore_store.subscribe("order.placed", "a")  # again: no second subscription
    alkstore_store.subscribe("order.cancelled", "other")
    ids = alkstore_store.publish("order.placed", {"order": 42}, priority=2, retry_limit=1)
    assert len(ids) == 3
    for name, job_id in zip(("a", "b", "c"), ids, strict=True):
        (job,) = alkstore_store.fetch(name)
        assert job.id == job_id and job.data == {"order": 42}
        assert job.priority == 2 and job.retry_limit == 1
    assert alkstore_store.queue_stats("other").total == 0
    assert alkstore_store.publish("nobody.listens") == []


def test_unsubscribe_and_deleted_queues(alkstore_store):
    alkstore_store.create_queue("a")
    alkstore_store.create_queue("b")
    alkstore_store.subscribe("e", "a")
    alkstore_store.subscribe("e", "b")
    assert alkstore_store.unsubscribe("e", "a") is True
    assert alkstore_store.unsubscribe("e", "a") is False
    alkstore_store.delete_queue("b")
    assert alkstore_store.publish("e", 1) == []
    assert alkstore_store.queue_stats("a").total == 0


def test_subscribe_and_publish_check_their_arguments(alkstore_store):
    alkstore_store.create_queue("a")
    with pytest.raises(QueueNotFound):
        alkstore_store.subscribe("e", "nope")
    with pytest.raises(InvalidOptions, match="event"):
        alkstore_store.subscribe("", "a")
    with pytest.raises(InvalidOptions, match="id"):
        alkstore_store.publish("e", 1, id="0190b0a0-0000-7000-8000-000000000000")
    with pytest.raises(InvalidOptions, match="priority"):
        alkstore_store.publish("e", 1, priority="high")
