"""``purge_jobs``' batches: delete a queue's jobs by state (docs/cli.md, "purge").

Each batch is one transaction: one ``DELETE`` of at most ``batch_size`` rows that re-checks
the state of the rows it deletes, so a job that left the listed states since (fetched,
settled) stays, and that counts the deleted rows' events the counters have not reached yet
(:func:`.counters.counted_delete`). The store runs batches until one deletes nothing: a
purge of millions of rows holds no lock for long and leaves no transaction open, and what a
failed batch leaves undeleted is left whole.
"""

from __future__ import annotations

from ...core.errors import QueueNotFound
from ...core.plans import Plan, Statement, Steps
from ...core.states import JobState
from .base import EngineBase
from .counters import DELETED_COLUMNS, counted_delete


def purge_batch(
    engine: EngineBase, queue: str, states: frozenset[JobState], batch_size: int
) -> Plan[int]:
    """Delete at most ``batch_size`` jobs of ``queue`` in ``states``, counted; how many.
    :class:`QueueNotFound` for an unknown queue."""
    s = engine.s
    names = sorted(state.value for state in states)
    # counted_delete binds its own parameters first: this statement's start at $4.
    delete = f"""DELETE FROM {s}.job WHERE name = $4 AND state = ANY($5::text[]) AND id IN (
            SELECT id FROM {s}.job WHERE name = $4 AND state = ANY($5::text[]) LIMIT $6)
        RETURNING {DELETED_COLUMNS}"""
    counted = counted_delete(engine, "purge_batch", delete, (queue, names, batch_size))

    def steps() -> Steps[int]:
        found = yield Statement(f"SELECT name FROM {s}.queue WHERE name = $1", (queue,))
        if not found:
            raise QueueNotFound(queue)
        return (yield from counted.steps())

    return engine._plan("purge_batch", steps, transaction=True)
