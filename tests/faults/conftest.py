"""Fixtures of the fault suite: a throwaway cluster of its own (faults kill its backends and
restart it), an admin connection, and stores through every driver."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from alkstore.conformance.cluster import TempCluster


@pytest.fixture(scope="package")
def fault_cluster() -> Iterator[TempCluster]:
    """A cluster only the fault suite uses."""
    with TempCluster(max_connections=300) as cluster:
        yield cluster


@pytest.fixture
def admin(fault_cluster: TempCluster) -> Iterator[psycopg.Connection[Any]]:
    """A superuser autocommit connection that survives the faults it causes (not pooled)."""
    with psycopg.connect(fault_cluster.dsn, autocommit=True, application_name="faults-admin") as c:
        yield c
