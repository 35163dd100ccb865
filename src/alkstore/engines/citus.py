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

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self, cast

import attrs

from ..core.description import EngineDescription, Gap, ServerInfo
from ..core.errors import InvalidOptions
from ..core.identifiers import quote_ident
from ..core.options import NewJob, QueueOptions
from ..core.plans import Plan, Statement, Steps
from ..core.validation import check_engine_options
from . import citus_calls, citus_send
from .postgres import POSTGRES, PostgresEngine
from .postgres.hooks import PostgresTestHooks
from .postgres.runtime import channel
from .postgres.schema import CLAIM_FUNCTION_VERSION, QUEUE_CLAIMS_VERSION, SEND_FUNCTION_VERSION
from .postgres.sql import JOB_COLUMNS, LEAN_JOB_COLUMNS, output_names


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
        "row_triggers": Gap(
            why="create_distributed_table refuses a table with triggers, and a trigger on a "
            "distributed table (citus.enable_unsafe_triggers) runs on the worker holding the "
            "shard, where its NOTIFY reaches no listener of the coordinator",
            upstream_url="https://docs.citusdata.com/en/stable/extra/triggers.html",
            guard_rules=("triggers",),
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
    session_setup: ClassVar[tuple[str, ...]] = (
        *PostgresEngine.session_setup,
        # Citus hides its shard tables from pg_class behind a per-row visibility check on the
        # coordinator; asyncpg's type introspection query then took 14-67 s on a fresh
        # connection once a few dozen schemas existed (docs/engines.md). alkstore never
        # names a shard, so its own sessions skip the check; a no-op where it is absent
        # (a setting Citus hides from pg_settings, hence current_setting's missing_ok).
        "SELECT set_config('citus.override_table_visibility', 'off', false) "
        "WHERE current_setting('citus.override_table_visibility', true) IS NOT NULL",
    )

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
    session_setup: ClassVar[tuple[str, ...]] = (
        *CitusEngine.session_setup,
        # A transaction that changed several shards in parallel may not then change a
        # reference table (queue, schedule, …): "cannot modify table because there was a
        # parallel operation". Sequential mode avoids it; a no-op where the setting is absent.
        "SELECT set_config(name, 'sequential', false) FROM pg_settings "
        "WHERE name = 'citus.multi_shard_modify_mode'",
    )

    def test_hooks(self) -> CitusTestHooks:
        """The postgres hooks plus :meth:`CitusTestHooks.shard_layout`."""
        caps = self.capabilities
        return CitusTestHooks(self.s, retry_serialization=caps.serialization_retries)

    def after_install(self) -> list[Statement]:
        """Make ``queue`` (and the worker runtime's tables) reference tables and distribute
        ``job`` by ``name``.

        Skipped when emulated: stock PostgreSQL has no Citus functions; the guard then
        enforces what a distributed table would demand of every statement.
        """
        if self.emulated:
            return []
        # The worker runtime's tables (schema v2) are small and read everywhere: reference
        # tables, made after queue, which their foreign keys point at. So is the flows' edge
        # table (schema v4): one flow's jobs span queues, hence shards.
        reference = ("queue", "supervisor", "schedule", "subscription", "job_dependency")
        return [
            *(
                Statement("SELECT create_reference_table($1::regclass)", (f"{self.s}.{table}",))
                for table in reference
            ),
            Statement("SELECT create_distributed_table($1::regclass, 'name')", (f"{self.s}.job",)),
            *_blocked_beside_job(self.s),
        ]

    def after_upgrade(self, installed: int, target: int) -> list[Statement]:
        """Create the claim function (:mod:`.citus_calls`) when the schema reaches the version
        that has it, and the per-queue claim functions at theirs (for the queues already
        there too); distribute them where the job table is (a real cluster). Create the send
        function (:mod:`.citus_send`) at its version.

        Emulated, the functions are created all the same and run on stock PostgreSQL where
        they are called: the conformance suite checks the same bodies the cluster runs."""
        statements: list[Statement] = []
        if installed < CLAIM_FUNCTION_VERSION <= target:
            if installed and not self.emulated:
                # A schema installed before: its job_blocked is a reference table.
                statements += [
                    Statement(
                        "SELECT undistribute_table($1::regclass)", (f"{self.s}.job_blocked",)
                    ),
                    *_blocked_beside_job(self.s),
                ]
            statements += citus_calls.install(self.s, distribute=not self.emulated)
        if installed < QUEUE_CLAIMS_VERSION <= target:
            statements += citus_calls.install_queue_claims(
                self.s, distribute=not self.emulated, existing=bool(installed)
            )
        if installed < SEND_FUNCTION_VERSION <= target:
            # Not distributed: it must run on the coordinator (module docstring).
            statements.append(Statement(citus_send.send_function(self.s)))
        return statements

    def _plain_send_sql(
        self, queue: str, jobs: Sequence[NewJob], *, counted: bool
    ) -> tuple[str, tuple[Any, ...]]:
        """Up to :data:`.citus_send.ROUTED_JOBS` jobs: the call of the send function, one
        ``INSERT ... VALUES`` routed to the queue's shard a job and the coordinator's
        notification (:mod:`.citus_send`); more: the statement (this engine notifies, so
        ``counted`` is true and the call's one row, ``changed``, is what is read back)."""
        if len(jobs) > citus_send.ROUTED_JOBS:
            return super()._plain_send_sql(queue, jobs, counted=counted)
        return citus_send.send_call(self.s), citus_send.send_params(queue, jobs, channel(self))

    def create_queue(self, name: str, options: QueueOptions) -> Plan[None]:
        """Create the queue and, in the same transaction, its own claim function
        (:func:`.citus_calls.queue_claim_maker`), distributed beside its jobs."""
        plan = super().create_queue(name, options)
        distribute = not self.emulated
        made = citus_calls.queue_claim(self.s, "$1::text", 2, distribute=distribute)
        claim = Statement(
            f"SELECT {made} AS made",
            (name, *citus_calls.queue_claim_params(self.s, distribute=distribute)),
        )

        def steps() -> Steps[None]:
            yield from plan.steps()
            yield claim

        return attrs.evolve(plan, steps=steps, transaction=True)

    def delete_queue(self, name: str) -> Plan[None]:
        """Delete the queue, its jobs and its own claim function, in one transaction."""
        plan = super().delete_queue(name)
        function = quote_ident(citus_calls.queue_claim_name(name))
        drop = Statement(
            f"DROP FUNCTION IF EXISTS {self.s}.{function}{citus_calls.CLAIM_SIGNATURE}"
        )

        def steps() -> Steps[None]:
            yield from plan.steps()
            yield drop

        return attrs.evolve(plan, steps=steps)

    def _claim_sql(self, kind: str, full: bool, one: bool, queue: str) -> str:
        """The claim and ``complete_and_fetch`` as a call of ``queue``'s own claim function,
        with the statements' parameters in their order (see :mod:`.citus_calls`)."""

        def build() -> str:
            returned = ", ".join(output_names(JOB_COLUMNS if full else LEAN_JOB_COLUMNS))
            if kind == "fetch":
                limit = "1" if one else "$2::bigint"
                args = f"$1::text, {limit}, '{{}}', '{{}}', NULL"
            else:
                args = (
                    "$1::text, 1, $2::uuid[], $3::int[], $4::text"
                    if one
                    else "$1::text, $2::bigint, $3::uuid[], $4::int[], $5::text"
                )
            return citus_calls.claim_call(self.s, returned, args, queue)

        return self.built_once(("claim", kind, full, one, queue), build)

    def _unflowed_completing(self, include_queued: bool) -> str:
        """``complete`` as a call of the claim function claiming nothing (a completion that
        includes queued jobs keeps the statement)."""
        if include_queued:
            return super()._unflowed_completing(include_queued)
        return (
            f"SELECT completed AS n, flow_parents FROM {self.s}.{citus_calls.CLAIM_FUNCTION}"
            "($1::text, 0, $2::uuid[], $3::int[], $4::text)"
        )


def _blocked_beside_job(s: str) -> list[Statement]:
    """Distribute ``job_blocked`` (one row per flow job still waiting) by queue name,
    co-located with the job table: counting down the flow jobs of one queue then locks that
    queue's shard only. As a reference table every such write locked its one shard on every
    node (``lock_shard_resources``), so the flows of unrelated queues ran one at a time."""
    return [
        Statement(
            "SELECT create_distributed_table($1::regclass, 'name', colocate_with := $2::text)",
            (f"{s}.job_blocked", f"{s}.job"),
        )
    ]


@attrs.frozen
class ShardLayout:
    """How a real sharded Citus cluster holds the schema."""

    tables: dict[str, tuple[str, str]]
    """Table -> (Citus table type, distribution column)."""
    workers: frozenset[tuple[str, int]]
    """The active workers (host, port)."""
    placed: frozenset[tuple[str, int]]
    """The workers holding the shard of at least one queue's jobs."""


class CitusTestHooks(PostgresTestHooks):
    """Test hooks of sharded Citus: also how the tables are distributed over the workers."""

    def shard_layout(self) -> Plan[ShardLayout]:
        """The job and queue tables' Citus types and where the queues' shards sit (a real
        cluster only: stock PostgreSQL has none of these catalogs)."""
        s = self.s

        def steps() -> Steps[ShardLayout]:
            tables = yield Statement(
                "SELECT table_name::text AS name, citus_table_type AS kind, "
                "distribution_column AS column FROM citus_tables "
                "WHERE table_name IN ($1::text::regclass, $2::text::regclass) ORDER BY 1",
                (f"{s}.job", f"{s}.queue"),
            )
            workers = yield Statement(
                "SELECT node_name, node_port FROM citus_get_active_worker_nodes()"
            )
            placed = yield Statement(
                "SELECT DISTINCT cs.nodename AS node_name, cs.nodeport AS node_port "
                f"FROM {s}.queue q JOIN citus_shards cs ON cs.shardid = "
                "get_shard_id_for_distribution_column($1::text::regclass, q.name)",
                (f"{s}.job",),
            )
            return ShardLayout(
                {r["name"].rsplit(".", 1)[1]: (r["kind"], r["column"]) for r in tables},
                frozenset((r["node_name"], int(r["node_port"])) for r in workers),
                frozenset((r["node_name"], int(r["node_port"])) for r in placed),
            )

        return self._plan("test-shard-layout", steps)
