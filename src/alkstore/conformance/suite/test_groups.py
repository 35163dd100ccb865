"""Groups: ``fetch(..., group_concurrency=...)`` caps the active jobs of each group (spec §6)."""

from __future__ import annotations

import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from alkstore import InvalidOptions, JobState

from .conftest import eventually, make_queue
from .workers import work

PARTITIONS = [pytest.param(False, id="shared"), pytest.param(True, id="partition")]


def send_groups(store: Any, queue: str, groups: list[dict[str, Any]]) -> list[Any]:
    jobs = [{"data": i, **g} for i, g in enumerate(groups)]
    return list(store.send_many(queue, jobs))


@pytest.mark.parametrize("partition", PARTITIONS)
def test_group_concurrency_caps_each_group(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition)
    send_groups(alkstore_store, "q", [{"group_id": "a"}] * 3 + [{"group_id": "b"}] * 3 + [{}] * 2)
    first = alkstore_store.fetch("q", batch_size=20, group_concurrency=1)
    assert Counter(j.group_id for j in first) == {"a": 1, "b": 1, None: 2}
    assert alkstore_store.fetch("q", batch_size=20, group_concurrency=1) == []
    # A larger limit lets more of each group run; the active ones count.
    more = alkstore_store.fetch("q", batch_size=20, group_concurrency=2)
    assert Counter(j.group_id for j in more) == {"a": 1, "b": 1}
    # Without a limit the rest is fetched.
    assert len(alkstore_store.fetch("q", batch_size=20)) == 2


@pytest.mark.parametrize("partition", PARTITIONS)
def test_group_tiers_have_their_own_limits(alkstore_store, partition):
    make_queue(alkstore_store, "q", partition)
    send_groups(
        alkstore_store,
        "q",
        [{"group_id": "g", "group_tier": "gold"}] * 3
        + [{"group_id": "s", "group_tier": "std"}] * 3,
    )
    limits = {"default": 1, "tiers": {"gold": 2}}
    jobs = alkstore_store.fetch("q", batch_size=20, group_concurrency=limits)
    assert Counter(j.group_id for j in jobs) == {"g": 2, "s": 1}


@pytest.mark.requires("several_sessions")
def test_group_limit_holds_across_concurrent_fetchers(alkstore_store):
    alkstore_store.create_queue("q")
    send_groups(alkstore_store, "q", [{"group_id": str(i % 3)} for i in range(30)])
    others = [alkstore_store.sibling() for _ in range(3)]
    try:
        with ThreadPoolExecutor(4) as pool:
            batches = list(
                pool.map(
                    lambda s: s.fetch("q", batch_size=5, group_concurrency=2),
                    [alkstore_store, *others] * 2,
                )
            )
    finally:
        for other in others:
            other.close()
    counts = Counter(j.group_id for b in batches for j in b)
    assert counts == {"0": 2, "1": 2, "2": 2}


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (0, "group_concurrency"),
        (True, "group_concurrency"),
        ("2", "group_concurrency"),
        ({"default": 0}, "group_concurrency.default"),
        ({"tiers": {"gold": 0}}, "group_concurrency.tiers['gold']"),
        ({"tier": {"gold": 1}}, "group_concurrency"),
        ({}, "group_concurrency"),
    ],
)
def test_bad_group_concurrency_is_refused(alkstore_store, value, field):
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions) as err:
        alkstore_store.fetch("q", group_concurrency=value)
    assert err.value.field == field


def test_complete_and_fetch_keeps_the_group_limit(alkstore_store):
    alkstore_store.create_queue("q")
    send_groups(alkstore_store, "q", [{"group_id": "a"}] * 3)
    (first,) = alkstore_store.fetch("q", batch_size=5, group_concurrency=1)
    handoff = alkstore_store.complete_and_fetch("q", first, batch_size=5, group_concurrency=1)
    assert handoff.completed == 1
    assert [j.group_id for j in handoff.jobs] == ["a"]
    with pytest.raises(InvalidOptions):
        alkstore_store.complete_and_fetch("q", handoff.jobs, batch_size=5, group_concurrency=0)
    assert alkstore_store.queue_stats("q").counts["active"] == 1


def test_work_holds_the_group_limit_while_other_jobs_run(alkstore_store):
    alkstore_store.create_queue("q")
    grouped = send_groups(alkstore_store, "q", [{"group_id": "g"}] * 3)
    free = send_groups(alkstore_store, "q", [{}] * 2)
    release = threading.Event()

    def handler(job: Any, ctx: Any) -> None:
        if job.group_id == "g":
            release.wait(30)

    def states(ids: list[Any]) -> list[JobState]:
        return [alkstore_store.get_job("q", i).state for i in ids]

    worker = work(alkstore_store, "q", handler, concurrency=4, group_concurrency=1)
    with worker:
        eventually(lambda: states(free) == [JobState.COMPLETED] * 2)
        held = states(grouped)
        release.set()
        eventually(lambda: states(grouped) == [JobState.COMPLETED] * 3)
    assert sorted(held) == sorted([JobState.ACTIVE, JobState.CREATED, JobState.CREATED])


def test_work_refuses_a_bad_group_limit_before_it_starts(alkstore_store):
    alkstore_store.create_queue("q")
    with pytest.raises(InvalidOptions, match="group_concurrency"):
        work(alkstore_store, "q", lambda job, ctx: None, group_concurrency=0)
