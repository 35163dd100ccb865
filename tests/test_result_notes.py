"""Schema version 15: the statements that finish a job notify its waiters themselves, in
place of the ``job_result`` row trigger of version 6 (docs/workers.md, "Waiting for a
result"). Which finishing statements wake a waiter is the conformance suite's
``test_a_notification_wakes_the_wait``; these tests check what it cannot see: a job nobody
waits for sends nothing, and the upgrade takes the trigger away."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

import alkstore
from alkstore.core.capabilities import Capabilities
from alkstore.engines.postgres import schema as ddl
from alkstore.engines.postgres.identifiers import quote_schema


def _listener(dsn: str, schema: str) -> psycopg.Connection[Any]:
    conn = psycopg.connect(dsn, autocommit=True)
    conn.execute(f'LISTEN "{ddl.RESULT_CHANNEL}{schema}"')
    return conn


def _first_note(conn: psycopg.Connection[Any]) -> str:
    """The payload of the first notification to arrive (within 30 s)."""
    notes = [note.payload for note in conn.notifies(timeout=30, stop_after=1)]
    assert notes, "no notification within 30 s"
    return notes[0]


def _mark_waited(dsn: str, schema: str, job_id: uuid.UUID) -> None:
    """What ``wait`` does to the job it waits for (``waiting.watch_result``)."""
    with psycopg.connect(dsn) as conn:
        conn.execute(f'UPDATE "{schema}".job SET waited = true WHERE id = %s', (job_id,))


def _result_triggers(dsn: str, schema: str) -> list[str]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            """SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
               WHERE c.relnamespace = %s::regnamespace AND t.tgname = 'job_result'""",
            (schema,),
        ).fetchall()
    return [row[0] for row in rows]


def test_only_a_job_that_is_waited_for_notifies_when_it_finishes(
    pg_dsn: str, schema_name: str
) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q")
        store.send_many("q", [{"data": 1}, {"data": 2}])
        unwaited, waited = store.fetch("q", batch_size=2)
        _mark_waited(pg_dsn, schema_name, waited.id)
        with _listener(pg_dsn, schema_name) as listener:
            assert store.complete("q", unwaited) == 1
            assert store.complete("q", waited) == 1
            # Notifications arrive in commit order: one for the first job would come first.
            assert _first_note(listener) == str(waited.id)


def test_the_upgrade_to_15_replaces_the_trigger(pg_dsn: str, schema_name: str) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("q")
        job_id = store.send("q", 1)
    # The schema as version 14 left it: the trigger of version 6, no result_note.
    s = quote_schema(schema_name)
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f"DROP FUNCTION {s}.result_note(uuid, oid)")
        for statement in ddl._v6(s, Capabilities())[1:]:
            conn.execute(statement)
        conn.execute(f"UPDATE {s}.version SET version = 14")
    assert _result_triggers(pg_dsn, schema_name)
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        assert _result_triggers(pg_dsn, schema_name) == []
        assert job_id is not None
        _mark_waited(pg_dsn, schema_name, job_id)
        (job,) = store.fetch("q")
        with _listener(pg_dsn, schema_name) as listener:
            assert store.complete("q", job) == 1
            assert _first_note(listener) == str(job_id)
