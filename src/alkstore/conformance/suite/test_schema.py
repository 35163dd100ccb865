"""Schema installation, versioning and per-queue partitions (spec §8, issue: foundation)."""

from __future__ import annotations

import pytest

from alkstore import JobState, SchemaVersionError, UnsupportedByEngine


def test_schema_is_installed_at_the_latest_version(store):
    latest = store.schema_version()
    assert isinstance(latest, int) and latest >= 1
    assert store.migrate() == latest
    assert store.schema_version() == latest
    assert store.version_records() == 1


@pytest.mark.requires("several_sessions")
def test_a_second_store_on_the_same_schema_reuses_it(store):
    store.create_queue("q")
    store.send("q", 1)
    other = store.sibling()
    try:
        assert other.queue_stats("q").queued == 1
    finally:
        other.close()


def test_migrating_a_database_newer_than_the_library_is_refused(store):
    newer = store.schema_version() + 1
    store.set_version(newer)
    with pytest.raises(SchemaVersionError) as err:
        store.migrate()
    assert str(newer) in str(err.value)
    assert store.schema_version() == newer


@pytest.mark.requires("several_sessions")
def test_connecting_to_a_database_newer_than_the_library_is_refused(store):
    newer = store.schema_version() + 1
    store.set_version(newer)
    with pytest.raises(SchemaVersionError) as err:
        store.sibling()
    assert str(newer) in str(err.value)


@pytest.mark.requires("table_partitioning", "plpgsql")
def test_partitioned_queue_gets_its_own_partition(store):
    store.create_queue("big", partition=True)
    store.create_queue("small")
    big = store.send_many("big", [{"data": i} for i in range(3)])
    store.send("small", 1)
    storage = store.job_storage()
    assert sorted(storage.values()) == [1, 3], storage
    assert store.get_queue("big").options.partition is True
    (job,) = store.fetch("big")
    assert job.id == big[0]
    assert store.complete("big", job) == 1
    store.delete_queue("big")
    (left,) = [name for name, n in storage.items() if n == 1]
    assert store.job_storage() == {left: 1}, "the queue's own storage is dropped with it"
    assert store.job_count() == 1


@pytest.mark.requires("table_partitioning", "plpgsql")
def test_fetch_claims_only_its_own_partition_s_rows(store):
    # The first row of each partition sits at the same place in its table (same ctid): a
    # claim that re-finds its rows by physical position must still stay in its own queue.
    store.create_queue("own", partition=True)
    store.create_queue("shared")
    own = store.send("own", "o")
    shared = store.send("shared", "s")
    (job,) = store.fetch("own", batch_size=5)
    assert job.id == own
    assert store.get_job("shared", shared).state is JobState.CREATED
    assert [j.id for j in store.fetch("shared", batch_size=5)] == [shared]
    assert store.get_job("own", own).state is JobState.ACTIVE
    done, more = store.complete_and_fetch("own", job, batch_size=5)
    assert (done, more) == (1, [])
    assert store.get_job("shared", shared).state is JobState.ACTIVE


def test_partition_option_follows_the_capability(store):
    caps = store.engine.capabilities
    if caps.table_partitioning and caps.plpgsql:
        store.create_queue("q", partition=True)
        assert store.get_queue("q").options.partition is True
        return
    with pytest.raises(UnsupportedByEngine) as err:
        store.create_queue("q", partition=True)
    assert err.value.capability in ("table_partitioning", "plpgsql")
    assert store.engine.name in str(err.value)
    assert store.queues() == []


def test_sharded_citus_spreads_the_job_table_over_every_worker(store):
    """On a real sharded Citus cluster the job table is distributed by queue name, the queue
    table is a reference table, and the queues' shards sit on every worker."""
    shard_layout = getattr(store.hooks, "shard_layout", None)
    if shard_layout is None or store.engine.emulated:
        pytest.skip("checks a real sharded Citus cluster: --engine citus-distributed on one")
    names = [f"q{i}" for i in range(16)]
    for name in names:
        store.create_queue(name)
        store.send(name, {"queue": name})
    layout = store.run_plan(shard_layout())
    assert layout.tables == {"job": ("distributed", "name"), "queue": ("reference", "<none>")}
    assert len(layout.workers) >= 2
    assert layout.placed == layout.workers
    for name in names:
        [job] = store.fetch(name)
        assert job.data == {"queue": name}
