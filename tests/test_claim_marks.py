"""The claim's mark (engines/postgres/claim_marks.py): an engaged mark makes a claim walk from
where the last claim of its store left off, and a job another store puts before that mark is
still fetched, by the walk from the head one claim of each queue makes every REWALK_SECONDS; a
job of a higher priority is found by every claim, and the order within a priority is kept.
A mark engages by itself when the claims from the head take longer than those from the mark
(a held horizon), and disengages when they no longer do."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest

import alkstore
from alkstore.bench.scale import vacuum_analyze
from alkstore.conformance.harness import Backend, StoreHandle
from alkstore.engines.postgres.claim_marks import HEAD, REWALK_SECONDS, ClaimMarks, Key
from alkstore.engines.postgres.claim_switch import ENGAGE_FLOOR

KEY: Key = (0, HEAD[1], uuid.UUID(int=5))
"""A job's key somewhere in a queue."""


@pytest.fixture
def two_stores(pg_dsn: str, schema_name: str) -> Iterator[tuple[alkstore.Store, alkstore.Store]]:
    """Two stores on one schema: the one under test and another that claims, fails or
    sends beside it."""
    with (
        alkstore.connect(pg_dsn, schema=schema_name) as store,
        alkstore.connect(pg_dsn, schema=schema_name) as other,
    ):
        yield store, other


def engaged(store: alkstore.Store, queue: str = "q") -> alkstore.Store:
    """``store`` with the mark of ``queue`` engaged (its claims walk from the mark)."""
    store.engine.claim_marks.engage(queue)
    return store


def test_a_retry_behind_another_stores_mark_is_fetched_within_the_rewalk(
    two_stores: tuple[alkstore.Store, alkstore.Store],
) -> None:
    store, other = two_stores
    store.create_queue("q", retry_limit=1, retry_delay=0)
    first, second, third = store.send_many("q", [{"data": n} for n in (1, 2, 3)])
    (a,) = other.fetch("q")  # the other store claims the oldest job
    (b,) = engaged(store).fetch("q")  # this store's mark moves past it
    assert (a.id, b.id) == (first, second)
    other.fail("q", a, "again")  # a retry, before this store's mark, due now
    seen: list[uuid.UUID] = []
    deadline = time.monotonic() + REWALK_SECONDS + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        jobs = store.fetch("q")
        seen += [j.id for j in jobs]
        store.complete("q", jobs)
        if not jobs:
            time.sleep(0.05)
    assert sorted(seen) == sorted([first, third])


def test_a_higher_priority_job_is_fetched_by_every_claim(
    two_stores: tuple[alkstore.Store, alkstore.Store],
) -> None:
    store, other = two_stores
    store.create_queue("q")
    store.send_many("q", [{"data": n} for n in range(3)])
    assert [j.data for j in engaged(store).fetch("q")] == [0]  # the mark is at job 0
    urgent = other.send("q", "urgent", priority=5)  # sorts before the mark
    assert [j.id for j in store.fetch("q")] == [urgent]
    assert [j.data for j in store.fetch("q")] == [1]


def test_claims_from_a_mark_keep_the_order_within_each_priority(
    two_stores: tuple[alkstore.Store, alkstore.Store],
) -> None:
    store, other = two_stores
    store.create_queue("q")
    store.send_many("q", [{"data": ("low", n), "priority": -1} for n in range(4)])
    store.send_many("q", [{"data": ("mid", n)} for n in range(6)])
    (mid0,) = engaged(store).fetch("q")  # the mark is at the first job of priority 0
    assert mid0.data == ["mid", 0]
    other.send_many("q", [{"data": ("high", n), "priority": 3} for n in range(2)])
    fetched = [j.data for j in store.fetch("q", batch_size=3)]
    # the higher priority from its head, then the mark's priority from the mark on
    assert fetched == [["high", 0], ["high", 1], ["mid", 1]]
    fetched = [j.data for j in store.fetch("q", batch_size=7)]
    # the rest of the mark's priority, then the lower one from its head
    assert fetched == [["mid", n] for n in range(2, 6)] + [["low", n] for n in range(3)]
    assert [j.data for j in store.fetch("q", batch_size=7)] == [["low", 3]]


