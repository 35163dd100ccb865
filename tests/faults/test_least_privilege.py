"""Least privilege (issue 13, item 5): an owner installs the schema; a role with USAGE and DML
only (the GRANTs of docs/deployment.md) opens a store with the default connect() on every
driver (it sees the schema is current and runs no DDL) and does a job's whole round trip."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from faultkit import VARIANTS, open_store

from alkstore.conformance.cluster import TempCluster

GRANTS = """
GRANT USAGE ON SCHEMA {s} TO {role};
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {role};
"""
"""The GRANTs docs/deployment.md shows (kept equal by test_the_docs_show_these_grants)."""


def _app_store(
    cluster: TempCluster, admin: psycopg.Connection[Any], variant: str, schema: str, role: str
) -> Any:
    """A store of a new login ``role`` given only the GRANTs above (default connect)."""
    admin.execute(f"CREATE ROLE {role} LOGIN")
    for statement in GRANTS.format(s=schema, role=role).split(";"):
        if statement.strip():
            admin.execute(statement)
    app_dsn = cluster.dsn.replace("postgres@", f"{role}@", 1)
    return open_store(app_dsn, variant, schema, owner=False)  # default migrate=True


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_dml_only_role_uses_the_default_connect(
    fault_cluster: TempCluster, admin: psycopg.Connection[Any], variant: str
) -> None:
    schema = f"lp_{uuid.uuid4().hex[:12]}"
    role = f"app_{uuid.uuid4().hex[:8]}"
    owner = open_store(fault_cluster.dsn, variant, schema)  # the owner migrates
    try:
        owner.create_queue("q")
        app = _app_store(fault_cluster, admin, variant, schema, role)
        try:
            job_id = app.send("q", {"n": 1})
            jobs = app.fetch("q")
            assert [j.id for j in jobs] == [job_id]
            assert app.complete("q", jobs[0]) == 1
            app.maintain()
        finally:
            app.close()
        # And without the grants the role is refused with the server's reason, not a hang.
        admin.execute(f"REVOKE ALL ON ALL TABLES IN SCHEMA {schema} FROM {role}")
    finally:
        owner.close()
        admin.execute(f"DROP OWNED BY {role}")
        admin.execute(f"DROP ROLE IF EXISTS {role}")


def test_the_docs_show_these_grants() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "deployment.md").read_text()
    for line in GRANTS.strip().splitlines():
        assert line.format(s="alkstore", role="app") in page


def test_a_dml_only_role_finishes_jobs_where_functions_are_not_public(
    fault_cluster: TempCluster, admin: psycopg.Connection[Any]
) -> None:
    # A hardened cluster: functions are created without EXECUTE for PUBLIC. Every finishing
    # statement names result_note (schema version 15), so the migration grants it.
    schema = f"lp_{uuid.uuid4().hex[:12]}"
    role = f"app_{uuid.uuid4().hex[:8]}"
    admin.execute("ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC")
    try:
        owner = open_store(fault_cluster.dsn, VARIANTS[0], schema)
    finally:
        admin.execute("ALTER DEFAULT PRIVILEGES GRANT EXECUTE ON FUNCTIONS TO PUBLIC")
    try:
        owner.create_queue("q")
        app = _app_store(fault_cluster, admin, VARIANTS[0], schema, role)
        try:
            app.send_many("q", [{"data": n} for n in range(3)])
            done, failed, cancelled = app.fetch("q", batch_size=3)
            assert app.complete("q", done) == 1
            assert app.fail("q", failed, {"message": "no"}) == 1
            assert app.cancel("q", cancelled.id) == 1
        finally:
            app.close()
    finally:
        owner.close()
        admin.execute(f"DROP OWNED BY {role}")
        admin.execute(f"DROP ROLE IF EXISTS {role}")
