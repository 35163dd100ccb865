"""Refusals that retrying cannot change (issue 29, items 3, 4 and 7): a missing privilege is
PermissionDenied, a refused login AuthenticationFailed, a missing database DatabaseNotFound
(neither a ConnectionFailed claiming a retry is safe), a port that is no number
InvalidOptions naming it; on every driver, the driver's error chained."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from faultkit import VARIANTS, open_store

from alkstore import (
    AuthenticationFailed,
    ConnectionFailed,
    DatabaseNotFound,
    InvalidOptions,
    PermissionDenied,
    connect,
    connect_async,
)
from alkstore.conformance.cluster import TempCluster


@pytest.fixture(params=VARIANTS)
def variant(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def dml_role(
    fault_cluster: TempCluster, admin: psycopg.Connection[Any]
) -> Iterator[tuple[str, str]]:
    """A schema its owner installed, and the DSN of a role with USAGE and DML on it only."""
    schema = f"r_{uuid.uuid4().hex[:12]}"
    role = f"app_{uuid.uuid4().hex[:8]}"
    owner = open_store(fault_cluster.dsn, "psycopg", schema)
    try:
        owner.create_queue("q")
        admin.execute(f"CREATE ROLE {role} LOGIN")
        admin.execute(f"GRANT USAGE ON SCHEMA {schema} TO {role}")
        admin.execute(
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {schema} TO {role}"
        )
        yield schema, fault_cluster.dsn.replace("postgres@", f"{role}@", 1)
    finally:
        owner.close()
        admin.execute(f"DROP OWNED BY {role}")
        admin.execute(f"DROP ROLE IF EXISTS {role}")


def test_ddl_without_the_privilege_is_permission_denied(
    dml_role: tuple[str, str], variant: str
) -> None:
    schema, dsn = dml_role
    app = open_store(dsn, variant, schema, owner=False)
    try:
        with pytest.raises(PermissionDenied, match="permission denied") as info:
            app.create_queue("p", partition=True)
        assert info.value.__cause__ is not None
    finally:
        app.close()


def test_a_schema_the_role_cannot_use_is_permission_denied(
    dml_role: tuple[str, str], admin: psycopg.Connection[Any], variant: str
) -> None:
    schema, dsn = dml_role
    role = dsn.split("://", 1)[1].split("@", 1)[0]
    admin.execute(f"REVOKE USAGE ON SCHEMA {schema} FROM {role}")
    with pytest.raises(PermissionDenied, match=f"schema {schema}") as info:
        open_store(dsn, variant, schema, owner=False).close()
    assert info.value.__cause__ is not None


def _connect(dsn: str, variant: str) -> None:
    driver = variant.removesuffix("-async")
    if variant in ("psycopg", "pg8000"):
        connect(dsn, driver=driver, connect_timeout=5).close()
        return

    async def main() -> None:
        store = await connect_async(dsn, driver=driver, connect_timeout=5)
        await store.close()

    asyncio.run(main())


def test_an_unknown_role_is_authentication_failed(fault_cluster: TempCluster, variant: str) -> None:
    dsn = fault_cluster.dsn.replace("postgres@", "nobody_here@", 1)
    with pytest.raises(AuthenticationFailed) as info:
        _connect(dsn, variant)
    assert not isinstance(info.value, ConnectionFailed)
    assert "retrying is safe" not in str(info.value)
    assert info.value.__cause__ is not None


def test_a_missing_database_is_database_not_found(fault_cluster: TempCluster, variant: str) -> None:
    dsn = fault_cluster.dsn.rsplit("/", 1)[0] + "/no_such_db"
    with pytest.raises(DatabaseNotFound) as info:
        _connect(dsn, variant)
    assert "retrying is safe" not in str(info.value)
    assert info.value.__cause__ is not None


@pytest.mark.parametrize(
    "dsn", ["postgresql://u@127.0.0.1:notaport/db", "postgresql://u@127.0.0.1/db?port=54x32"]
)
def test_a_port_that_is_no_number_is_invalid_options(dsn: str, variant: str) -> None:
    with pytest.raises(InvalidOptions) as info:
        _connect(dsn, variant)
    assert info.value.field == "port"
