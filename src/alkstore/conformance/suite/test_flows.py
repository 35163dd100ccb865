"""Flows (issue 12, item 5): jobs that wait for other jobs, across queues."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from alkstore import FlowRefused, InvalidOptions, JobConflict, JobState, QueueNotFound

from .conftest import eventually
from .workers import work

LATEST = dt.datetime.max.replace(tzinfo=dt.UTC)


def _queues(alkstore_store: Any, *names: str, **options: Any) -> None:
    for name in names:
        alkstore_store.create_queue(name, **options)


def _fetch_ids(alkstore_store: Any, queue: str, n: int = 10) -> list[Any]:
    return [j.id for j in alkstore_store.fetch(queue, batch_size=n)]


def _chain(alkstore_store: Any) -> dict[str, Any]:
    """Queue ``q`` with the flow a -> b -> c in it."""
    _queues(alkstore_store, "q")
    ids: dict[str, Any] = alkstore_store.flow(
        [
            {"ref": "a", "queue": "q", "data": 1},
            {"ref": "b", "queue": "q", "data": 2, "depends_on": ["a"]},
            {"ref": "c", "queue": "q", "data": 3, "depends_on": ["b"]},
        ]
    )
    return ids


def test_a_child_waits_until_its_parent_completed(alkstore_store):
    _queues(alkstore_store, "q", "q2")
    ids = alkstore_store.flow(
        [
            {"ref": "a", "queue": "q", "data": {"step": "a"}},
            {"ref": "b", "queue": "q2", "data": {"step": "b"}, "depends_on": ["a"], "priority": 3},
        ]
    )
    assert set(ids) == {"a", "b"}
    child = alkstore_store.get_job("q2", ids["b"])
    assert child.state is JobState.CREATED and child.priority == 3
    assert child.start_after == LATEST and child.keep_until == LATEST
    assert alkstore_store.fetch("q2") == []
    (parent,) = alkstore_store.fetch("q")
    assert parent.id == ids["a"]
    assert alkstore_store.fetch("q2") == []
    assert alkstore_store.complete("q", parent, {"done": True}) == 1
    released = alkstore_store.get_job("q2", ids["b"])
    assert released.start_after < LATEST
    assert released.keep_until - released.start_after == dt.timedelta(
        seconds=released.retention_seconds
    )
    (child_job,) = alkstore_store.fetch("q2")
    assert child_job.id == ids["b"] and child_job.data == {"step": "b"}


def test_a_child_waits_for_all_its_parents(alkstore_store):
    _queues(alkstore_store, "q", "q2")
    ids = alkstore_store.flow(
        [
            {"ref": "a", "queue": "q", "data": 1},
            {"ref": "b", "queue": "q2", "data": 2},
            {"ref": "c", "queue": "q", "data": 3, "depends_on": ["a", "b"]},
        ]
    )
    assert _fetch_ids(alkstore_store, "q") == [ids["a"]]
    assert alkstore_store.complete("q", ids["a"]) == 1
    assert alkstore_store.fetch("q") == []
    assert _fetch_ids(alkstore_store, "q2") == [ids["b"]]
    assert alkstore_store.complete("q2", ids["b"]) == 1
    assert _fetch_ids(alkstore_store, "q") == [ids["c"]]


def test_one_completion_of_several_parents_releases_the_child(alkstore_store):
    _queues(alkstore_store, "q")
    ids = alkstore_store.flow(
        [
            {"ref": "a", "queue": "q", "data": 1},
            {"ref": "b", "queue": "q", "data": 2},
            {"ref": "c", "queue": "q", "data": 3, "depends_on": ["a", "b"]},
        ]
    )
    parents = alkstore_store.fetch("q", batch_size=5)
    assert {j.id for j in parents} == {ids["a"], ids["b"]}
    assert alkstore_store.complete("q", parents) == 2
    assert _fetch_ids(alkstore_store, "q") == [ids["c"]]


def test_complete_and_fetch_releases_children(alkstore_store):
    ids = _chain(alkstore_store)
    other = alkstore_store.send("q", {"plain": True})
    (a,) = alkstore_store.fetch("q")
    handoff = alkstore_store.complete_and_fetch("q", a)
    assert handoff.completed == 1
    # As a fetch after the completion would: the child released by it comes first (it was
    # created before the other job), although one statement's claim could not see it.
    assert [j.id for j in handoff.jobs] == [ids["b"]]
    assert alkstore_store.get_job("q", ids["c"]).start_after == LATEST
    assert _fetch_ids(alkstore_store, "q") == [other]


def test_a_waiting_child_completed_with_its_parent_stays_finished(alkstore_store):
    ids = _chain(alkstore_store)
    both = [ids["a"], ids["b"]]
    assert alkstore_store.complete("q", both, include_queued=True) == 2
    child = alkstore_store.get_job("q", ids["b"])
    # Completed while it waited: finished, not released (its start stays the waiting one).
    assert child.state is JobState.COMPLETED and child.start_after == LATEST
    assert _fetch_ids(alkstore_store, "q") == [ids["c"]]


def test_a_waiting_child_completed_before_its_parent_is_never_released(alkstore_store):
    ids = _chain(alkstore_store)
    assert alkstore_store.complete("q", ids["b"], include_queued=True) == 1
    assert alkstore_store.complete("q", ids["a"], include_queued=True) == 1
    # a's completion counted b down to no parent; b is finished, so neither that completion
    # nor maintenance releases it.
    assert alkstore_store.maintain().flows_released == 0
    child = alkstore_store.get_job("q", ids["b"])
    assert child.state is JobState.COMPLETED and child.start_after == LATEST
    assert _fetch_ids(alkstore_store, "q") == [ids["c"]]


def test_complete_include_queued_of_a_parent_releases_its_child(alkstore_store):
    _queues(alkstore_store, "q")
    ids = alkstore_store.flow(
        [
            {"ref": "a", "queue": "q", "data": 1, "start_after": 3600},
            {"ref": "b", "queue": "q", "data": 2, "depends_on": ["a"]},
        ]
    )
    assert alkstore_store.complete("q", ids["a"], include_queued=True) == 1
    assert _fetch_ids(alkstore_store, "q") == [ids["b"]]


@pytest.mark.parametrize("ending", ["fail", "cancel"])
def test_a_failed_or_cancelled_parent_leaves_the_child_waiting(alkstore_store, ending):
    _queues(alkstore_store, "q", retry_limit=0)
    ids = alkstore_store.flow(
        [
            {"ref": "a", "queue": "q", "data": 1},
            {"ref": "b", "queue": "q", "data": 2, "depends_on": ["a"]},
        ]
    )
    (a,) = alkstore_store.fetch("q")
    assert getattr(alkstore_store, ending)("q", a) == 1
    alkstore_store.advance(3600)
    alkstore_store.maintain()
    assert alkstore_store.fetch("q") == []
    child = alkstore_store.get_job("q", ids["b"])
    assert child.state is JobState.CREATED and child.start_after == LATEST
    assert [j.id for j in alkstore_store.find_jobs("q", queued=True)] == [ids["b"]]
    # Retried (or resumed) and completed, the parent releases it after all.
    if ending == "fail":
        alkstore_store.retry("q", ids["a"])
    else:
        alkstore_store.resume("q", ids["a"])
    (again,) = alkstore_store.fetch("q")
    assert again.id == ids["a"]
    alkstore_store.complete("q", again)
    assert _fetch_ids(alkstore_store, "q") == [ids["b"]]


def test_a_waiting_child_keeps_its_start_delay_for_after_the_release(alkstore_store):
    _queues(alkstore_store, "q")
    ids = alkstore_store.flow(
        [
            {"ref": "a", "queue": "q", "data": 1},
            {"ref": "b", "queue": "q", "data": 2, "depends_on": ["a"], "start_after": 600},
        ]
    )
    alkstore_store.advance(1200)  # the delay counts from the release, not from the send
    (a,) = alkstore_store.fetch("q")
    alkstore_store.complete("q", a)
    assert alkstore_store.fetch("q") == []
    alkstore_store.advance(601)
    assert _fetch_ids(alkstore_store, "q") == [ids["b"]]


def test_dependencies_and_dependents_are_visible(alkstore_store):
    _queues(alkstore_store, "q", "q2")
    ids = alkstore_store.flow(
        [
            {"ref": "a", "queue": "q", "data": 1},
            {"ref": "b", "queue": "q2", "data": 2},
            {"ref": "c", "queue": "q2", "data": 3, "depends_on": ["a", "b"]},
            {"ref": "d", "queue": "q", "data": 4, "depends_on": ["c"]},
        ]
    )
    parents = alkstore_store.get_dependencies("q2", ids["c"])
    assert {(j.queue, j.id) for j in parents} == {("q", ids["a"]), ("q2", ids["b"])}
    assert [j.id for j in alkstore_store.get_dependents("q", ids["a"])] == [ids["c"]]
    assert [j.id for j in alkstore_store.get_dependents("q2", ids["c"])] == [ids["d"]]
    assert alkstore_store.get_dependencies("q", ids["a"]) == []
    assert alkstore_store.get_dependents("q", ids["d"]) == []
    with pytest.raises(QueueNotFound):
        alkstore_store.get_dependencies("nowhere", ids["a"])


def test_a_flow_is_all_or_nothing(alkstore_store):
    _queues(alkstore_store, "q")
    with pytest.raises(QueueNotFound):
        alkstore_store.flow(
            [
                {"ref": "a", "queue": "q", "data": 1},
                {"ref": "b", "queue": "missing", "data": 2, "depends_on": ["a"]},
            ]
        )
    existing = alkstore_store.send("q", 0)
    with pytest.raises(JobConflict):
        alkstore_store.flow(
            [
                {"ref": "a", "queue": "q", "data": 1},
                {"ref": "b", "queue": "q", "data": 2, "id": existing, "depends_on": ["a"]},
            ]
        )
    assert [j.id for j in alkstore_store.find_jobs("q")] == [existing]


@pytest.mark.parametrize(
    ("steps", "field", "text"),
    [
        ([], "steps", "non-empty"),
        ("abc", "steps", "non-empty"),
        ([{"queue": "q"}], "steps[0].ref", "non-empty"),
        ([{"ref": "a", "queue": "bad name!"}], "steps[0].queue", ""),
        ([{"ref": "a", "queue": "q"}, {"ref": "a", "queue": "q"}], "steps[1].ref", "twice"),
        ([{"ref": "a", "queue": "q", "depends_on": ["zz"]}], "steps[0].depends_on", "no ref"),
        ([{"ref": "a", "queue": "q", "depends_on": "b"}], "steps[0].depends_on", "list"),
        ([{"ref": "a", "queue": "q", "depends_on": ["a"]}], "steps[0].depends_on", "itself"),
        ([{"ref": "a", "queue": "q", "retry_limit": -1}], "retry_limit", ""),
        ([{"ref": "a", "queue": "q", "bogus": 1}], "bogus", "unknown"),
    ],
)
def test_bad_flows_are_refused_before_anything_is_written(alkstore_store, steps, field, text):
    _queues(alkstore_store, "q")
    with pytest.raises(InvalidOptions) as caught:
        alkstore_store.flow(steps)
    assert caught.value.field == field and text in str(caught.value)
    assert alkstore_store.find_jobs("q") == []


def test_a_cycle_is_refused_naming_its_refs(alkstore_store):
    _queues(alkstore_store, "q")
    with pytest.raises(InvalidOptions) as caught:
        alkstore_store.flow(
            [
                {"ref": "a", "queue": "q", "depends_on": ["c"]},
                {"ref": "b", "queue": "q", "depends_on": ["a"]},
                {"ref": "c", "queue": "q", "depends_on": ["b"]},
                {"ref": "d", "queue": "q"},
            ]
        )
    assert caught.value.field == "depends_on"
    assert "a -> c -> b -> a" in str(caught.value)
    assert alkstore_store.find_jobs("q") == []


def test_a_worker_completing_a_parent_releases_the_child(alkstore_store):
    _queues(alkstore_store, "q")
    ids = alkstore_store.flow(
        [
            {"ref": "a", "queue": "q", "data": "a"},
            {"ref": "b", "queue": "q", "data": "b", "depends_on": ["a"]},
            {"ref": "c", "queue": "q", "data": "c", "depends_on": ["b"]},
        ]
    )
    seen: list[str] = []
    with work(alkstore_store, "q", lambda job, ctx: seen.append(job.data), poll_interval=0.05):
        eventually(lambda: alkstore_store.get_job("q", ids["c"]).state is JobState.COMPLETED)
    assert seen == ["a", "b", "c"]


def test_a_flow_may_reuse_the_ids_of_deleted_flow_jobs(alkstore_store):
    _queues(alkstore_store, "q")
    first = alkstore_store.flow(
        [
            {"ref": "a", "queue": "q", "data": 1},
            {"ref": "b", "queue": "q", "data": 2, "depends_on": ["a"]},
        ]
    )
    assert alkstore_store.delete_jobs("q", list(first.values())) == 2
    again = alkstore_store.flow(
        [
            {"ref": "x", "queue": "q", "data": 3, "id": first["b"]},
            {"ref": "y", "queue": "q", "data": 4},
            {"ref": "z", "queue": "q", "data": 5, "id": first["a"], "depends_on": ["x", "y"]},
        ]
    )
    assert [j.id for j in alkstore_store.get_dependencies("q", first["a"])] == [
        j.id
        for j in sorted(
            (alkstore_store.get_job("q", again["x"]), alkstore_store.get_job("q", again["y"])),
            key=lambda j: (j.created_on, j.id),
        )
    ]
    assert alkstore_store.get_dependents("q", first["b"])[0].id == first["a"]
    assert alkstore_store.get_dependencies("q", first["b"]) == []  # the old edge b -> a is gone
    assert alkstore_store.get_dependents("q", first["a"]) == []
    ready = alkstore_store.fetch("q", batch_size=5)
    assert {j.id for j in ready} == {again["x"], again["y"]}
    alkstore_store.complete("q", ready[0])
    assert alkstore_store.fetch("q") == []
    alkstore_store.complete("q", ready[1])
    assert _fetch_ids(alkstore_store, "q") == [first["a"]]


def test_a_flow_step_a_policy_refuses_writes_nothing_of_the_flow(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.create_queue("short", policy="short")
    with pytest.raises(FlowRefused) as refused:
        alkstore_store.flow(
            [
                {"ref": "a", "queue": "q", "data": 1},
                {"ref": "b", "queue": "short", "data": 2, "singleton_key": "k"},
                {
                    "ref": "c",
                    "queue": "short",
                    "data": 3,
                    "singleton_key": "k",
                    "depends_on": ["a"],
                },
            ]
        )
    assert refused.value.refs == ["c"]
    assert alkstore_store.find_jobs("q") == alkstore_store.find_jobs("short") == []
