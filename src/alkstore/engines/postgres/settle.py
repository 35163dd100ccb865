"""Settling: complete, touch, cancel, resume, retry, delete and read jobs.

The states each operation accepts come from the core's transition table
(:data:`~alkstore.core.states.TRANSITIONS`)."""

from __future__ import annotations

import functools
import uuid
from typing import Any

from ...core.plans import Plan, rowcount
from ...core.records import Job
from ...core.states import ACTIVE, QUEUED, Operation
from ...core.targets import Targets
from .base import EngineBase
from .runtime import notifying
from .schema import in_list
from .sql import (
    JOB_COLUMNS,
    accepted,
    count_of,
    fence,
    seconds_after,
    target_params,
    targets_sql,
)


def complete_update(s: str, targets_at: int, output: str, *, include_queued: bool = False) -> str:
    """The UPDATE of ``complete`` in schema ``s``: queue ``$1``, targets bound from
    ``$targets_at`` (``complete_and_fetch`` embeds it too); with ``include_queued``, queued
    jobs are completed as well as active ones."""
    states = in_list(ACTIVE | QUEUED) if include_queued else accepted(Operation.COMPLETE)
    return f"""UPDATE {s}.job j SET state = 'completed', completed_on = now(),
            output = {output}::text::jsonb
        FROM {targets_sql(targets_at)}
        WHERE j.name = $1 AND j.state IN {states} AND {fence()}
        RETURNING j.id"""


class SettleMixin(EngineBase):
    """Plans that move targeted jobs between states."""

    def _completing(self, include_queued: bool) -> str:
        # One count row instead of a row per completed job: a batch's ids are not read back.
        done = complete_update(self.s, 2, "$4", include_queued=include_queued)
        return f"WITH done AS ({done}) SELECT count(*) AS n FROM done"

    @functools.cached_property
    def _complete_sql(self) -> str:
        return self._completing(include_queued=False)

    @functools.cached_property
    def _complete_queued_sql(self) -> str:
        return self._completing(include_queued=True)

    def complete(
        self, queue: str, targets: Targets, output_json: str | None, include_queued: bool = False
    ) -> Plan[int]:
        """active (and with ``include_queued``, queued) -> completed, storing ``output``."""
        params = (queue, *target_params(targets), output_json)
        sql = self._complete_queued_sql if include_queued else self._complete_sql
        return self._single("complete", sql, params, count_of)

    def touch(self, queue: str, targets: Targets) -> Plan[int]:
        """Heartbeat: ``heartbeat_on = now()`` for active jobs."""
        sql = f"""UPDATE {self.s}.job j SET heartbeat_on = now()
            FROM {targets_sql(2)}
            WHERE j.name = $1 AND j.state IN {accepted(Operation.TOUCH)} AND {fence()}
            RETURNING j.id"""
        return self._single("touch", sql, (queue, *target_params(targets)), rowcount)

    def cancel(self, queue: str, targets: Targets) -> Plan[int]:
        """queued or active -> cancelled."""
        return self._set_state(
            Operation.CANCEL, queue, targets, "state = 'cancelled', completed_on = now()"
        )

    def resume(self, queue: str, targets: Targets) -> Plan[int]:
        """cancelled -> created: runnable now, or at a ``start_after`` still ahead (cancel +
        resume never skips a pending retry delay; ``keep_until`` moves with ``start_after``)."""
        resumed_at = "GREATEST(j.start_after, now())"
        return self._set_state(
            Operation.RESUME,
            queue,
            targets,
            f"state = 'created', completed_on = NULL, start_after = {resumed_at}, "
            f"keep_until = {seconds_after(resumed_at, 'j.retention_seconds')}",
            notify=True,
        )

    def retry(self, queue: str, targets: Targets) -> Plan[int]:
        """failed -> retry, granting one more attempt."""
        return self._set_state(
            Operation.RETRY,
            queue,
            targets,
            "state = 'retry', retry_limit = j.retry_limit + 1, completed_on = NULL, "
            "start_after = now(), "
            f"keep_until = {seconds_after('now()', 'j.retention_seconds')}",
            notify=True,
        )

    def _set_state(
        self,
        operation: Operation,
        queue: str,
        targets: Targets,
        change: str,
        *,
        notify: bool = False,
    ) -> Plan[int]:
        """``change`` the targets in a state ``operation`` accepts (the transition table's);
        with ``notify``, the jobs are runnable again: listening workers are woken."""
        sql = f"""UPDATE {self.s}.job j SET {change}
            FROM (SELECT DISTINCT id FROM unnest($2::uuid[]) AS u(id)) t
            WHERE j.name = $1 AND j.id = t.id AND j.state IN {accepted(operation)}
            RETURNING j.id"""
        params: tuple[Any, ...] = (queue, targets.ids)
        if notify:
            sql, params = notifying(self, sql, params, "$1::text")
        return self._single(operation.value, sql, params, rowcount)

    def delete_jobs(self, queue: str, targets: Targets) -> Plan[int]:
        """Delete jobs in any state."""
        sql = f"DELETE FROM {self.s}.job WHERE name = $1 AND id = ANY($2::uuid[]) RETURNING id"
        return self._single("delete_jobs", sql, (queue, targets.ids), rowcount)

    def get_job(self, queue: str, job_id: uuid.UUID) -> Plan[Job | None]:
        """One job, or None."""
        return self._single(
            "get_job",
            f"SELECT {JOB_COLUMNS} FROM {self.s}.job WHERE name = $1 AND id = $2::uuid",
            (queue, job_id),
            lambda rows: Job.from_row(rows[0]) if rows else None,
        )
