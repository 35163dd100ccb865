"""Maintenance: retention, deletion of finished jobs (both counted, see :mod:`.counters`),
and its timestamp."""

from __future__ import annotations

from ...core.plans import Plan, Statement, Steps
from ...core.states import FINISHED, QUEUED
from .base import EngineBase
from .counters import DELETED_COLUMNS, counted_delete
from .schema import RETENTION_BOUND, in_list
from .sql import (
    seconds_after,
)


class MaintenanceMixin(EngineBase):
    """Plans of the periodic maintenance pass."""

    def remove_expired_retention(self) -> Plan[int]:
        """Delete queued jobs past ``keep_until``."""
        # RETENTION_BOUND, implied by "keep_until < now()" but only stated does the planner
        # see that job_retention's predicate holds.
        sql = f"""DELETE FROM {self.s}.job
            WHERE state IN {in_list(QUEUED)} AND keep_until < now() AND {RETENTION_BOUND}
            RETURNING {DELETED_COLUMNS}"""
        return counted_delete(self, "retention", sql, ())

    def delete_finished(self) -> Plan[int]:
        """Delete finished jobs past ``completed_on + deletion_seconds`` (0 keeps forever)."""
        sql = f"""DELETE FROM {self.s}.job
            WHERE state IN {in_list(FINISHED)} AND deletion_seconds > 0
              AND {seconds_after("completed_on", "deletion_seconds")} < now()
            RETURNING {DELETED_COLUMNS}"""
        return counted_delete(self, "deletion", sql, ())

    def release_flows(self) -> Plan[int]:
        """Release the queued flow jobs no parent holds any more but that still wait (a job
        finished while it waited stays as it is): left by a crash
        between the two statements of a completion where the engine changes a table only
        once per statement (see ``SettleMixin._complete_steps``)."""
        # Two statements, not a COALESCE of the two starts: sharded Citus refuses now() inside
        # COALESCE in an UPDATE of a distributed table.
        starts = (
            ("b.start_at IS NOT NULL", "b.start_at"),
            ("b.start_at IS NULL", seconds_after("now()", "coalesce(b.delay, 0)")),
        )
        sqls = [
            f"""UPDATE {self.s}.job j SET start_after = {start},
                keep_until = {seconds_after(start, "j.retention_seconds")}
            FROM {self.s}.job_blocked b
            WHERE b.waiting = 0 AND {which} AND j.name = b.name AND j.id = b.id
              AND j.start_after = 'infinity' AND j.state IN {in_list(QUEUED)}
            RETURNING j.id"""
            for which, start in starts
        ]

        def steps() -> Steps[int]:
            released = 0
            for sql in sqls:
                released += len((yield Statement(sql)))
            return released

        return self._plan("release_flows", steps)

    def mark_maintained(self) -> Plan[None]:
        """Record when maintenance last ran."""
        return self._single(
            "mark_maintained",
            f"UPDATE {self.s}.version SET maintained_on = now()",
            (),
            lambda _rows: None,
        )
