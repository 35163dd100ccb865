"""Ten processes opening a store on an empty database at once: one installs, none fails."""

from __future__ import annotations

import multiprocessing
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

import alkstore
from alkstore.engines.postgres.schema import LATEST

PROCESSES = 10


def _open_store(dsn: str, engine: str, emulate: bool, barrier, results) -> None:
    barrier.wait(timeout=60)
    try:
        with alkstore.connect(dsn, engine=engine, emulate=emulate, pool_size=1) as store:
            results.put(("ok", store.schema_version()))
    except Exception as exc:  # reported to the parent, which fails the test
        results.put(("error", repr(exc)))


@pytest.fixture
def empty_database(pg_dsn):
    name = f"db_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    parts = urlsplit(pg_dsn)
    yield urlunsplit(parts._replace(path=f"/{name}"))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.mark.parametrize(
    ("engine", "emulate"),
    [("postgres", False), ("yugabytedb", True)],
    ids=["advisory-lock", "claim-row"],
)
def test_concurrent_first_connects_install_exactly_once(empty_database, engine, emulate):
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    workers = [
        ctx.Process(target=_open_store, args=(empty_database, engine, emulate, barrier, results))
        for _ in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    outcomes = [results.get(timeout=120) for _ in workers]
    for worker in workers:
        worker.join(timeout=30)
        assert worker.exitcode == 0
    assert outcomes == [("ok", LATEST)] * PROCESSES
    with psycopg.connect(empty_database) as conn:
        assert conn.execute("SELECT count(*) FROM alkstore.version").fetchone()[0] == 1
