"""The raw-SQL ceiling with a gated claim: claims of one queue serialised by an advisory lock.

Every row-per-job ``SKIP LOCKED`` claim walks past the rows the other in-flight claims hold,
so its cost grows with the number of fetchers (docs/benchmarks.md, "Claim scaling"). Here
the claim is a plpgsql function that first takes an advisory lock of the queue (the gate)
and only then runs the ceiling's claim: in READ COMMITTED each statement of a volatile
function takes its own snapshot, so the claim's snapshot is taken after the gate is held
and sees every earlier claim committed (no walk over rows another claim holds, no
re-check of rows updated after the snapshot). One round trip per claim.

Three gates are measured side by side:

- ``raw-sql-gated``: ``pg_advisory_xact_lock``, held until the claim commits (one claim of
  the queue in flight at a time, its commit included);
- ``raw-sql-gated-early``: a session lock released as the claim's UPDATE returns, before
  the commit: the next claim runs while this one commits, and skips (``SKIP LOCKED``) at
  most the rows of the claims still committing;
- ``raw-sql-gated-k4``: four slots (``pg_try_advisory_xact_lock`` over them, then a wait on
  one): at most four claims in flight, so a claim walks past at most three others' rows.
"""

from __future__ import annotations

from ...engines.postgres.identifiers import quote_schema
from ..progress import Progress
from ..results import DrainResult
from .rawsql import Statements, claim_ids, drain_with, unavailable, versions
from .spec import DrainSpec

NAME = "raw-sql-gated"
EARLY = "raw-sql-gated-early"
SLOTS = "raw-sql-gated-k4"
GATE_KEY = 733_001
"""The advisory lock key of the bench queue's gate (slots: the next keys)."""
SLOT_COUNT = 4


class GatedStatements(Statements):
    """The ceiling's SQL with the claim behind a gate of kind ``gate``."""

    def __init__(self, schema: str, gate: str) -> None:
        super().__init__(schema)
        s = quote_schema(schema)
        claim = f"""UPDATE {s}.job j SET state = 'active'
                WHERE j.id IN (SELECT q.id FROM {s}.job q WHERE q.state = 'queued'
                               ORDER BY q.id LIMIT n FOR UPDATE SKIP LOCKED)
                RETURNING j.id, j.data"""
        body = {
            NAME: f"""PERFORM pg_advisory_xact_lock({GATE_KEY});
                RETURN QUERY {claim};""",
            EARLY: f"""PERFORM pg_advisory_lock({GATE_KEY});
                RETURN QUERY {claim};
                PERFORM pg_advisory_unlock({GATE_KEY});""",
            SLOTS: f"""FOR slot IN 0..{SLOT_COUNT - 1} LOOP
                    IF pg_try_advisory_xact_lock({GATE_KEY} + slot) THEN
                        RETURN QUERY {claim};
                        RETURN;
                    END IF;
                END LOOP;
                PERFORM pg_advisory_xact_lock({GATE_KEY} + pg_backend_pid() % {SLOT_COUNT});
                RETURN QUERY {claim};""",
        }[gate]
        self.create = (
            *self.create,
            f"""CREATE FUNCTION {s}.claim(n int) RETURNS TABLE (id bigint, data jsonb)
                LANGUAGE plpgsql VOLATILE AS $$
                DECLARE slot int;
                BEGIN
                {body}
                END $$""",
        )
        self.claim = f"SELECT id, data FROM {s}.claim($1)"


def _drain(gate: str, dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    return drain_with(dsn, spec, schema, progress, gate, GatedStatements(schema, gate), claim_ids)


def drain(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    """The drain with one claim of the queue in flight, its commit included."""
    return _drain(NAME, dsn, spec, schema, progress)


def drain_early(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    """The drain with the gate released before each claim commits."""
    return _drain(EARLY, dsn, spec, schema, progress)


def drain_slots(dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> DrainResult:
    """The drain with up to :data:`SLOT_COUNT` claims in flight."""
    return _drain(SLOTS, dsn, spec, schema, progress)


__all__ = [
    "EARLY",
    "NAME",
    "SLOTS",
    "GatedStatements",
    "drain",
    "drain_early",
    "drain_slots",
    "unavailable",
    "versions",
]
