"""Telling which server a connection reached, for ``engine="auto"`` and mismatch warnings."""

from __future__ import annotations

from ..core.plans import Plan, Row, Statement, single

DETECT = Statement(
    "SELECT version() AS version, "
    "EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') AS citus"
)


def engine_for(rows: list[Row]) -> str:
    """The engine name for what ``DETECT`` returned."""
    version = str(rows[0]["version"])
    if "CockroachDB" in version:
        return "cockroachdb"
    if "-YB-" in version or "YugabyteDB" in version:
        return "yugabytedb"
    if rows[0]["citus"] in (True, "t", "true"):
        return "citus"
    return "postgres"


def detect_plan() -> Plan[str]:
    """A plan returning the detected engine name.

    Transactional, so that on a caller's non-autocommit connection it leaves no implicit
    transaction open behind ``connect``.
    """
    return single("detect", DETECT, engine_for, transaction=True)
