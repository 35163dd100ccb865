"""Each queue of sharded Citus has a claim function of its own, with the queue's name written
in: created with the queue, dropped with it, made for the queues already there by the upgrade.

Run behind the emulation guard on the test run's PostgreSQL (the same functions, not
distributed); the real cluster runs them through the conformance suite.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

import alkstore
from alkstore.engines.citus_calls import (
    CLAIM_FUNCTION,
    QUEUE_CLAIM_MAKER,
    claim_call,
    queue_claim_name,
)
from alkstore.engines.postgres.schema import QUEUE_CLAIMS_VERSION

QUEUE = "A-b.c/d"
"""A queue name with every kind of character a name may have."""


def _store(dsn: str, schema: str) -> alkstore.Store:
    return alkstore.connect(
        dsn, engine="citus", engine_options={"distributed": True}, emulate=True, schema=schema
    )


def _functions(dsn: str, schema: str) -> dict[str, tuple[str, list[str] | None]]:
    """name -> (body, settings) of the schema's claim functions."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT proname, prosrc, proconfig FROM pg_proc "
            "WHERE pronamespace = %s::regnamespace AND proname LIKE 'claim%%'",
            (schema,),
        ).fetchall()
    return {name: (body, config) for name, body, config in rows}


@pytest.fixture
def store(pg_dsn: str, schema_name: str) -> Iterator[alkstore.Store]:
    with _store(pg_dsn, schema_name) as opened:
        yield opened


def test_the_call_names_the_queues_own_function() -> None:
    own = claim_call('"s"', "id", "$1::text, 1, '{}', '{}', NULL", QUEUE)
    assert f'"s"."{queue_claim_name(QUEUE)}"(' in own
    assert queue_claim_name(QUEUE) != queue_claim_name("a-b.c/d")
    assert f'"s".{CLAIM_FUNCTION}(' in claim_call('"s"', "id", "$1::text, 1, '{}', '{}', NULL")


def test_a_created_queue_has_its_function_with_its_name_written_in(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    store.create_queue(QUEUE)
    body, config = _functions(pg_dsn, schema_name)[queue_claim_name(QUEUE)]
    assert "$1" not in body
    assert f"j.name = '{QUEUE}' AND" in body
    assert config == ["plan_cache_mode=force_generic_plan"]

    first, second = (store.send(QUEUE, {"n": n}) for n in (1, 2))
    fetched = store.fetch(QUEUE, batch_size=1)
    assert [job.id for job in fetched] == [first]
    handoff = store.complete_and_fetch(QUEUE, fetched, batch_size=1)
    assert handoff.completed == 1
    assert [job.id for job in handoff.jobs] == [second]
    assert store.get_job(QUEUE, first).state == "completed"


def test_a_deleted_queue_takes_its_function_along(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    store.create_queue(QUEUE)
    store.create_queue("other")
    store.delete_queue(QUEUE)
    functions = _functions(pg_dsn, schema_name)
    assert queue_claim_name(QUEUE) not in functions
    assert queue_claim_name("other") in functions


def test_the_upgrade_gives_the_queues_already_there_their_functions(
    pg_dsn: str, schema_name: str
) -> None:
    with _store(pg_dsn, schema_name) as store:
        store.create_queue(QUEUE)
        job = store.send(QUEUE, {})
    # Back to the schema before per-queue functions: the generic function only.
    with psycopg.connect(pg_dsn) as conn:
        for name in (queue_claim_name(QUEUE), QUEUE_CLAIM_MAKER):
            conn.execute(f'DROP FUNCTION "{schema_name}".{name}')
        conn.execute(
            f'UPDATE "{schema_name}".version SET version = %s', (QUEUE_CLAIMS_VERSION - 1,)
        )
    assert queue_claim_name(QUEUE) not in _functions(pg_dsn, schema_name)

    with _store(pg_dsn, schema_name) as store:
        assert [j.id for j in store.fetch(QUEUE, batch_size=1)] == [job]
    assert queue_claim_name(QUEUE) in _functions(pg_dsn, schema_name)
