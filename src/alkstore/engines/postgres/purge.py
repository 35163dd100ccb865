"""``purge_jobs``: delete a queue's jobs by state, in batches (docs/cli.md, "purge").

Each batch is one ``DELETE`` of at most ``batch_size`` rows that re-checks the state of the
rows it deletes, so a job that left the listed states since (fetched, settled) stays. The
batches commit one by one: a purge of millions of rows holds no lock for long and leaves no
transaction open; what a failed batch leaves undeleted is left whole (each batch is one
statement).
"""

from __future__ import annotations

from ...core.errors import QueueNotFound
from ...core.plans import Plan, Statement, Steps
from ...core.states import JobState
from .base import EngineBase


def purge_jobs(
    engine: EngineBase, queue: str, states: frozenset[JobState], batch_size: int
) -> Plan[int]:
    """Delete the jobs of ``queue`` in ``states``, ``batch_size`` rows per statement; how
    many. :class:`QueueNotFound` for an unknown queue."""
    s = engine.s
    names = sorted(state.value for state in states)
    batch = f"""WITH gone AS (
            DELETE FROM {s}.job WHERE name = $1 AND state = ANY($2::text[]) AND id IN (
                SELECT id FROM {s}.job WHERE name = $1 AND state = ANY($2::text[]) LIMIT $3)
            RETURNING 1)
        SELECT count(*) AS n FROM gone"""

    def steps() -> Steps[int]:
        found = yield Statement(f"SELECT name FROM {s}.queue WHERE name = $1", (queue,))
        if not found:
            raise QueueNotFound(queue)
        total = 0
        while True:
            (row,) = yield Statement(batch, (queue, names, batch_size))
            deleted = int(row["n"])  # an INT8 some servers' drivers read as text
            total += deleted
            if deleted < batch_size:
                return total

    return engine._plan("purge_jobs", steps)
