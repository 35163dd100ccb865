"""Fixtures of alkstore's own tests: the PostgreSQL the conformance plugin provides."""

from __future__ import annotations

import uuid

import pytest

from alkstore.conformance.harness import Backend


@pytest.fixture(scope="session")
def pg_dsn(alkstore_backend: Backend) -> str:
    """DSN of the run's PostgreSQL (the throwaway cluster unless --alkstore-dsn is given)."""
    return alkstore_backend.dsn


@pytest.fixture
def schema_name() -> str:
    """A schema name no other test uses."""
    return f"t_{uuid.uuid4().hex[:16]}"
