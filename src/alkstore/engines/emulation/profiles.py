"""The product profiles: for each emulated server, the rules it enforces and how it behaves.

Every rule has a stable ``id``, a one-line ``reason``, the ``source`` that documents the
limitation (the product's docs, an upstream issue, or the line of its source that raises the
error) and, where the engine turns a capability off because of it, that ``capability``.
:func:`rules_for` hands them to whoever describes an engine; :mod:`.rules_doc` renders
them for ``docs/engines.md``.
"""

from __future__ import annotations

import attrs

from ...core.errors import AlkstoreError
from ...core.plans import Isolation
from .citus import (
    _case_mutable_in_modification,
    _distribution_update,
    _key_without_column,
    _mutable_returning,
    _row_lock_filter,
    _stable_with_column_in_modification,
    _volatile_in_modification,
)
from .citus_planning import (
    _mutable_in_do_update,
    _mutable_subquery_across_shards,
    _notify_from_one_shard,
    _recursive_cte_across_shards,
    _spread_from_one_shard,
    _void_cte_column,
)
from .rules import (
    _ADVISORY,
    _ALTER_TYPE,
    _CTID,
    _DEFERRABLE,
    _EXCLUDE,
    _GIST,
    _INCLUDE,
    _INHERITS,
    _LOCK_TABLE,
    _PARTITIONING,
    _SKIP_LOCKED,
    _TRIGGER,
    _TWO_PHASE,
    _XID,
    Memory,
    Rule,
    _added_then_updated,
    _added_then_updated_in_one_text,
    _deferrable_key,
    _listen_notify,
    _multi_mutation,
    _on_conflict_expression,
    _plpgsql,
    _search,
)


class EmulationRejected(AlkstoreError):
    """A statement the emulated engine's real server would reject; it was not sent."""

    def __init__(self, profile: str, rule: Rule, snippet: str, sql: str) -> None:
        head = " ".join(sql.split())
        if len(head) > 100:
            head = head[:100] + " ..."
        super().__init__(f"{profile} would reject: {snippet} [{rule.id}] (statement: {head})")
        self.profile = profile
        """The profile's name."""
        self.rule = rule.id
        """The rule's id."""
        self.reason = rule.reason
        """What the real server rejects and why."""
        self.source = rule.source
        """Where the limitation is documented."""
        self.snippet = snippet
        """The offending part of the statement, as normalised."""
        self.sql = sql
        """The whole statement."""


@attrs.frozen
class Profile:
    """What one real server rejects and how it behaves: its rules, isolation and int typing."""

    name: str
    """The profile name (``cockroachdb``), as engines name it in ``emulation_profile``."""
    rules: tuple[Rule, ...]
    """Every construct the server rejects."""
    isolation: Isolation | None
    """The server's default isolation, forced on everything (None: leave PostgreSQL's)."""
    ints_as_text: bool = False
    """Hand integers in result rows back as ``str``, as the server's INT may reach a client."""

    def rule(self, rule_id: str) -> Rule:
        """The rule whose id is ``rule_id``."""
        for rule in self.rules:
            if rule.id == rule_id:
                return rule
        raise KeyError(f"profile {self.name!r} has no rule {rule_id!r}")

    def violation(
        self, sql: str, memory: dict[str, Memory] | None = None
    ) -> EmulationRejected | None:
        """The error for the first rule ``sql`` breaks, or None if the server would run it.

        ``memory`` is the current transaction's (None outside one): transaction-spanning rules
        read it, and it is extended only when the statement passes every rule.
        """
        updates: dict[str, Memory] = {}
        for rule in self.rules:
            if memory is not None and rule.track is not None:
                seen = set(memory.get(rule.id, ()))
                snippet = rule.track(sql, seen)
                updates[rule.id] = seen
            else:
                snippet = rule.check(sql)
            if snippet is not None:
                return EmulationRejected(self.name, rule, snippet, sql)
        if memory is not None:
            memory.update(updates)
        return None


_CRDB_COMPAT = "https://www.cockroachlabs.com/docs/stable/postgresql-compatibility"
_CRDB_LIMITS = "https://www.cockroachlabs.com/docs/stable/known-limitations"
_YB_COMPAT = (
    "https://docs.yugabyte.com/stable/explore/ysql-language-features/postgresql-compatibility/"
)
_YB_ISSUE = "https://github.com/yugabyte/yugabyte-db/issues/"
_CITUS_TREE = "https://github.com/citusdata/citus/blob/v13.2.2/src/backend/distributed/"
_CITUS_ROUTER = _CITUS_TREE + "planner/multi_router_planner.c"
_CITUS_PUSHDOWN = _CITUS_TREE + "planner/query_pushdown_planning.c"

