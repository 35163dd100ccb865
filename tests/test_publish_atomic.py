"""``publish`` is one statement: when the job of one subscribed queue cannot be inserted,
no queue gets its job (checked on PostgreSQL with a constraint the test adds)."""

from __future__ import annotations

import psycopg
import pytest

import alkstore


def test_publish_is_atomic(pg_dsn: str, schema_name: str) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        for name in ("a", "b", "c"):
            store.create_queue(name)
            store.subscribe("e", name)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(
                f'ALTER TABLE "{schema_name}".job ADD CONSTRAINT refuse_b CHECK (name <> $$b$$)'
            )
        with pytest.raises(psycopg.errors.CheckViolation, match="refuse_b"):
            store.publish("e", "x")
        assert [store.queue_stats(n).total for n in ("a", "b", "c")] == [0, 0, 0]
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'ALTER TABLE "{schema_name}".job DROP CONSTRAINT refuse_b')
        assert len(store.publish("e", "x")) == 3
