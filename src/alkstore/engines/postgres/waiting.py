"""``wait``'s reads: a job's current row, marking it as waited for (schema version 6) —
the engine contract's :class:`~alkstore.core.contracts.ResultWatch`."""

from __future__ import annotations

import hashlib
import uuid

from ...core.plans import Plan
from ...core.records import Job
from ...core.states import FINISHED, QUEUED
from .base import EngineBase
from .runtime import channel, unflushed
from .schema import RESULT_CHANNEL, RESULT_CHANNEL_ROOM, in_list
from .sql import read_job_columns


def result_channel(engine: EngineBase) -> str:
    """The channel the statements that finish a waited-for job notify (payload: its id;
    ``result_note``, schema version 15)."""
    schema = engine.schema
    if len(schema) <= RESULT_CHANNEL_ROOM:
        return RESULT_CHANNEL + schema
    return RESULT_CHANNEL + hashlib.md5(schema.encode(), usedforsecurity=False).hexdigest()


def watch_result(engine: EngineBase, queue: str, job_id: uuid.UUID) -> Plan[Job | None]:
    """The job as it is now (None: not in ``queue``), marked ``waited`` if it has not
    finished, so that the statement that finishes it notifies (:func:`~.sql.result_note`).

    Marking locks the job's row for a moment, and a claim skips a locked row: so marking a
    queued job also notifies the schema's wake-up channel (payload: the queue), and a worker
    whose claim skipped it fetches again. The mark commits without waiting for its WAL flush
    (a crash can only lose the mark, and then a notification: the wait reads again anyway),
    which keeps that moment short. A job whose row another transaction holds locked (a
    worker claiming or settling it) is not marked in this call: the read still returns it,
    and the waiter reads again later."""
    s = engine.s
    # A data-modifying CTE runs to completion whether or not it is read; ``note`` is read
    # (by the scalar subquery) so that it runs. The SELECT sees the row as it was before the
    # UPDATE, whose only change is the mark.
    sql = f"""WITH marked AS (UPDATE {s}.job m SET waited = true
            WHERE m.name = $1 AND m.id = $2 AND m.waited IS NOT TRUE
              AND m.state NOT IN {in_list(FINISHED)}
              AND m.id IN (SELECT l.id FROM {s}.job l WHERE l.name = $1 AND l.id = $2
                           FOR UPDATE SKIP LOCKED)
            RETURNING m.name, m.state),
        note AS (SELECT pg_notify($3::text, m.name) IS NULL AS sent
                 FROM marked m WHERE m.state IN {in_list(QUEUED)})
        SELECT {read_job_columns("j")}, (SELECT count(*) FROM note) AS noted
        FROM {s}.job j WHERE j.name = $1 AND j.id = $2"""
    plan = engine._single(
        "watch_result",
        sql,
        (queue, job_id, channel(engine)),
        lambda rows: Job.from_row(rows[0]) if rows else None,
    )
    return unflushed(engine, plan)


class WaitingMixin(EngineBase):
    """:class:`~alkstore.core.contracts.ResultWatch` on the notes of the statements that
    finish jobs (:func:`~.sql.result_note`)."""

    def result_channel(self) -> str:
        """See :func:`result_channel`."""
        return result_channel(self)

    def watch_result(self, queue: str, job_id: uuid.UUID) -> Plan[Job | None]:
        """See :func:`watch_result`."""
        return watch_result(self, queue, job_id)
