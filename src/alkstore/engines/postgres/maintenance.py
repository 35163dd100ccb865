"""Maintenance: retention, deletion of finished jobs, and its timestamp."""

from __future__ import annotations

from ...core.plans import Plan, rowcount
from ...core.states import FINISHED, QUEUED
from .base import EngineBase
from .schema import in_list
from .sql import (
    seconds_after,
)


class MaintenanceMixin(EngineBase):
    """Plans of the periodic maintenance pass."""

    def remove_expired_retention(self) -> Plan[int]:
        """Delete queued jobs past ``keep_until``."""
        sql = f"""DELETE FROM {self.s}.job
            WHERE state IN {in_list(QUEUED)} AND keep_until < now() RETURNING id"""
        return self._single("retention", sql, (), rowcount)

    def delete_finished(self) -> Plan[int]:
        """Delete finished jobs past ``completed_on + deletion_seconds`` (0 keeps forever)."""
        sql = f"""DELETE FROM {self.s}.job
            WHERE state IN {in_list(FINISHED)} AND deletion_seconds > 0
              AND {seconds_after("completed_on", "deletion_seconds")} < now()
            RETURNING id"""
        return self._single("deletion", sql, (), rowcount)

    def mark_maintained(self) -> Plan[None]:
        """Record when maintenance last ran."""
        return self._single(
            "mark_maintained",
            f"UPDATE {self.s}.version SET maintained_on = now()",
            (),
            lambda _rows: None,
        )
