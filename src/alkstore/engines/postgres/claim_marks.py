"""Where a plain claim starts its ordered walk of the queued jobs: a mark per queue.

Under a held MVCC horizon (a session idle in a transaction, a long REPEATABLE READ report)
no dead job version can be removed, and the claimed jobs' entries stay in the claim's index
(``job_fetch``) with their heap versions. A walk from the start of the queue visits every one
of them on every claim: measured at 800 jobs/s through a 120 s hold, the claim's p50 grew
from 3 to 96 ms, and stayed at 3-4 ms with the mark (docs/benchmarks.md, "Horizon
pressure").

The first job a claim returns is the lowest key that was claimable when it ran: every queued
row below it was dead, locked by a concurrent claim, not yet due, or not yet committed. The
next claims of this engine start their walk there. Rows that become claimable below a mark
later -- a retry or a delayed job coming due, a job of a higher priority, a send whose
transaction committed late, a claim rolled back -- are found by the full walk each queue gets
at least every :data:`REWALK_SECONDS` (a job of a higher priority than the mark's is found
by every claim: the claim walks the higher priorities from the start). Such a job waits at
most that long behind jobs after it. This engine's own operations that can put a job below
a mark (any but sending, fetching, completing a job without flows, touching and reading)
make its next claims walk from the start (:data:`KEEPS_MARKS`).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid

import attrs

from ...core.records import Job

Key = tuple[int, dt.datetime, uuid.UUID]
"""A job's place in fetch order: (-priority, created_on, id), ascending."""

FLOOR: Key = (-(2**31), dt.datetime.min.replace(tzinfo=dt.UTC), uuid.UUID(int=0))
"""Below every job's key: a claim from here walks the whole queue."""

KEEPS_MARKS = frozenset(
    {
        "fetch",
        "complete",
        "complete_and_fetch",
        "send",
        "touch",
        "get_job",
        "find_jobs",
        "list_jobs",
        "search_jobs",
        "queues",
        "get_queue",
        "queue_stats",
        "schema_version",
        "check_version",
        "subscriptions",
        "schedules",
    }
)
"""The plans that cannot put a job below a mark -- but ``complete`` can, once this engine has
made flows: a completion may release flow jobs, whose places are those of their creation."""

REWALK_SECONDS = 1.0
"""How often, at least, a queue's claims walk it from the start."""


def key_of(job: Job) -> Key:
    """``job``'s place in fetch order."""
    return (-job.priority, job.created_on, job.id)


@attrs.define
class _Mark:
    key: Key
    walked: float
    """``time.monotonic()`` of the last claim that walked from :data:`FLOOR`."""


class ClaimMarks:
    """The marks of one engine instance: plain Python state shared by its fetchers."""

    def __init__(self, rewalk_seconds: float = REWALK_SECONDS) -> None:
        self._marks: dict[str, _Mark] = {}
        self._rewalk = rewalk_seconds
        self._flows = False

    def before(self, operation: str) -> None:
        """Called as the engine builds the plan of ``operation``: one that may put a job
        below a mark (:data:`KEEPS_MARKS`) makes the next claims walk from the start."""
        if operation == "flow":
            self._flows = True
        if operation not in KEEPS_MARKS or (operation == "complete" and self._flows):
            self.clear()

    def start(self, queue: str) -> Key:
        """Where the next claim of ``queue`` starts its walk: one claim a period walks from
        the start, the others keep walking from the mark meanwhile (each walk from the
        start is the one that still visits the dead versions)."""
        now = time.monotonic()
        mark = self._marks.get(queue)
        if mark is None:
            self._marks[queue] = _Mark(FLOOR, now)
            return FLOOR
        if now - mark.walked >= self._rewalk:
            mark.walked = now
            return FLOOR
        return mark.key

    def advance(self, queue: str, started: Key, jobs: list[Job]) -> None:
        """After a claim from ``started`` returned ``jobs`` (in fetch order): the next walk
        starts at the first of them -- unless a claim from lower down moved the mark below
        ``started`` meanwhile (it found claimable jobs there)."""
        mark = self._marks.get(queue)
        if jobs and mark is not None and started <= mark.key:
            mark.key = key_of(jobs[0])

    def forget(self, queue: str) -> None:
        """The next claim of ``queue`` walks it from the start."""
        self._marks.pop(queue, None)

    def clear(self) -> None:
        """The next claim of every queue walks it from the start."""
        self._marks.clear()
