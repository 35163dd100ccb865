"""Listing a queue's jobs: ``list_jobs`` with a state filter, a limit and keyset pages."""

from __future__ import annotations

import pytest

from alkstore import InvalidOptions, JobState, QueueNotFound


def test_list_jobs_pages_in_id_order_with_a_state_filter(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.create_queue("other")
    ids = alkstore_store.send_many("q", [{"data": i} for i in range(5)])
    alkstore_store.send("other", "x")
    (active,) = alkstore_store.fetch("q")
    alkstore_store.cancel("q", [ids[4]])
    listed = alkstore_store.list_jobs("q")
    assert sorted(j.id for j in listed) == sorted(ids)
    assert [j.id for j in listed] == sorted(j.id for j in listed)
    assert all(j.queue == "q" for j in listed)
    queued = alkstore_store.list_jobs("q", states=["created", JobState.RETRY])
    assert {j.id for j in queued} == set(ids) - {active.id, ids[4]}
    assert [j.id for j in alkstore_store.list_jobs("q", states=["active"])] == [active.id]
    both = alkstore_store.list_jobs("q", states=[JobState.ACTIVE, JobState.CANCELLED])
    assert {j.state for j in both} == {JobState.ACTIVE, JobState.CANCELLED}
    # Keyset pages: each starts after the last id of the previous one.
    first = alkstore_store.list_jobs("q", limit=2)
    second = alkstore_store.list_jobs("q", limit=2, after=first[-1].id)
    third = alkstore_store.list_jobs("q", limit=2, after=second[-1])
    assert [j.id for j in first + second + third] == [j.id for j in listed]
    assert len(third) == 1
    assert alkstore_store.list_jobs("q", after=third[-1].id) == []


def test_list_jobs_of_an_unknown_queue_or_state_is_refused(alkstore_store):
    with pytest.raises(QueueNotFound):
        alkstore_store.list_jobs("nope")
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.list_jobs("q", states=["done"])
    assert err.value.field == "states"
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.list_jobs("q", limit=0)
    assert err.value.field == "limit"
