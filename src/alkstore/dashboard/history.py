"""Queue counts sampled over time, for the throughput chart of the queues page.

The store keeps no history of its own, so the dashboard samples ``queue_stats`` every
``interval`` seconds while it runs and charts the change between samples: jobs completed
and failed per interval (a negative change, from retention removing jobs, counts as 0).
"""

from __future__ import annotations

import collections
import datetime as dt
import itertools

import attrs

from alkstore.core.records import QueueStats
from alkstore.core.states import JobState


@attrs.frozen
class Sample:
    """One queue's counts at one moment."""

    at: dt.datetime
    completed: int
    failed: int
    queued: int


@attrs.frozen
class Point:
    """One interval of the chart: what finished between two samples, and the backlog after."""

    at: dt.datetime
    completed: int
    failed: int
    queued: int


class History:
    """The last ``size`` samples of every queue."""

    def __init__(self, size: int = 60) -> None:
        self._samples: dict[str, collections.deque[Sample]] = {}
        self._size = size

    def record(self, stats: QueueStats, at: dt.datetime) -> None:
        """Add a sample of ``stats`` taken at ``at``."""
        samples = self._samples.setdefault(stats.queue, collections.deque(maxlen=self._size))
        samples.append(
            Sample(
                at=at,
                completed=stats.counts[JobState.COMPLETED],
                failed=stats.counts[JobState.FAILED],
                queued=stats.queued,
            )
        )

    def points(self, queue: str) -> list[Point]:
        """The intervals between ``queue``'s samples, oldest first."""
        samples = list(self._samples.get(queue, ()))
        return [
            Point(
                at=after.at,
                completed=max(0, after.completed - before.completed),
                failed=max(0, after.failed - before.failed),
                queued=after.queued,
            )
            for before, after in itertools.pairwise(samples)
        ]


@attrs.frozen
class Chart:
    """The throughput sparkline of one queue, in SVG coordinates: the plot spans
    ``LEFT..LEFT + width`` across and ``TOP..TOP + height`` down, between a y axis labelled
    0 and ``top`` (jobs per interval) and an x axis labelled with the first and last
    sample's time."""

    completed: str
    """The ``points`` of the completed line."""
    failed: str
    """The ``points`` of the failed line."""
    top: int
    """The y axis' highest value."""
    start: dt.datetime
    end: dt.datetime
    width: int
    height: int


LEFT = 30
"""Room left of the plot for the y axis' labels."""
TOP = 4
"""Room above the plot (the top label's upper half)."""


def chart(points: list[Point], *, width: int = 240, height: int = 40) -> Chart | None:
    """The sparkline of completed and failed jobs per interval, scaled to ``width`` x
    ``height``; None without two points."""
    if len(points) < 2:
        return None
    top = max(1, *(p.completed for p in points), *(p.failed for p in points))
    step = width / (len(points) - 1)

    def line(values: list[int]) -> str:
        return " ".join(
            f"{LEFT + i * step:.1f},{TOP + height - v * height / top:.1f}"
            for i, v in enumerate(values)
        )

    return Chart(
        completed=line([p.completed for p in points]),
        failed=line([p.failed for p in points]),
        top=top,
        start=points[0].at,
        end=points[-1].at,
        width=width,
        height=height,
    )