COCKROACHDB = Profile(
    "cockroachdb",
    (
        Rule(
            "skip-locked",
            "FOR UPDATE … SKIP LOCKED is best-effort under SERIALIZABLE and degrades badly "
            "under contention",
            "https://github.com/cockroachdb/cockroach/issues/97135",
            _search(_SKIP_LOCKED),
            capability="skip_locked",
        ),
        Rule(
            "partitioning",
            "CockroachDB has no PostgreSQL declarative partitioning (PARTITION BY / PARTITION OF)",
            "https://www.cockroachlabs.com/docs/stable/partitioning",
            _search(_PARTITIONING),
            capability="table_partitioning",
        ),
        Rule(
            "deferrable",
            "CockroachDB has no DEFERRABLE constraints",
            "https://github.com/cockroachdb/cockroach/issues/31632",
            _search(_DEFERRABLE),
            capability="deferrable_constraints",
        ),
        Rule(
            "listen-notify",
            "CockroachDB has no LISTEN, NOTIFY or pg_notify",
            "https://github.com/cockroachdb/cockroach/issues/41522",
            _listen_notify,
            capability="listen_notify",
        ),
        Rule(
            "multi-mutation-cte",
            "CockroachDB refuses a statement that modifies one table more than once unless "
            "every modification is an INSERT without ON CONFLICT",
            _CRDB_LIMITS,
            _multi_mutation,
            capability="multi_mutation_cte",
        ),
        Rule(
            "covering-index",
            "CockroachDB has no INCLUDE (...) on indexes (it spells it STORING)",
            "https://www.cockroachlabs.com/docs/stable/create-index",
            _search(_INCLUDE),
            capability="covering_indexes",
        ),
        Rule(
            "advisory-locks",
            "CockroachDB's session advisory locks are stubs that always succeed and its "
            "transaction ones are new and unreliable",
            _CRDB_COMPAT,
            _search(_ADVISORY),
            capability="advisory_locks",
        ),
        Rule(
            "plpgsql",
            "CockroachDB's PL/pgSQL lacks PERFORM, EXECUTE, FOUND, GET DIAGNOSTICS, "
            "%TYPE/%ROWTYPE, query loops and DDL in functions: the engine defines none",
            "https://www.cockroachlabs.com/docs/stable/plpgsql",
            _plpgsql,
            capability="plpgsql",
        ),
        Rule(
            "ctid",
            "CockroachDB has no ctid system column (a row is found by its primary key)",
            _CRDB_COMPAT,
            _search(_CTID),
            capability="tuple_ids",
        ),
        Rule(
            "add-column-then-update",
            "CockroachDB cannot UPDATE a column in the transaction whose ALTER TABLE … ADD "
            "COLUMN added it (the schema change completes only after commit)",
            "https://www.cockroachlabs.com/docs/stable/online-schema-changes",
            _added_then_updated_in_one_text,
            _added_then_updated,
            capability="add_column_backfill",
        ),
        Rule(
            "on-conflict-expression",
            "CockroachDB takes only column lists as ON CONFLICT targets, no expressions",
            _CRDB_LIMITS,
            _on_conflict_expression,
        ),
        Rule(
            "triggers",
            "CockroachDB before v24.3 has no triggers, and its triggers need PL/pgSQL "
            "functions: the engine defines none",
            "https://www.cockroachlabs.com/docs/v24.2/postgresql-compatibility",
            _search(_TRIGGER),
        ),
    ),
    Isolation.SERIALIZABLE,
    ints_as_text=True,
)
"""CockroachDB: SERIALIZABLE by default, INT may reach the client as text."""

