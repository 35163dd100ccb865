"""``wait``'s reads: a job's current row, marking it as waited for (schema version 6)."""

from __future__ import annotations

import hashlib
import uuid

from ...core.plans import Plan
from ...core.records import Job
from ...core.states import FINISHED
from .engine import PostgresEngine
from .schema import RESULT_CHANNEL, RESULT_CHANNEL_ROOM, in_list
from .sql import read_job_columns


def result_channel(engine: PostgresEngine) -> str:
    """The channel the schema's ``job_result`` trigger notifies (payload: a job id)."""
    schema = engine.schema
    if len(schema) <= RESULT_CHANNEL_ROOM:
        return RESULT_CHANNEL + schema
    return RESULT_CHANNEL + hashlib.md5(schema.encode(), usedforsecurity=False).hexdigest()


def watch_result(engine: PostgresEngine, queue: str, job_id: uuid.UUID) -> Plan[Job | None]:
    """The job as it is now (None: not in ``queue``), marked ``waited`` if it has not
    finished, so that its ``job_result`` trigger notifies when it does.

    A job whose row another transaction holds locked (a worker settling it) is not marked
    in this call: the read still returns it, and the waiter reads again later."""
    s = engine.s
    # A data-modifying CTE runs to completion even though the SELECT does not read it; the
    # SELECT sees the row as it was before (its state is what the UPDATE leaves).
    sql = f"""WITH marked AS (UPDATE {s}.job m SET waited = true
            WHERE m.name = $1 AND m.id = $2 AND m.waited IS NOT TRUE
              AND m.state NOT IN {in_list(FINISHED)}
              AND m.id IN (SELECT l.id FROM {s}.job l WHERE l.name = $1 AND l.id = $2
                           FOR UPDATE SKIP LOCKED)
            RETURNING m.id)
        SELECT {read_job_columns("j")} FROM {s}.job j WHERE j.name = $1 AND j.id = $2"""
    return engine._single(
        "watch_result",
        sql,
        (queue, job_id),
        lambda rows: Job.from_row(rows[0]) if rows else None,
    )
