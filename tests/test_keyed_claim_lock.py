"""The keyed claim and the queue row's lock, on a real PostgreSQL (docs/queues.md).

A keyed queue with a concurrency limit is claimed under the queue row's lock: a fetch that
finds the row locked by another claim returns at once when nothing is claimable, and waits
for the lock when something is. A keyed queue without limits is claimed without that lock;
a claim that loses a key to a concurrent claim runs again instead of failing.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore.engines.postgres.identifiers import quote_schema

LOCK_WAITS = """SELECT count(*) FROM pg_stat_activity
    WHERE wait_event_type = 'Lock' AND datname = current_database()"""

KEYED = pytest.mark.parametrize("policy", ["singleton", "key_strict_fifo"])
LIMITED = 50
"""A concurrency limit that never binds in these tests, but puts the queue on the locked
claim."""


def _wait_for_a_lock_wait(conn: psycopg.Connection[Any], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while conn.execute(LOCK_WAITS).fetchone()[0] == 0:  # type: ignore[index]
        assert time.monotonic() < deadline, "the fetch never waited for the lock"
        time.sleep(0.01)  # polling interval; the condition above is what synchronises


def _lock_queue_row(conn: psycopg.Connection[Any], schema: str) -> None:
    """Hold the queue row's lock the way a keyed claim does, until ``conn`` ends its
    transaction."""
    conn.execute(f"SELECT 1 FROM {quote_schema(schema)}.queue WHERE name = 'q' FOR UPDATE")


def _fetch_in_thread(store: alkstore.Store, result: dict[str, Any]) -> threading.Thread:
    thread = threading.Thread(target=lambda: result.update(jobs=store.fetch("q", batch_size=10)))
    thread.start()
    return thread


def _fetch_while_the_row_is_locked(store: alkstore.Store, dsn: str, schema: str) -> list[Any]:
    """What a fetch returns while another session holds the queue row's lock; it must
    return while the lock is still held."""
    result: dict[str, Any] = {}
    with psycopg.connect(dsn) as locker:
        _lock_queue_row(locker, schema)
        fetcher = _fetch_in_thread(store, result)
        fetcher.join(timeout=30)
        assert not fetcher.is_alive()  # the lock is still held: the fetch did not wait
        locker.rollback()
    jobs: list[Any] = result["jobs"]
    return jobs


def _one_busy_key_and_one_free(store: alkstore.Store) -> tuple[Any, Any]:
    """Key "a" with an active job and one queued behind it, key "b" with a queued job."""
    busy = store.send("q", "busy", singleton_key="a")
    free = store.send("q", "free", singleton_key="b")
    store.send("q", "behind busy", singleton_key="a")
    (first,) = store.fetch("q")
    assert first.id == busy
    return busy, free


@KEYED
def test_a_keyed_fetch_with_nothing_claimable_returns_without_waiting(pg_dsn, schema_name, policy):
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q", policy=policy, concurrency_limit=LIMITED)
        store.send("q", "first", singleton_key="a")
        (active,) = store.fetch("q")
        behind = store.send("q", "second", singleton_key="a")
        assert _fetch_while_the_row_is_locked(store, pg_dsn, schema_name) == []
        store.complete("q", active)
        assert [j.id for j in store.fetch("q")] == [behind]


@KEYED
def test_a_keyed_fetch_waits_for_the_lock_when_a_job_is_claimable(pg_dsn, schema_name, policy):
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q", policy=policy, concurrency_limit=LIMITED)
        _busy, free = _one_busy_key_and_one_free(store)
        result: dict[str, Any] = {}
        with (
            psycopg.connect(pg_dsn) as locker,
            psycopg.connect(pg_dsn, autocommit=True) as watcher,
        ):
            _lock_queue_row(locker, schema_name)
            fetcher = _fetch_in_thread(store, result)
            _wait_for_a_lock_wait(watcher)
            assert fetcher.is_alive()
            locker.commit()
            fetcher.join(timeout=30)
        assert not fetcher.is_alive()
        # One job per key, and key "a" still has its active job.
        assert [j.id for j in result["jobs"]] == [free]


@KEYED
def test_an_unlimited_keyed_fetch_does_not_wait_for_the_queue_row(pg_dsn, schema_name, policy):
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q", policy=policy)
        _busy, free = _one_busy_key_and_one_free(store)
        # The claim never asks for the row's lock.
        jobs = _fetch_while_the_row_is_locked(store, pg_dsn, schema_name)
        assert [j.id for j in jobs] == [free]


ACTIVE_OF_KEY_A = """SELECT id FROM {s}.job WHERE name = 'q' AND state = 'active'
    AND singleton_key = 'a'"""


def test_a_claim_that_loses_a_key_to_a_concurrent_claim_runs_again(pg_dsn, schema_name):
    # A claim of key "a" is in flight (not committed); a newer job of higher priority makes
    # another head of "a" in the next fetcher's snapshot. That fetcher's claim waits on the
    # unique index of active jobs and fails when the first one commits: it must run again
    # (then "a" is busy) and return the other key's job, not raise.
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q", policy="singleton")
        a1 = store.send("q", "a1", singleton_key="a")
        b1 = store.send("q", "b1", singleton_key="b")
        result: dict[str, Any] = {}
        with (
            psycopg.connect(pg_dsn) as caller,
            psycopg.connect(pg_dsn, autocommit=True) as watcher,
        ):
            caller.execute("SELECT 1")  # opens the caller's transaction
            (in_flight,) = store.using(caller).fetch("q", batch_size=1)
            assert in_flight.id == a1
            store.send("q", "a0", singleton_key="a", priority=10)
            fetcher = _fetch_in_thread(store, result)
            _wait_for_a_lock_wait(watcher)
            caller.commit()
            fetcher.join(timeout=30)
            assert not fetcher.is_alive()
            assert [j.id for j in result["jobs"]] == [b1]
            active = watcher.execute(ACTIVE_OF_KEY_A.format(s=quote_schema(schema_name)))
            assert [r[0] for r in active.fetchall()] == [a1]