YUGABYTEDB = Profile(
    "yugabytedb",
    (
        Rule(
            "advisory-locks",
            "YugabyteDB has advisory locks only behind a flag in recent versions",
            _YB_ISSUE + "3642",
            _search(_ADVISORY),
            capability="advisory_locks",
        ),
        Rule(
            "partitioning",
            "declarative partitioning DDL in a transaction that also writes fails on "
            "YugabyteDB: use none",
            _YB_ISSUE + "21833",
            _search(_PARTITIONING),
            capability="table_partitioning",
        ),
        Rule(
            "listen-notify",
            "YugabyteDB has LISTEN/NOTIFY off by default",
            _YB_ISSUE + "1872",
            _listen_notify,
            capability="listen_notify",
        ),
        Rule(
            "deferrable-key",
            "YugabyteDB refuses DEFERRABLE on unique and primary keys (deferrable foreign "
            "keys work)",
            _YB_ISSUE + "1709",
            _deferrable_key,
            capability="deferrable_constraints",
        ),
        Rule(
            "alter-type",
            "YugabyteDB does not support ALTER TYPE",
            _YB_ISSUE + "1893",
            _search(_ALTER_TYPE),
        ),
        Rule(
            "lock-table",
            "YugabyteDB does not support LOCK TABLE",
            _YB_ISSUE + "5384",
            _search(_LOCK_TABLE),
        ),
        Rule(
            "ctid",
            "YugabyteDB rows have no PostgreSQL ctid (they are addressed by ybctid)",
            _YB_COMPAT,
            _search(_CTID),
            capability="tuple_ids",
        ),
        Rule(
            "xid-functions",
            "YugabyteDB has no PostgreSQL transaction ids: the txid_* / pg_current_xact_id "
            "and snapshot functions are unsupported",
            _YB_COMPAT,
            _search(_XID),
        ),
        Rule(
            "exclusion-constraint",
            "YugabyteDB does not support exclusion constraints (EXCLUDE)",
            _YB_ISSUE + "3944",
            _search(_EXCLUDE),
        ),
        Rule(
            "inheritance",
            "YugabyteDB does not support table inheritance (INHERITS)",
            _YB_ISSUE + "5956",
            _search(_INHERITS),
        ),
        Rule(
            "gist-index",
            "YugabyteDB has no GiST indexes",
            _YB_ISSUE + "1337",
            _search(_GIST),
        ),
        Rule(
            "two-phase-commit",
            "YugabyteDB does not support PREPARE TRANSACTION / COMMIT PREPARED (XA)",
            _YB_ISSUE + "11084",
            _search(_TWO_PHASE),
        ),
    ),
    Isolation.REPEATABLE_READ,
)
"""YugabyteDB: REPEATABLE READ by default."""


