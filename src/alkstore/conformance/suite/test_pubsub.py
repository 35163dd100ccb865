"""Pub/sub: subscriptions, and publish sending to every subscribed queue in one statement."""

from __future__ import annotations

import pytest

from alkstore import InvalidOptions, QueueNotFound


def test_publish_sends_one_job_to_each_subscribed_queue(store):
    for name in ("a", "b", "c", "other"):
        store.create_queue(name, retry_limit=5)
    for name in ("c", "a", "b"):
        store.subscribe("order.placed", name)
    store.subscribe("order.placed", "a")  # again: no second subscription
    store.subscribe("order.cancelled", "other")
    ids = store.publish("order.placed", {"order": 42}, priority=2, retry_limit=1)
    assert len(ids) == 3
    for name, job_id in zip(("a", "b", "c"), ids, strict=True):
        (job,) = store.fetch(name)
        assert job.id == job_id and job.data == {"order": 42}
        assert job.priority == 2 and job.retry_limit == 1
    assert store.queue_stats("other").total == 0
    assert store.publish("nobody.listens") == []


def test_unsubscribe_and_deleted_queues(store):
    store.create_queue("a")
    store.create_queue("b")
    store.subscribe("e", "a")
    store.subscribe("e", "b")
    assert store.unsubscribe("e", "a") is True
    assert store.unsubscribe("e", "a") is False
    store.delete_queue("b")
    assert store.publish("e", 1) == []
    assert store.queue_stats("a").total == 0


def test_subscribe_and_publish_check_their_arguments(store):
    store.create_queue("a")
    with pytest.raises(QueueNotFound):
        store.subscribe("e", "nope")
    with pytest.raises(InvalidOptions, match="event"):
        store.subscribe("", "a")
    with pytest.raises(InvalidOptions, match="id"):
        store.publish("e", 1, id="0190b0a0-0000-7000-8000-000000000000")
    with pytest.raises(InvalidOptions, match="priority"):
        store.publish("e", 1, priority="high")
