"""Engine hooks may hand the migration any iterable of statements, and each one runs.

Sharded Citus distributes its tables in ``after_install``; on a real cluster the hook's list
reached the runner's ``send`` through ``yield from`` and every install failed, while emulated
mode (an empty list) never walked the path. A stub hook on stock PostgreSQL walks it here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from alkstore.core.plans import Plan, Statement, single
from alkstore.drivers import sync_driver
from alkstore.drivers.base import DriverSettings
from alkstore.engines.postgres import PostgresEngine
from alkstore.engines.postgres.identifiers import quote_schema
from alkstore.runner import run_sync


def _marks(schema: str) -> list[Statement]:
    s = quote_schema(schema)
    return [
        Statement(f"CREATE TABLE {s}.installed_mark (n int)"),
        Statement(f"INSERT INTO {s}.installed_mark (n) VALUES ($1), ($2)", (1, 2)),
    ]


HOOKS: dict[str, Callable[[str], Iterable[Statement]]] = {
    "list": _marks,
    "tuple": lambda schema: tuple(_marks(schema)),
    "generator": lambda schema: (statement for statement in _marks(schema)),
}


@pytest.mark.parametrize("kind", sorted(HOOKS))
def test_after_install_statements_run(pg_dsn: str, schema_name: str, kind: str) -> None:
    class HookedEngine(PostgresEngine):
        def after_install(self) -> Iterable[Statement]:
            return HOOKS[kind](self.schema)

    engine = HookedEngine(schema_name)
    driver = sync_driver("psycopg")
    source = driver.open(pg_dsn, DriverSettings(pool_size=1))
    try:
        for plan in engine.migrate():
            run_sync(source, driver, plan)
        assert run_sync(source, driver, _select_marks(schema_name)) == [1, 2]
        # A second migration finds the schema current and does not run the hook again.
        for plan in engine.migrate():
            run_sync(source, driver, plan)
        assert run_sync(source, driver, _select_marks(schema_name)) == [1, 2]
    finally:
        drop = Statement(f"DROP SCHEMA IF EXISTS {quote_schema(schema_name)} CASCADE")
        run_sync(source, driver, single("drop", drop, lambda rows: rows))
        source.close()


def _select_marks(schema: str) -> Plan[list[int]]:
    return single(
        "marks",
        Statement(f"SELECT n FROM {quote_schema(schema)}.installed_mark ORDER BY n"),
        lambda rows: [r["n"] for r in rows],
    )
