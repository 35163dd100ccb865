"""Per-queue job counters: how many jobs were sent, completed, failed, retried, expired and
dead-lettered since the counters began (docs/dashboard.md, "Counters").

Engines count off the hot path: maintenance tallies the events recorded in the jobs' own
timestamps up to a watermark, so no send, fetch or settle writes a shared counter row.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable

import attrs

from .plans import Row
from .records import as_int

EVENTS = ("sent", "completed", "failed", "retried", "expired", "dead_lettered")
"""The counted events, in the order of :class:`QueueCounters`' fields."""


@attrs.frozen
class QueueCounters:
    """The events one queue has counted (each never decreases).

    ``retried``: failed attempts that were retried; ``expired``: attempts failed by the
    maintenance pass because they ran past ``expire_seconds`` or their heartbeat;
    ``dead_lettered``: failed jobs whose copy went to a dead-letter queue (counted for the
    queue the job failed in).
    """

    sent: int = 0
    completed: int = 0
    failed: int = 0
    retried: int = 0
    expired: int = 0
    dead_lettered: int = 0

    def plus(self, other: QueueCounters) -> QueueCounters:
        """Both counts added, event by event."""
        return QueueCounters(*(getattr(self, e) + getattr(other, e) for e in EVENTS))

    def empty(self) -> bool:
        """Whether no event is counted."""
        return not any(getattr(self, e) for e in EVENTS)

    @classmethod
    def from_row(cls, row: Row) -> QueueCounters:
        """From a row with one column per event."""
        return cls(*(as_int(row[e]) for e in EVENTS))


@attrs.frozen
class Counters:
    """Every queue's counters, and the time they count up to."""

    queues: dict[str, QueueCounters]
    """Queue name -> its counters (a queue with nothing counted yet may be absent)."""
    counted_until: dt.datetime | None
    """Events before this moment are counted (None: no pass has counted yet)."""


def summed(rows: Iterable[Row]) -> dict[str, QueueCounters]:
    """Rows of ``(queue, <one column per event>)`` summed per queue, empty sums left out."""
    total: dict[str, QueueCounters] = {}
    for row in rows:
        queue = row["queue"]
        total[queue] = total.get(queue, QueueCounters()).plus(QueueCounters.from_row(row))
    return {queue: counts for queue, counts in total.items() if not counts.empty()}
