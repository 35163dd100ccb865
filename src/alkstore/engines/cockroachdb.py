"""CockroachDB: the postgres engine with every lock-free and split-statement alternative.

CockroachDB runs SERIALIZABLE (clients retry SQLSTATE 40001), has no SKIP LOCKED worth using
under contention (cockroach#97135, #121917), no multi-mutation CTEs, no declarative
partitioning, no deferrable constraints, no working advisory locks, no INCLUDE, no
LISTEN/NOTIFY, no PL/pgSQL beyond the basics, and may send INT8 as text (the core's record
builders coerce it).
"""

from __future__ import annotations

from typing import ClassVar

from ..core.description import EngineDescription, Gap, ServerInfo
from ..core.plans import Isolation
from .postgres import PostgresEngine


def _cockroachdb(server: ServerInfo) -> bool:
    return "CockroachDB" in server.version


COCKROACHDB = EngineDescription(
    name="cockroachdb",
    summary="CockroachDB v23.2 or newer",
    gaps={
        "skip_locked": Gap(
            why="SKIP LOCKED is best-effort under SERIALIZABLE and degrades under contention",
            upstream_url="https://github.com/cockroachdb/cockroach/issues/97135",
            guard_rules=("skip-locked",),
        ),
        "multi_mutation_cte": Gap(
            why="multiple mutations of the same table in one statement are not supported",
            upstream_url="https://www.cockroachlabs.com/docs/stable/common-table-expressions",
            guard_rules=("multi-mutation-cte",),
        ),
        "tuple_ids": Gap(
            why="no ctid system column: a row is found by its primary key",
            guard_rules=("ctid",),
        ),
        "table_partitioning": Gap(
            why="no PostgreSQL declarative partitioning (PARTITION BY / PARTITION OF)",
            upstream_url="https://www.cockroachlabs.com/docs/stable/partitioning",
            guard_rules=("partitioning",),
        ),
        "deferrable_constraints": Gap(why="no DEFERRABLE constraints", guard_rules=("deferrable",)),
        "advisory_locks": Gap(
            why="advisory lock functions are stubs or new and unreliable",
            upstream_url="https://github.com/cockroachdb/cockroach/issues/13546",
            guard_rules=("advisory-locks",),
        ),
        "covering_indexes": Gap(
            why="no INCLUDE (...) on indexes (CockroachDB spells it STORING)",
            guard_rules=("covering-index",),
        ),
        "listen_notify": Gap(why="no LISTEN, NOTIFY or pg_notify", guard_rules=("listen-notify",)),
        "add_column_backfill": Gap(
            why="a column added by ALTER TABLE cannot be written in the same transaction "
            "(the schema change completes only after commit)",
            guard_rules=("add-column-then-update",),
        ),
        "transactional_heartbeat": Gap(
            why="a heartbeat UPDATE from another session makes the worker's SERIALIZABLE "
            "transaction on the same row restart",
            no_rule_reason="a conflict between two sessions, not a construct of one "
            "statement: the guard sees statements, and the emulated server's SERIALIZABLE "
            "isolation produces the same restarts by itself",
        ),
        "asynchronous_commit": Gap(
            why="a commit returns once replicated by Raft; synchronous_commit does not relax it",
            no_rule_reason="durability of a commit, not a construct of a statement: the "
            "worker never issues the setting where the capability is off",
        ),
        "plpgsql": Gap(
            why="PL/pgSQL beyond the basics (EXECUTE, PERFORM, FOUND, DDL) is missing",
            guard_rules=("plpgsql",),
        ),
    },
    behaviours={
        "serialization_retries": "SERIALIZABLE by default: clients retry SQLSTATE 40001",
    },
    isolation=Isolation.SERIALIZABLE,
    emulation_profile="cockroachdb",
    detects=_cockroachdb,
)


class CockroachDBEngine(PostgresEngine):
    """CockroachDB (v23.2+)."""

    description: ClassVar[EngineDescription] = COCKROACHDB
    # UTC only: the cost-based optimizer has no bitmap scans to turn off.
    session_setup: ClassVar[tuple[str, ...]] = ("SET TimeZone TO 'UTC'",)
