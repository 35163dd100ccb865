"""Reading the server's plans of an engine's statements, for the plan tests."""

from __future__ import annotations

from typing import Any

import psycopg

from alkstore.conformance.harness import StoreHandle
from alkstore.core.plans import Statement, single


def explained(store: StoreHandle, statement: Statement) -> str:
    """``EXPLAIN`` of ``statement`` with its parameters, on the store's own connection."""
    explain = Statement("EXPLAIN " + statement.sql, statement.params)
    rows = store.run_plan(single("explain", explain, lambda rows: rows))
    return "\n".join(row["QUERY PLAN"] for row in rows)


def plan_counts(cur: psycopg.RawCursor[Any], sql: str) -> tuple[str, int, int]:
    """The name, generic plans and custom plans of the statement ``sql`` prepared on
    ``cur``'s session."""
    row = cur.execute(
        "SELECT name, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = $1",
        (sql,),
    ).fetchone()
    assert row is not None, "not prepared"
    return row[0], row[1], row[2]