def test_an_engaged_mark_walks_from_the_head_once_a_period() -> None:
    marks = ClaimMarks(rewalk_seconds=3600)
    assert marks.start("q") == HEAD  # no mark yet
    marks.engage("q")
    marks.advance("q", HEAD, [], None)
    marks._marks["q"].key = KEY
    assert marks.start("q") == KEY
    marks.before("fail")  # a plan that can put a job before the mark
    assert marks.start("q") == HEAD
    assert marks.engaged("q")  # it walks from the head once, and stays engaged
    marks._marks["q"].key = KEY
    marks.before("send")
    assert marks.start("q") == KEY
    marks._marks["q"].due = 0
    assert marks.start("q") == HEAD


def test_a_mark_not_engaged_walks_from_the_mark_once_a_period() -> None:
    marks = ClaimMarks(probe_seconds=3600)
    assert marks.start("q") == HEAD
    marks._marks["q"].key = KEY
    assert marks.start("q") == HEAD  # not engaged: from the head
    marks._marks["q"].due = 0
    assert marks.start("q") == KEY  # the probe
    assert marks.start("q") == HEAD  # one a period


def test_a_mark_engages_when_the_head_is_slower_and_disengages_when_it_is_not() -> None:
    marks = ClaimMarks(rewalk_seconds=0, probe_seconds=0)
    slow, fast = 10 * ENGAGE_FLOOR, ENGAGE_FLOOR / 10
    assert marks.start("q") == HEAD
    for took in (fast, fast, slow, fast):  # a claim held up now and then: the median is fast
        marks.advance("q", HEAD, [], took)
    marks._marks["q"].key = KEY
    assert marks.start("q") == KEY  # the probe
    marks.advance("q", KEY, [], fast)
    assert not marks.engaged("q")
    for _ in range(3):  # the claims from the head slow down (a held horizon)
        marks.advance("q", HEAD, [], slow)
    assert marks.engaged("q")
    assert marks.start("q") == HEAD  # the walk from the head, due at once here
    marks.advance("q", HEAD, [], fast)
    assert marks.engaged("q")  # one fast walk does not move the median of the last ones
    for _ in range(2):
        marks.advance("q", HEAD, [], fast)
    assert not marks.engaged("q")


def test_a_slow_walk_from_the_head_puts_the_next_one_off() -> None:
    marks = ClaimMarks(rewalk_seconds=0.0, rewalk_share=1000)
    marks.engage("q")
    assert marks.start("q") == HEAD
    time.sleep(0.01)  # the walk from the head took 10 ms: the next is due in 10 s or more
    marks.advance("q", HEAD, [], None)
    marks._marks["q"].key = KEY
    assert marks.start("q") == KEY
    assert marks._marks["q"].due - time.monotonic() > 5


def test_a_job_the_maintenance_pass_expires_is_fetched_by_the_next_claim(
    alkstore_backend: Backend, schema_name: str
) -> None:
    store = StoreHandle(alkstore_backend, "psycopg", schema_name)
    try:
        store.create_queue("q", expire_seconds=60, retry_limit=1, retry_delay=0)
        first, second, third = store.send_many("q", [{"data": n} for n in range(3)])
        store.engine.claim_marks.engage("q")
        assert [j.id for j in store.fetch("q")] == [first]
        store.advance(61)  # the test hook: every claim walks from the head after it
        assert [j.id for j in store.fetch("q")] == [second]  # the mark: past the first
        assert store.maintain().expired == 1  # the first, before the mark, queued again
        assert [j.id for j in store.fetch("q", batch_size=2)] == [first, third]
    finally:
        store.close()


def test_a_held_horizon_engages_the_mark_and_its_release_disengages_it(
    pg_dsn: str, schema_name: str
) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        marks = store.engine.claim_marks = ClaimMarks(rewalk_seconds=0, probe_seconds=0.05)
        store.create_queue("q")
        with psycopg.connect(pg_dsn) as holder:
            holder.execute("SELECT txid_current()")  # pins the horizon until closed
            # Every claimed job's entry stays in the claim's index, with its heap version.
            deadline = time.monotonic() + 60
            while not marks.engaged("q") and time.monotonic() < deadline:
                store.send_many("q", [{"data": n} for n in range(1000)])
                while jobs := store.fetch("q", batch_size=100):
                    store.complete("q", jobs)
            assert marks.engaged("q")
        vacuum_analyze(pg_dsn, schema_name)  # the dead versions go
        deadline = time.monotonic() + 60
        sent = 0
        while marks.engaged("q") and time.monotonic() < deadline:
            store.send_many("q", [{"data": n} for n in range(sent, sent + 100)])
            jobs = store.fetch("q", batch_size=100)
            assert [j.data for j in jobs] == list(range(sent, sent + 100))  # in order, all
            store.complete("q", jobs)
            sent += 100
        assert not marks.engaged("q")
