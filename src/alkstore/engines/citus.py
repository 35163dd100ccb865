"""Citus, in two modes.

``citus``: the tables stay local to the coordinator and behave like stock PostgreSQL.

``citus-distributed`` (``connect(..., engine="citus", engine_options={"distributed": True})``):
the job table is distributed by queue name with ``create_distributed_table``, so each queue
lives on one shard, and the queue table becomes a reference table. What that demands of the
SQL holds for the postgres engine already: every ``FOR UPDATE`` claim filters on ``name``,
no statement updates ``name``, every unique key includes it, and there are no triggers.
Declarative partitioning is off (the table is sharded instead).
"""

from __future__ import annotations

from typing import ClassVar

from ..core.capabilities import Capabilities
from ..core.plans import Statement
from .postgres import PostgresEngine


class CitusEngine(PostgresEngine):
    """Citus with coordinator-local tables: stock PostgreSQL behaviour."""

    name: ClassVar[str] = "citus"


class CitusDistributedEngine(CitusEngine):
    """Citus with the job table sharded by queue name."""

    name: ClassVar[str] = "citus-distributed"
    capabilities: ClassVar[Capabilities] = Capabilities(tuple_ids=False, table_partitioning=False)
    emulation_profile: ClassVar[str | None] = "citus-distributed"

    def after_install(self) -> list[Statement]:
        """Make ``queue`` (and the worker runtime's tables) reference tables and distribute
        ``job`` by ``name``.

        Skipped when emulated: stock PostgreSQL has no Citus functions; the guard then
        enforces what a distributed table would demand of every statement.
        """
        if self.emulated:
            return []
        # The worker runtime's tables (schema v2) are small and read everywhere: reference
        # tables, made after queue, which their foreign keys point at.
        reference = ("queue", "supervisor", "schedule", "subscription")
        return [
            *(
                Statement("SELECT create_reference_table($1::regclass)", (f"{self.s}.{table}",))
                for table in reference
            ),
            Statement("SELECT create_distributed_table($1::regclass, 'name')", (f"{self.s}.job",)),
        ]
