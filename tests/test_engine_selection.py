"""Choosing the engine at construction: explicit, auto-detected, mismatched, emulated."""

from __future__ import annotations

import warnings

import pytest

import alkstore
from alkstore.core.description import ServerInfo
from alkstore.engines.detect import detect_plan, engine_for, server_info


def test_auto_detects_stock_postgresql(pg_dsn, schema_name):
    with alkstore.connect(pg_dsn, engine="auto", schema=schema_name) as store:
        assert store.engine.name == "postgres"


@pytest.mark.parametrize(
    ("version", "citus", "engine"),
    [
        ("PostgreSQL 16.2 on x86_64-pc-linux-gnu", False, "postgres"),
        ("CockroachDB CCL v25.2.1 (x86_64-pc-linux-gnu)", False, "cockroachdb"),
        ("PostgreSQL 15.2-YB-2.25.1.0-b0 on x86_64-pc-linux-gnu", False, "yugabytedb"),
        ("PostgreSQL 17.4 on x86_64-pc-linux-gnu", True, "citus"),
    ],
)
def test_detection_from_version_and_extensions(version, citus, engine):
    row = {"version": version, "server_version_num": "150002", "extensions": None}
    if citus:
        row["extensions"] = "plpgsql,citus"
    server = server_info([row])
    assert server.version_num == 150002
    assert engine_for(server) == engine


def test_detection_reads_the_server_version(pg_dsn, schema_name):
    with alkstore.connect(pg_dsn, engine="auto", schema=schema_name) as store:
        server = store._run(detect_plan())
    assert isinstance(server, ServerInfo)
    assert server.version_num >= 130000
    assert server.version.startswith("PostgreSQL")


def test_an_explicit_engine_that_does_not_match_the_server_warns(pg_dsn, schema_name):
    with pytest.warns(UserWarning, match="looks like 'postgres'"):
        store = alkstore.connect(pg_dsn, engine="yugabytedb", schema=schema_name)
    with store:
        assert store.engine.name == "yugabytedb"


def test_emulated_mode_does_not_warn_and_guards(pg_dsn, schema_name):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store = alkstore.connect(pg_dsn, engine="cockroachdb", emulate=True, schema=schema_name)
    with store:
        assert store.engine.emulated is True
        store.create_queue("q")
        store.send("q", 1)
        (job,) = store.fetch("q")
        assert job.priority == 0  # integers arrive as text and are coerced back
        with pytest.raises(alkstore.UnsupportedByEngine) as err:
            store.create_queue("p", partition=True)
        assert err.value.engine == "cockroachdb"


def test_emulation_needs_an_engine_with_a_profile(pg_dsn, schema_name):
    with pytest.raises(alkstore.InvalidOptions) as err:
        alkstore.connect(pg_dsn, engine="postgres", emulate=True, schema=schema_name)
    assert err.value.field == "emulate"


def test_sharded_citus_through_engine_options(pg_dsn, schema_name):
    store = alkstore.connect(
        pg_dsn,
        engine="citus",
        emulate=True,
        engine_options={"distributed": True},
        schema=schema_name,
    )
    with store:
        assert store.engine.name == "citus-distributed"
    with pytest.raises(alkstore.InvalidOptions) as err:
        alkstore.connect(pg_dsn, engine="citus", engine_options={"shards": 4}, schema=schema_name)
    assert err.value.field == "engine_options.shards"


def test_unknown_engine_is_refused(pg_dsn, schema_name):
    with pytest.raises(alkstore.InvalidOptions) as err:
        alkstore.connect(pg_dsn, engine="oracle", schema=schema_name)
    assert err.value.field == "engine"
