"""Fixtures of the fault suite: a throwaway cluster of its own (faults kill its backends and
restart it), an admin connection, and stores through every driver."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from alkstore.conformance.cluster import TempCluster


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """Print the fault table of the run (and write it where ALKSTORE_FAULT_TABLE says)."""
    import faultkit

    if not faultkit.RESULTS:
        return
    table = faultkit.fault_table()
    terminalreporter.write_sep("=", "fault table")
    terminalreporter.write_line(table)
    target = os.environ.get("ALKSTORE_FAULT_TABLE")
    if target:
        with open(target, "w") as out:
            out.write(table + "\n")


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
