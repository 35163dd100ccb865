"""The raw-SQL ceiling's two statements on layouts from its own to alkstore's job table.

Each variant changes one thing of the ceiling (:mod:`.rawsql`) towards alkstore's layout and
keeps its two statements (a ``SKIP LOCKED`` claim of ids that returns the payloads, a
completion by ids), so that the steps between them say what the layout costs apart from
what alkstore's statements do (docs/benchmarks.md, "The ceiling gap, layer by layer"):

- ``raw-sql-keyed``: the key is alkstore's, ``(name text, id uuid)`` with UUIDv7 ids, the
  queued index ``(name, id)``;
- ``raw-sql-ordered``: the claim also takes alkstore's order and due check: ``priority``,
  ``created_on`` and ``start_after`` columns, the queued index alkstore's ``job_fetch``;
- ``raw-sql-job-table``: the claim and completion of ``raw-sql-ordered`` on alkstore's own
  job table, made by its migrations (every column, every index, the partition).
"""

from __future__ import annotations

from ...engines.postgres.engine import POSTGRES
from ...engines.postgres.identifiers import quote_schema
from ...engines.postgres.new_ids import NEW_ID
from ...engines.postgres.schema import MIGRATIONS
from ..progress import Progress
from ..results import DrainResult
from .rawsql import Statements, claim_ids, drain_with, unavailable, versions
from .spec import DrainSpec

QUEUED = "('created', 'retry')"
"""alkstore's queued states, as the variants' claims select them."""


class KeyedStatements(Statements):
    """The ceiling on alkstore's key: ``(name, id)``, a UUIDv7 id, claimed in id order."""

    table = """CREATE TABLE {s}.job (id uuid NOT NULL, name text NOT NULL,
        state text NOT NULL DEFAULT 'created', data jsonb, PRIMARY KEY (name, id))"""
    """The table, ``{s}`` the quoted schema."""
    queued_index = "CREATE INDEX job_queued ON {s}.job (name, id) WHERE state IN " + QUEUED
    """The index the claim walks."""
    order = "id"
    """The claim's order."""
    due = ""
    """The claim's condition besides the state."""

    def __init__(self, schema: str) -> None:
        super().__init__(schema)
        s = quote_schema(schema)
        self.create = (self.table.format(s=s), self.queued_index.format(s=s))
        # {s} is quoted by quote_schema; every value is a bound parameter.
        self.insert = f"""INSERT INTO {s}.job (id, name, data)
            SELECT {NEW_ID}, 'q', d::jsonb FROM unnest($1::text[]) d"""
        self.claim = f"""UPDATE {s}.job SET state = 'active'
            WHERE name = 'q' AND id IN (SELECT id FROM {s}.job
                WHERE name = 'q' AND state IN {QUEUED}{self.due}
                ORDER BY {self.order} LIMIT $1 FOR UPDATE SKIP LOCKED)
            RETURNING id, data"""
        self.complete = f"""UPDATE {s}.job SET state = 'completed'
            WHERE name = 'q' AND id = ANY($1::uuid[])"""
        self.complete_all = f"UPDATE {s}.job SET state = 'completed' WHERE state IN {QUEUED}"


class OrderedStatements(KeyedStatements):
    """Keyed, and claimed in alkstore's order among the jobs that are due, from an index
    like alkstore's ``job_fetch``."""

    table = """CREATE TABLE {s}.job (id uuid NOT NULL, name text NOT NULL,
        priority int NOT NULL DEFAULT 0, state text NOT NULL DEFAULT 'created', data jsonb,
        start_after timestamptz NOT NULL DEFAULT now(),
        created_on timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (name, id))"""
    queued_index = (
        "CREATE INDEX job_fetch ON {s}.job (name, priority DESC, created_on, id) "
        "INCLUDE (start_after) WHERE state IN " + QUEUED
    )
    order = "priority DESC, created_on, id"
    due = " AND start_after <= now()"


class JobTableStatements(OrderedStatements):
    """The ordered claim on alkstore's job table, as its migrations make it."""

    def __init__(self, schema: str) -> None:
        super().__init__(schema)
        s = quote_schema(schema)
        caps = POSTGRES.capabilities
        self.create = tuple(
            sql for version in sorted(MIGRATIONS) for sql in MIGRATIONS[version](s, caps)
        )
        self.insert = f"""INSERT INTO {s}.job (id, name, data, retry_limit, retry_delay,
                retry_backoff, expire_seconds, retention_seconds, deletion_seconds, keep_until)
            SELECT {NEW_ID}, 'q', d::jsonb, 2, 0, false, 900, 1209600, 604800,
                now() + interval '1209600 seconds'
            FROM unnest($1::text[]) d"""


def drain_keyed(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    """The ceiling on alkstore's key."""
    statements = KeyedStatements(schema)
    return drain_with(dsn, spec, schema, progress, "raw-sql-keyed", statements, claim_ids)


def drain_ordered(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    """The ceiling on alkstore's key and order."""
    statements = OrderedStatements(schema)
    return drain_with(dsn, spec, schema, progress, "raw-sql-ordered", statements, claim_ids)


def drain_job_table(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    """The ceiling's statements, ordered, on alkstore's job table."""
    statements = JobTableStatements(schema)
    return drain_with(dsn, spec, schema, progress, "raw-sql-job-table", statements, claim_ids)


__all__ = [
    "JobTableStatements",
    "KeyedStatements",
    "OrderedStatements",
    "drain_job_table",
    "drain_keyed",
    "drain_ordered",
    "unavailable",
    "versions",
]
