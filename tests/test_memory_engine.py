"""The in-memory engine (``memory://``) beyond the conformance suite: its URIs, what it
refuses, and the backoff jitter it picks (docs/testing.md)."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

import alkstore
from alkstore import InvalidOptions, JobState, SchemaVersionError, UnsupportedByEngine
from alkstore.core.retry import retry_delay_bounds


def test_a_bare_memory_uri_is_a_database_of_its_own():
    with alkstore.connect("memory://") as one, alkstore.connect("memory://") as two:
        one.create_queue("q")
        assert [q.name for q in one.queues()] == ["q"]
        assert two.queues() == []


def test_a_named_database_is_shared_while_one_of_its_stores_is_open():
    with alkstore.connect("memory://shared") as producer:
        producer.create_queue("q")
        job_id = producer.send("q", {"n": 1})
        with alkstore.connect("memory://shared") as consumer:
            assert [j.id for j in consumer.fetch("q")] == [job_id]
        assert producer.get_job("q", job_id).state is JobState.ACTIVE
    with alkstore.connect("memory://shared") as later:
        assert later.queues() == [], "forgotten with its last store"


def test_schemas_of_one_database_are_apart():
    with (
        alkstore.connect("memory://schemas", schema="a") as a,
        alkstore.connect("memory://schemas", schema="b") as b,
    ):
        a.create_queue("q")
        assert b.get_queue("q") is None


def test_without_migrate_a_fresh_schema_is_not_installed():
    with alkstore.connect("memory://", migrate=False) as store:
        assert store.schema_version() is None
        with pytest.raises(SchemaVersionError, match="migrate=True"):
            store.create_queue("q")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("pool_size", 2),
        ("pooler", "pgbouncer"),
        ("statement_timeout", 5.0),
        ("listen_dsn", "postgresql://x/y"),
        ("driver", "psycopg"),
        ("engine", "postgres"),
        ("emulate", True),
    ],
)
def test_server_options_are_refused_by_name(option, value):
    with pytest.raises(InvalidOptions, match=option):
        alkstore.connect("memory://", **{option: value})
    with pytest.raises(InvalidOptions, match=option):
        alkstore.connect_async("memory://", **{option: value})


def test_the_memory_engine_runs_on_a_memory_uri_only():
    with pytest.raises(InvalidOptions, match="memory://"):
        alkstore.connect("postgresql://localhost/app", engine="memory")


def test_a_malformed_memory_uri_is_refused():
    with pytest.raises(InvalidOptions, match="memory://NAME"):
        alkstore.connect("memory://name/path")


def test_what_needs_a_server_is_refused_clearly():
    with alkstore.connect("memory://") as store:
        with pytest.raises(UnsupportedByEngine, match="caller_transactions"):
            store.using(object())
        with pytest.raises(UnsupportedByEngine, match="table_partitioning"):
            store.create_queue("big", partition=True)
        store.create_queue("q")
        with pytest.raises(InvalidOptions, match="transactional"):
            store.work("q", lambda job: None, transactional=True)


def test_a_backoff_retry_waits_a_delay_inside_the_documented_bounds():
    with alkstore.connect("memory://") as store:
        store.create_queue("q", retry_limit=50, retry_delay=10, retry_backoff=True)
        delays = set()
        job_id = store.send("q")
        for attempt in range(6):
            store.update_queue("q")  # a no-op change: the clock moves on
            (job,) = store.fetch("q", ignore_start_after=True)
            before = dt.datetime.now(dt.UTC)
            assert store.fail("q", job) == 1
            after = dt.datetime.now(dt.UTC)
            retried = store.get_job("q", job_id)
            low, high = retry_delay_bounds(
                retry_delay=10, retry_count=attempt, retry_backoff=True, retry_delay_max=None
            )
            assert before + dt.timedelta(seconds=low) <= retried.start_after
            assert retried.start_after <= after + dt.timedelta(seconds=high)
            delays.add((retried.start_after - before).total_seconds() // 1)
        assert len(delays) > 1, "a random jitter, not one fixed delay"


def test_the_async_face_shares_a_named_database_with_the_sync_face():
    async def produce() -> None:
        async with alkstore.connect_async("memory://faces") as store:
            await store.send("q", "from async")
            with alkstore.connect("memory://faces") as sync:
                assert [j.data for j in sync.fetch("q")] == ["from async"]

    with alkstore.connect("memory://faces") as keeper:
        keeper.create_queue("q")
        asyncio.run(produce())
        assert keeper.queue_stats("q").counts[JobState.ACTIVE] == 1


def test_a_plan_in_a_transaction_changes_nothing_when_it_raises():
    with alkstore.connect("memory://") as store:
        for name in ("a", "b"):
            store.create_queue(name)
            store.subscribe("e", name)
        # Queue a gets its job first; b refuses a job that dead-letters into b itself.
        with pytest.raises(InvalidOptions, match="dead_letter"):
            store.publish("e", 1, dead_letter="b")
        assert store.queue_stats("a").total == store.queue_stats("b").total == 0
