"""Schema installation, versioning and per-queue partitions (spec §8, issue: foundation)."""

from __future__ import annotations

import pytest

from alkstore import JobState, SchemaVersionError, UnsupportedByEngine
from alkstore.engines.postgres.identifiers import partition_table
from alkstore.engines.postgres.schema import LATEST


def test_schema_is_installed_at_the_latest_version(store):
    assert store.schema_version() == LATEST
    assert store.migrate() == LATEST
    assert store.schema_version() == LATEST
    assert len(store.sql("SELECT version FROM {s}.version")) == 1


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
    store.sql("UPDATE {s}.version SET version = $1::int", LATEST + 1)
    with pytest.raises(SchemaVersionError) as err:
        store.migrate()
    assert str(LATEST + 1) in str(err.value)
    assert store.schema_version() == LATEST + 1


@pytest.mark.requires("several_sessions")
def test_connecting_to_a_database_newer_than_the_library_is_refused(store):
    store.sql("UPDATE {s}.version SET version = $1::int", LATEST + 1)
    with pytest.raises(SchemaVersionError) as err:
        store.sibling()
    assert str(LATEST + 1) in str(err.value)


@pytest.mark.requires("table_partitioning", "plpgsql")
def test_partitioned_queue_gets_its_own_partition(store):
    store.create_queue("big", partition=True)
    store.create_queue("small")
    big = store.send_many("big", [{"data": i} for i in range(3)])
    store.send("small", 1)
    table = partition_table("big")
    rows = store.sql(
        "SELECT tableoid::regclass::text AS part, count(*) AS n FROM {s}.job GROUP BY 1 ORDER BY 1"
    )
    parts = {r["part"].split(".")[-1].strip('"'): int(r["n"]) for r in rows}
    assert parts == {table: 3, "job_default": 1}
    assert store.get_queue("big").options.partition is True
    (job,) = store.fetch("big")
    assert job.id == big[0]
    assert store.complete("big", job) == 1
    store.delete_queue("big")
    gone = store.sql("SELECT to_regclass($1::text) IS NULL AS gone", f"{store.schema}.{table}")
    assert gone[0]["gone"] is True
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
    if store.backend.engine_name != "citus-distributed" or store.backend.emulate:
        pytest.skip("checks a real sharded Citus cluster: --engine citus-distributed on one")
    tables = store.sql(
        "SELECT table_name::text AS name, citus_table_type AS kind, "
        "distribution_column AS column FROM citus_tables "
        "WHERE table_name IN ('{s}.job'::regclass, '{s}.queue'::regclass) ORDER BY 1"
    )
    kinds = {row["name"].rsplit(".", 1)[1]: (row["kind"], row["column"]) for row in tables}
    assert kinds == {"job": ("distributed", "name"), "queue": ("reference", "<none>")}
    names = [f"q{i}" for i in range(16)]
    for name in names:
        store.create_queue(name)
        store.send(name, {"queue": name})
    workers = store.sql("SELECT node_name, node_port FROM citus_get_active_worker_nodes()")
    placed = store.sql(
        "SELECT DISTINCT cs.nodename AS node_name, cs.nodeport AS node_port FROM {s}.queue q "
        "JOIN citus_shards cs ON cs.shardid = "
        "get_shard_id_for_distribution_column('{s}.job'::regclass, q.name)"
    )
    assert len(workers) >= 2
    assert {(r["node_name"], r["node_port"]) for r in placed} == {
        (r["node_name"], r["node_port"]) for r in workers
    }
    for name in names:
        [job] = store.fetch(name)
        assert job.data == {"queue": name}