def citus_distributed(
    table: str = "job",
    column: str = "name",
    reference: tuple[str, ...] = (
        "queue",
        "supervisor",
        "schedule",
        "subscription",
        "job_dependency",
    ),
    feature: tuple[str, ...] = ("job_dependency", "job_blocked"),
    colocated: tuple[str, ...] = ("job_blocked",),
) -> Profile:
    """Citus with ``table`` distributed by ``column``, ``colocated`` tables distributed by
    the same column beside it, and ``reference`` tables replicated to every node (alkstore:
    ``job`` and the flows' ``job_blocked`` by queue ``name``, ``queue`` a reference table);
    ``feature`` names the tables of a feature whose own statements may spread beyond one
    shard (alkstore: the flows')."""
    citus_tables = frozenset({table, *reference, *colocated})
    return Profile(
        "citus-distributed",
        (
            Rule(
                "row-lock-filter",
                "Citus runs FOR UPDATE / SKIP LOCKED on a distributed table only in a query "
                "routed to one shard: one that filters on the distribution column",
                _CITUS_ROUTER,
                _row_lock_filter(table, column),
            ),
            Rule(
                "distribution-column-update",
                "Citus can never update a distributed table's distribution column",
                _CITUS_ROUTER,
                _distribution_update(table, column),
            ),
            Rule(
                "key-without-distribution-column",
                "Citus requires every primary or unique key of a distributed table to include "
                "the distribution column",
                _CITUS_TREE + "commands/create_distributed_table.c",
                _key_without_column(table, column),
            ),
            Rule(
                "triggers",
                "Citus runs no triggers on distributed tables unless "
                "citus.enable_unsafe_triggers is set: use none",
                _CITUS_TREE + "commands/trigger.c",
                _search(_TRIGGER),
                capability="row_triggers",
            ),
            Rule(
                "volatile-in-modification",
                "Citus refuses VOLATILE functions (random(), clock_timestamp(), "
                "gen_random_uuid(), nextval()…) anywhere in an UPDATE or DELETE of a Citus table",
                _CITUS_ROUTER,
                _volatile_in_modification(citus_tables),
            ),
            Rule(
                "stable-with-column",
                "Citus refuses a STABLE function or operator (timestamptz ± interval, "
                "date_trunc…) applied to a column in the SET values or WHERE of an UPDATE or "
                "DELETE of a Citus table",
                _CITUS_ROUTER,
                _stable_with_column_in_modification(citus_tables),
            ),
            Rule(
                "mutable-in-case",
                "Citus refuses a non-IMMUTABLE function (now(), current_timestamp…) inside "
                "CASE or COALESCE in the SET values or WHERE of an UPDATE or DELETE of a "
                "Citus table",
                _CITUS_ROUTER,
                _case_mutable_in_modification(citus_tables),
            ),
            Rule(
                "mutable-subquery-across-shards",
                "Citus plans an UPDATE or DELETE across shards for pushdown, which refuses a "
                'sub-SELECT without FROM holding a non-IMMUTABLE function ("Subqueries without '
                'a FROM clause can only contain immutable functions"; seen on a real cluster)',
                _CITUS_PUSHDOWN,
                _mutable_subquery_across_shards(table, column),
            ),
            Rule(
                "recursive-cte-across-shards",
                "Citus plans the CTEs of a statement not routed to one shard recursively, "
                'which refuses a recursive CTE ("recursive CTEs are only supported when they '
                'contain a filter on the distribution column"; seen on a real cluster): filter '
                "the modification on the distribution column too",
                _CITUS_TREE + "planner/recursive_planning.c",
                _recursive_cte_across_shards(table, column),
            ),
            Rule(
                "spread-from-one-shard",
                "a statement routed to one shard of the job table (an UPDATE or DELETE of one "
                "queue's jobs) that also changes jobs of other shards or writes a reference "
                "table runs as several tasks under Citus's shard locks, which serialise it with "
                "every other such statement of the cluster (measured on a real Citus 13.2.2 "
                "cluster: EXPLAIN Task Count 4 or 32 instead of 1; 6 jobs/s at 8 consumers); "
                "only a feature's own statements may (the flows')",
                _CITUS_TREE + "executor/distributed_execution_locks.c",
                _spread_from_one_shard(table, column, frozenset(reference), frozenset(feature)),
            ),
            Rule(
                "notify-from-one-shard",
                "Citus sends a statement routed to one shard of the job table whole to the "
                "worker holding that shard, so a pg_notify in it is sent there and reaches no "
                "listener of the coordinator (measured on a real Citus 13.2.2 cluster: 0 of 28 "
                "notifications of four such statements arrived): notify in a statement of its "
                "own",
                _CITUS_ROUTER,
                _notify_from_one_shard(table, column),
            ),
            Rule(
                "mutable-in-do-update",
                "Citus refuses non-IMMUTABLE functions in the DO UPDATE SET (or its WHERE) of an "
                "INSERT into a Citus table",
                _CITUS_ROUTER,
                _mutable_in_do_update(citus_tables),
            ),
            Rule(
                "void-cte-column",
                "Citus materialises the CTEs of a statement on its tables into intermediate "
                "results, which cannot hold a column of pseudo-type void (pg_notify's result; "
                "seen on a real cluster)",
                _CITUS_TREE + "planner/recursive_planning.c",
                _void_cte_column(citus_tables),
            ),
            Rule(
                "mutable-returning",
                "Citus refuses non-IMMUTABLE functions in the RETURNING clause of a "
                "modification of a Citus table",
                _CITUS_ROUTER,
                _mutable_returning(citus_tables),
            ),
            Rule(
                "partitioning",
                "the distributed engine keeps one job table (partitioned distributed tables "
                "add Citus limits the engine does not need)",
                "https://docs.citusdata.com/en/stable/develop/reference_ddl.html",
                _search(_PARTITIONING),
                capability="table_partitioning",
            ),
        ),
        None,
    )


CITUS_DISTRIBUTED = citus_distributed()
"""Citus with the job table distributed by queue name: PostgreSQL's isolation."""

PROFILES: dict[str, Profile] = {p.name: p for p in (COCKROACHDB, YUGABYTEDB, CITUS_DISTRIBUTED)}
"""Profile name -> profile, as engines name it in ``emulation_profile``."""


def rules_for(profile_name: str) -> list[Rule]:
    """The rules of the profile called ``profile_name`` (KeyError names the known ones)."""
    try:
        return list(PROFILES[profile_name].rules)
    except KeyError:
        raise KeyError(
            f"no emulation profile {profile_name!r}; known: {', '.join(sorted(PROFILES))}"
        ) from None
