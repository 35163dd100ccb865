"""CockroachDB: the postgres engine with every lock-free and split-statement alternative.

CockroachDB runs SERIALIZABLE (clients retry SQLSTATE 40001), has no SKIP LOCKED worth using
under contention (cockroach#97135, #121917), no multi-mutation CTEs, no declarative
partitioning, no deferrable constraints, no working advisory locks, no INCLUDE, no
LISTEN/NOTIFY, no PL/pgSQL beyond the basics, and may send INT8 as text (the core's record
builders coerce it).
"""

from __future__ import annotations

from typing import ClassVar

from ..core.capabilities import Capabilities
from ..core.plans import Isolation
from .postgres import PostgresEngine


class CockroachDBEngine(PostgresEngine):
    """CockroachDB (v23.2+)."""

    name: ClassVar[str] = "cockroachdb"
    capabilities: ClassVar[Capabilities] = Capabilities(
        skip_locked=False,
        multi_mutation_cte=False,
        tuple_ids=False,
        table_partitioning=False,
        deferrable_constraints=False,
        advisory_locks=False,
        covering_indexes=False,
        listen_notify=False,
        add_column_backfill=False,
        transactional_heartbeat=False,
        serialization_retries=True,
        plpgsql=False,
    )
    isolation: ClassVar[Isolation | None] = Isolation.SERIALIZABLE
    emulation_profile: ClassVar[str | None] = "cockroachdb"
    # UTC only: the cost-based optimizer has no bitmap scans to turn off.
    session_setup: ClassVar[tuple[str, ...]] = ("SET TimeZone TO 'UTC'",)
