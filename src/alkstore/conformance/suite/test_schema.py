"""Schema installation, versioning and per-queue partitions (spec §8, issue: foundation)."""

from __future__ import annotations

import pytest

from alkstore import JobState, SchemaVersionError, UnsupportedByEngine


def test_schema_is_installed_at_the_latest_version(alkstore_store):
    latest = alkstore_store.schema_version()
    assert isinstance(latest, int) and latest >= 1
    assert alkstore_store.migrate() == latest
    assert alkstore_store.schema_version() == latest
    assert alkstore_store.version_records() == 1


@pytest.mark.requires("several_sessions")
def test_a_second_store_on_the_same_schema_reuses_it(alkstore_store):
    alkstore_store.create_queue("q")
    alkstore_store.send("q", 1)
    other = alkstore_store.sibling()
    try:
        assert other.queue_stats("q").queued == 1
    finally:
        other.close()


def test_migrating_a_database_newer_than_the_library_is_refused(alkstore_store):
    newer = alkstore_store.schema_version() + 1
    alkstore_store.set_version(newer)
    with pytest.raises(SchemaVersionError) as err:
        alkstore_store.migrate()
    assert str(newer) in str(err.value)
    assert alkstore_store.schema_version() == newer


@pytest.mark.requires("several_sessions")
def test_connecting_to_a_database_newer_than_the_library_is_refused(alkstore_store):
    newer = alkstore_store.schema_version() + 1
    alkstore_store.set_version(newer)
    with pytest.raises(SchemaVersionError) as err:
        alkstore_store.sibling()
    assert str(newer) in str(err.value)


@pytest.mark.requires("table_partitioning", "plpgsql")
def test_partitioned_queue_gets_its_own_partition(alkstore_store):
    alkstore_store.create_queue("big", partition=True)
    alkstore_store.create_queue("small")
    big = alkstore_store.send_many("big", [{"data": i} for i in range(3)])
    alkstore_store.send("small", 1)
    storage = alkstore_store.job_storage()
    assert sorted(storage.values()) == [1, 3], storage
    assert alkstore_store.get_queue("big").options.partition is True
    (job,) = alkstore_store.fetch("big")
    assert job.id == big[0]
    assert alkstore_store.complete("big", job) == 1
    alkstore_store.delete_queue("big")
    (left,) = [name for name, n in storage.items() if n == 1]
    assert alkstore_store.job_storage() == {left: 1}, "the queue's own storage is dropped with it"
    assert alkstore_store.job_count() == 1


@pytest.mark.requires("table_partitioning", "plpgsql")
def test_fetch_claims_only_its_own_partition_s_rows(alkstore_store):
    # The first row of each partition sits at the same place in its table (same ctid): a
    # claim that re-finds its rows by physical position must still stay in its own queue.
    alkstore_store.create_queue("own", partition=True)
    alkstore_store.create_queue("shared")
    own = alkstore_store.send("own", "o")
    shared = alkstore_store.send("shared", "s")
    (job,) = alkstore_store.fetch("own", batch_size=5)
    assert job.id == own
    assert alkstore_store.get_job("shared", shared).state is JobState.CREATED
    assert [j.id for j in alkstore_store.fetch("shared", batch_size=5)] == [shared]
    assert alkstore_store.get_job("own", own).state is JobState.ACTIVE
    done, more = alkstore_store.complete_and_fetch("own", job, batch_size=5)
    assert (done, more) == (1, [])
    assert alkstore_store.get_job("shared", shared).state is JobState.ACTIVE


def test_partition_option_follows_the_capability(alkstore_store):
    caps = alkstore_store.engine.capabilities
    if caps.table_partitioning and caps.plpgsql:
        alkstore_store.create_queue("q", partition=True)
        assert alkstore_store.get_queue("q").options.partition is True
        return
    with pytest.raises(UnsupportedByEngine) as err:
        alkstore_store.create_queue("q", partition=True)
    assert err.value.capability in ("table_partitioning", "plpgsql")
    assert alkstore_store.engine.name in str(err.value)
    assert alkstore_store.queues() == []


def test_sharded_citus_spreads_the_job_table_over_every_worker(alkstore_store):
    """On a real sharded Citus cluster the job table is distributed by queue name, the queue
    table is a reference table, and the queues' shards sit on every worker."""
    shard_layout = getattr(alkstore_store.hooks, "shard_layout", None)
    if shard_layout is None or alkstore_store.engine.emulated:
        pytest.skip("checks a real sharded Citus cluster: --engine citus-distributed on one")
    names = [f"q{i}" for i in range(16)]
    for name in names:
        alkstore_store.create_queue(name)
        alkstore_store.send(name, {"queue": name})
    layout = alkstore_store.run_plan(shard_layout())
    assert layout.tables == {"job": ("distributed", "name"), "queue": ("reference", "<none>")}
    assert len(layout.workers) >= 2
    assert layout.placed == layout.workers
    for name in names:
        [job] = alkstore_store.fetch(name)
        assert job.data == {"queue": name}
