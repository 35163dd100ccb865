"""``queue.flow_parents`` (schema version 14): a completion looks for flow parents only in
a queue that may have them, and the upgrade must not leave a queue's flow parents unseen."""

from __future__ import annotations

import psycopg

import alkstore
from alkstore.engines.postgres.schema import FLOW_PARENTS_VERSION


def _flags(dsn: str, schema: str) -> dict[str, bool]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(f'SELECT name, flow_parents FROM "{schema}".queue').fetchall()
    return dict(rows)


def test_a_flow_marks_its_parents_queue_only(pg_dsn: str, schema_name: str) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        for name in ("parents", "children", "plain"):
            store.create_queue(name)
        assert _flags(pg_dsn, schema_name) == {"parents": False, "children": False, "plain": False}
        store.flow(
            [
                {"ref": "a", "queue": "parents", "data": 1},
                {"ref": "b", "queue": "children", "data": 2, "depends_on": ["a"]},
            ]
        )
        assert _flags(pg_dsn, schema_name) == {"parents": True, "children": False, "plain": False}


def test_the_upgrade_keeps_looking_for_the_flow_parents_already_there(
    pg_dsn: str, schema_name: str
) -> None:
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        store.create_queue("parents")
        store.create_queue("children")
        ids = store.flow(
            [
                {"ref": "a", "queue": "parents", "data": 1},
                {"ref": "b", "queue": "children", "data": 2, "depends_on": ["a"]},
            ]
        )
    # The schema as it was before version 14, with the flow already made.
    with psycopg.connect(pg_dsn) as conn:
        conn.execute(f'ALTER TABLE "{schema_name}".queue DROP COLUMN flow_parents')
        conn.execute(
            f'UPDATE "{schema_name}".version SET version = %s', (FLOW_PARENTS_VERSION - 1,)
        )
    with alkstore.connect(pg_dsn, schema=schema_name) as store:
        assert _flags(pg_dsn, schema_name) == {"parents": True, "children": True}
        (parent,) = store.fetch("parents")
        assert store.complete("parents", parent) == 1
        (child,) = store.fetch("children")  # released by its parent's completion
        assert child.id == ids["b"]
