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

from collections.abc import Mapping
from typing import Any, ClassVar, Self, cast

from ..core.description import EngineDescription, Gap, ServerInfo
from ..core.errors import InvalidOptions
from ..core.plans import Statement
from ..core.validation import check_engine_options
from .postgres import POSTGRES, PostgresEngine


def _citus(server: ServerInfo) -> bool:
    return "citus" in server.extensions


CITUS = POSTGRES.derive(name="citus", summary="Citus with coordinator-local tables", detects=_citus)
CITUS_DISTRIBUTED = POSTGRES.derive(
    name="citus-distributed",
    summary="Citus with the job table distributed by queue name",
    gaps={
        "tuple_ids": Gap(
            why="a ctid names a row within one shard only; the claim re-finds rows by key",
            no_rule_reason="Citus runs a ctid comparison routed to one shard without "
            "complaint: nothing is rejected for a guard rule to catch",
        ),
        "table_partitioning": Gap(
            why="the job table is sharded by queue name instead of partitioned",
            upstream_url="https://docs.citusdata.com/en/stable/develop/reference_workarounds.html",
            guard_rules=("partitioning",),
        ),
    },
    emulation_profile="citus-distributed",
    detects=_citus,
)


class CitusEngine(PostgresEngine):
    """Citus with coordinator-local tables: stock PostgreSQL behaviour.

    ``engine_options={"distributed": True}`` gives :class:`CitusDistributedEngine`.
    """

    description: ClassVar[EngineDescription] = CITUS
    option_names: ClassVar[frozenset[str]] = frozenset({"distributed"})

    @classmethod
    def configure(
        cls,
        schema: str,
        options: Mapping[str, Any],
        *,
        emulated: bool = False,
        server: ServerInfo | None = None,
    ) -> Self:
        """Citus, sharded when ``distributed`` is true."""
        check_engine_options(cls.option_names, options)
        distributed = options.get("distributed", False)
        if not isinstance(distributed, bool):
            raise InvalidOptions("engine_options.distributed", distributed, "must be a bool")
        chosen = CitusDistributedEngine if distributed else cls
        # CitusDistributedEngine is a CitusEngine, and from it the choice is itself: a Self.
        return cast(Self, chosen(schema, emulated=emulated, server=server))


class CitusDistributedEngine(CitusEngine):
    """Citus with the job table sharded by queue name."""

    description: ClassVar[EngineDescription] = CITUS_DISTRIBUTED

    def after_install(self) -> list[Statement]:
        """Make ``queue`` a reference table and distribute ``job`` by ``name``.

        Skipped when emulated: stock PostgreSQL has no Citus functions; the guard then
        enforces what a distributed table would demand of every statement.
        """
        if self.emulated:
            return []
        return [
            Statement("SELECT create_reference_table($1::regclass)", (f"{self.s}.queue",)),
            Statement("SELECT create_distributed_table($1::regclass, 'name')", (f"{self.s}.job",)),
        ]
