"""The gated claim on a real PostgreSQL (engines/postgres/claim_gate.py, docs/benchmarks.md
"Claim scaling"): a plain claim passes one of the queue's advisory-lock slots before it picks
rows, keeps the queue's order, and never hands a job out twice."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import attrs
import psycopg
import pytest

import alkstore
from alkstore.core.errors import InvalidOptions
from alkstore.engines.postgres import PostgresEngine
from alkstore.engines.postgres.claim_gate import GATE_SLOTS, configured, gate_key
from alkstore.engines.postgres.identifiers import quote_schema
from lock_waits import wait_for_a_lock_wait

GATE_ON = {"claim_gate": True}


def test_a_plain_fetch_waits_while_every_slot_of_the_gate_is_held(pg_dsn, schema_name):
    with alkstore.connect(pg_dsn, schema=schema_name, engine_options=GATE_ON) as store:
        store.create_queue("q")
        sent = store.send("q", "one")
        result: dict[str, Any] = {}
        with psycopg.connect(pg_dsn) as locker:
            for slot in range(GATE_SLOTS):
                locker.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)", (gate_key(schema_name, "q"), slot)
                )
            fetcher = threading.Thread(target=lambda: result.update(jobs=store.fetch("q")))
            fetcher.start()
            wait_for_a_lock_wait(locker, "the fetch", "advisory")
            assert fetcher.is_alive()
            locker.rollback()  # opens the gate
            fetcher.join(timeout=30)
        assert not fetcher.is_alive()
        assert [j.id for j in result["jobs"]] == [sent]


def test_without_the_option_a_fetch_does_not_wait_at_the_gate(pg_dsn, schema_name):
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q")
        sent = store.send("q", "one")
        with psycopg.connect(pg_dsn) as locker:
            for slot in range(GATE_SLOTS):
                locker.execute(
                    "SELECT pg_advisory_xact_lock(%s, %s)", (gate_key(schema_name, "q"), slot)
                )
            assert [j.id for j in store.fetch("q")] == [sent]


@pytest.mark.parametrize("value", ["yes", 1, None, "AUTO"])
def test_the_option_is_a_bool_or_auto(pg_dsn, schema_name, value):
    with pytest.raises(InvalidOptions, match=r"engine_options\.claim_gate.*must be a bool or"):
        alkstore.connect(pg_dsn, schema=schema_name, engine_options={"claim_gate": value})


@pytest.mark.parametrize("value", [True, "auto"])
def test_an_engine_that_cannot_gate_refuses_the_option(value):
    caps = PostgresEngine.description.capabilities_on(None)
    for lacking in ("advisory_locks", "plpgsql", "tuple_ids", "single_connection"):
        flipped = attrs.evolve(caps, **{lacking: not getattr(caps, lacking)})
        with pytest.raises(InvalidOptions, match=lacking):
            configured({"claim_gate": value}, "other", flipped)
        assert configured({}, "other", flipped) is False  # off: nothing to refuse
    assert configured({"claim_gate": value}, "postgres", caps) == value


def test_gated_claims_keep_the_order_within_a_priority(pg_dsn, schema_name):
    with alkstore.connect(pg_dsn, schema=schema_name, engine_options=GATE_ON) as store:
        store.create_queue("q")
        ids = store.send_many("q", [{"data": n, "priority": n % 3} for n in range(60)])
        expected = [i for p in (2, 1, 0) for n, i in enumerate(ids) if n % 3 == p]
        claimed: list[uuid.UUID] = []
        while batch := store.fetch("q", batch_size=7):
            claimed += [j.id for j in batch]
        assert claimed == expected


def test_concurrent_gated_claims_hand_every_job_out_once(pg_dsn, schema_name):
    fetchers, jobs = 12, 1500
    with alkstore.connect(
        pg_dsn, schema=schema_name, pool_size=fetchers, engine_options=GATE_ON
    ) as store:
        store.create_queue("q")
        sent = set(store.send_many("q", [{"data": n} for n in range(jobs)]))
        claimed: list[list[uuid.UUID]] = [[] for _ in range(fetchers)]
        completed = [0] * fetchers
        deadline = time.monotonic() + 120

        def drain(index: int) -> None:
            held: list[Any] = []  # jobs: a completion fenced by the attempt fetched
            while time.monotonic() < deadline:
                if held and index % 2:  # half the fetchers hand off through complete_and_fetch
                    done, batch = store.complete_and_fetch("q", held, batch_size=10)
                    completed[index] += done
                else:
                    if held:
                        completed[index] += store.complete("q", held)
                    batch = store.fetch("q", batch_size=10)
                held = list(batch)
                claimed[index] += [j.id for j in held]
                if not held:
                    return

        threads = [threading.Thread(target=drain, args=(i,)) for i in range(fetchers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=150)
        assert not any(t.is_alive() for t in threads)
        every = [i for part in claimed for i in part]
        assert len(every) == len(set(every))  # no job handed out twice
        assert set(every) == sent
        assert sum(completed) == jobs
        with psycopg.connect(pg_dsn) as conn:
            sql = f"SELECT count(*) FROM {quote_schema(schema_name)}.job WHERE state = 'completed'"
            assert conn.execute(sql).fetchone() == (jobs,)
