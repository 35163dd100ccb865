"""The plain send of sharded Citus is a call of a coordinator function (one routed INSERT a
job, then the notification) for up to ``ROUTED_JOBS`` jobs: it stores what the statement
stores, keeps the send's errors, notifies, and arrives with the upgrade.

Run behind the emulation guard on the test run's PostgreSQL (the same function); the real
cluster runs it through the conformance suite.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore.core.errors import JobConflict, QueueNotFound
from alkstore.core.options import JobOptions, NewJob
from alkstore.engines.citus import CitusDistributedEngine
from alkstore.engines.citus_send import ROUTED_JOBS, SEND_FUNCTION
from alkstore.engines.postgres.schema import SEND_FUNCTION_VERSION

QUEUE = "A-b.c/d"

_COMPARED = (
    "priority, retry_limit, retry_delay, retry_backoff, retry_delay_max, expire_seconds, "
    "heartbeat_seconds, retention_seconds, deletion_seconds, policy, singleton_key, group_id, "
    "group_tier, dead_letter, data::text, trace_context::text, state, "
    "keep_until - start_after AS kept, "
    "round(extract(epoch FROM start_after - created_on)) AS delayed, "
    "start_after > '2100-01-01' AS far"
)


def _store(dsn: str, schema: str) -> alkstore.Store:
    return alkstore.connect(
        dsn, engine="citus", engine_options={"distributed": True}, emulate=True, schema=schema
    )


@pytest.fixture
def store(pg_dsn: str, schema_name: str) -> Iterator[alkstore.Store]:
    with _store(pg_dsn, schema_name) as opened:
        opened.create_queue(QUEUE, retry_limit=7, retention_seconds=3600, dead_letter=None)
        opened.create_queue("dead")
        yield opened


def _rows(dsn: str, schema: str, ids: list[uuid.UUID | None]) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return [
            conn.execute(f'SELECT {_COMPARED} FROM "{schema}".job WHERE id = %s', (i,)).fetchone()
            for i in ids
        ]


def _has_function(dsn: str, schema: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_proc WHERE pronamespace = %s::regnamespace AND proname = %s",
            (schema, SEND_FUNCTION),
        ).fetchone()
    return row is not None and row[0] == 1


JOBS: list[dict[str, Any]] = [
    {"data": {"n": 1}},
    {
        "data": [1, "two"],
        "priority": 5,
        "retry_limit": 2,
        "retry_delay": 3,
        "retry_backoff": True,
        "retry_delay_max": 60,
        "expire_seconds": 30,
        "heartbeat_seconds": 10,
        "retention_seconds": 120,
        "deletion_seconds": 5,
        "singleton_key": "k",
        "group_id": "g",
        "group_tier": "t",
        "dead_letter": "dead",
        "start_after": 30.0,
    },
    {
        "data": None,
        "start_after": dt.datetime(2200, 1, 1, tzinfo=dt.UTC),
        "trace_context": {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
    },
]
"""Jobs without options, with every option the plain send binds, and at a fixed time."""


def test_small_sends_call_the_function_and_larger_ones_keep_the_statement() -> None:
    engine = CitusDistributedEngine("s", emulated=True)
    job = NewJob("{}", JobOptions(), id=uuid.uuid4())
    small, _ = engine._plain_send_sql("q", [job] * ROUTED_JOBS, counted=True)
    large, _ = engine._plain_send_sql("q", [job] * (ROUTED_JOBS + 1), counted=True)
    assert f".{SEND_FUNCTION}(" in small
    assert SEND_FUNCTION not in large and "INSERT INTO" in large


def test_the_function_stores_what_the_statement_stores(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    # One job a send: the function (once the store knows the queue is standard); the same
    # jobs padded past ROUTED_JOBS: the statement.
    store.send(QUEUE, None)
    called = [store.send(QUEUE, job.get("data"), **_options(job)) for job in JOBS]
    padding = [{"data": n} for n in range(ROUTED_JOBS)]
    stated = store.send_many(QUEUE, [*JOBS, *padding])[: len(JOBS)]
    assert None not in called and None not in stated
    assert _rows(pg_dsn, schema_name, called) == _rows(pg_dsn, schema_name, stated)
    queue_default, everything, timed = _rows(pg_dsn, schema_name, called)
    assert queue_default[1] == 7 and queue_default[-3] == dt.timedelta(hours=1)
    assert everything[0] == 5 and everything[-2] == 30
    assert timed[-1] is True and timed[15] is not None


def _options(job: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in job.items() if key != "data"}


def test_a_taken_id_or_an_unknown_queue_writes_nothing(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    first = store.send(QUEUE, {"n": 1})
    assert first is not None
    with pytest.raises(JobConflict):
        store.send(QUEUE, {"n": 2}, id=first)
    with pytest.raises(QueueNotFound):
        store.send("missing", {"n": 3})
    with psycopg.connect(pg_dsn) as conn:
        row = conn.execute(f'SELECT count(*) FROM "{schema_name}".job').fetchone()
    assert row is not None and row[0] == 1


def test_a_queue_given_a_policy_since_gets_the_guarded_send(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    store.send(QUEUE, {})  # the store now takes the queue for a standard one
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(
            f"UPDATE \"{schema_name}\".queue SET policy = 'short' WHERE name = %s", (QUEUE,)
        )
    assert store.send(QUEUE, {}, singleton_key="a") is not None
    assert store.send(QUEUE, {}, singleton_key="a") is None


def test_the_send_notifies_the_schemas_channel(
    store: alkstore.Store, pg_dsn: str, schema_name: str
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as listener:
        listener.execute(f'LISTEN "alkstore_{schema_name}"')
        store.send(QUEUE, {})
        notes = list(listener.notifies(timeout=10, stop_after=1))
    assert [note.payload for note in notes] == [QUEUE]


def test_the_upgrade_creates_the_function(pg_dsn: str, schema_name: str) -> None:
    with _store(pg_dsn, schema_name) as store:
        store.create_queue(QUEUE)
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f'DROP FUNCTION "{schema_name}".{SEND_FUNCTION}')
        conn.execute(
            f'UPDATE "{schema_name}".version SET version = %s', (SEND_FUNCTION_VERSION - 1,)
        )
    assert not _has_function(pg_dsn, schema_name)
    with _store(pg_dsn, schema_name) as store:
        assert store.send(QUEUE, {}) is not None
    assert _has_function(pg_dsn, schema_name)
