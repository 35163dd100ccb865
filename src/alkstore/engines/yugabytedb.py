"""YugabyteDB: the postgres engine without advisory locks, partitioning or LISTEN/NOTIFY.

Partitioning DDL in a transaction that also writes fails there (yugabyte-db#21833), advisory
locks are behind a flag, LISTEN/NOTIFY is off by default, and DEFERRABLE is refused on unique
and primary keys. Its default isolation is REPEATABLE READ, so serialization failures are
retried.
"""

from __future__ import annotations

from typing import ClassVar

from ..core.description import EngineDescription, Gap, ServerInfo
from ..core.plans import Isolation
from .postgres import PostgresEngine


def _yugabytedb(server: ServerInfo) -> bool:
    return "-YB-" in server.version or "YugabyteDB" in server.version


YUGABYTEDB = EngineDescription(
    name="yugabytedb",
    summary="YugabyteDB 2.20 or newer",
    gaps={
        "tuple_ids": Gap(
            why="rows have no PostgreSQL ctid (they are addressed by ybctid)",
            guard_rules=("ctid",),
        ),
        "table_partitioning": Gap(
            why="partitioning DDL in a transaction that also writes fails",
            upstream_url="https://github.com/yugabyte/yugabyte-db/issues/21833",
            guard_rules=("partitioning",),
        ),
        # Deferrable foreign keys work there, deferrable unique/primary keys do not; the
        # engine uses neither, and declares the capability off to stay on the safe side.
        "deferrable_constraints": Gap(
            why="DEFERRABLE is refused on unique and primary keys",
            guard_rules=("deferrable-key",),
        ),
        "advisory_locks": Gap(
            why="advisory locks are behind a flag in recent versions only",
            guard_rules=("advisory-locks",),
        ),
        "listen_notify": Gap(why="LISTEN/NOTIFY is off by default", guard_rules=("listen-notify",)),
        "transactional_heartbeat": Gap(
            why="under its default REPEATABLE READ, a heartbeat UPDATE committed by another "
            "session while the worker's transaction is open makes that transaction's "
            "completion of the same row fail with SQLSTATE 40001",
            no_rule_reason="a conflict between two sessions, not a construct of one "
            "statement: the guard sees statements, and the emulated server's REPEATABLE READ "
            "isolation produces the same failures by itself",
        ),
        "asynchronous_commit": Gap(
            why="a commit returns once replicated by DocDB (Raft); synchronous_commit does "
            "not relax it",
            no_rule_reason="durability of a commit, not a construct of a statement: the "
            "worker never issues the setting where the capability is off",
        ),
    },
    behaviours={
        "serialization_retries": "REPEATABLE READ by default: clients retry SQLSTATE 40001",
    },
    isolation=Isolation.REPEATABLE_READ,
    emulation_profile="yugabytedb",
    detects=_yugabytedb,
)


class YugabyteDBEngine(PostgresEngine):
    """YugabyteDB (2.20+)."""

    description: ClassVar[EngineDescription] = YUGABYTEDB
