"""Where a plain claim starts its ordered walk of the queued jobs: a mark per queue, engaged
only while walking from it pays.

Under a held MVCC horizon (a session idle in a transaction, a long REPEATABLE READ report)
no dead job version can be removed, and the claimed jobs' entries stay in the claim's index
(``job_fetch``) with their heap versions. A walk from the head of the queue visits every one
of them on every claim: measured, the claim's latency grew linearly with the hold until the
queue fell behind (docs/benchmarks.md, "Horizon pressure").

The first job a claim returns is the first key that was claimable when it ran: every queued
row before it was dead, locked by a concurrent claim, not yet due, or not yet committed. An
engaged mark makes the next claims of this engine start their walk there. Rows that become
claimable before a mark later -- a retry or a delayed job coming due, a send whose
transaction committed late, a claim rolled back -- are found by the walk from the head that
one claim of each queue makes every :data:`REWALK_SECONDS`, or less often while that walk is
slow (a job of a higher priority than the mark's is found by every claim: the claim walks the
higher priorities from their head). Such a job waits at most that long behind jobs after it.

The walk from the head is the one claim that still visits every dead version: under a held
horizon it grows with the hold (measured: 200 ms a walk at 130,000 dead versions), so the
next one waits :data:`REWALK_SHARE` times as long as the last one took, at least
:data:`REWALK_SECONDS`; the walks from the head then cost at most 1/``REWALK_SHARE`` of one
connection's time. This engine's own operations that can put a job before a mark
(any but those of :data:`KEEPS_MARKS`) make its next claims walk from the head.

Without a held horizon a walk from the head costs what a walk from the mark costs (the index
entries of claimed jobs are soon flagged dead, skipped without a heap visit, and removed),
and the claim from a mark costs more: its statement walks three ranges of the index, which
the server parses and plans at every claim where statements are not prepared (measured:
0.2-0.3 ms a claim; docs/benchmarks.md). So a queue's mark is engaged only while it pays:
every claim reports the server's time for its statement (``took``); while the mark is not
engaged the claims walk from the head and one claim every :data:`PROBE_SECONDS` walks from
the mark; the mark engages when the last claims from the head take longer than those from
the mark, and disengages when a walk from the head no longer does, by the rule of
:class:`.claim_switch.Switch`.
"""

from __future__ import annotations

import datetime as dt
import time
import uuid

import attrs

from ...core.records import Job
from .claim_switch import Switch

Key = tuple[int, dt.datetime, uuid.UUID]
"""A job's place in fetch order as the claim binds it: (priority, created_on, id), the
priority descending, the rest ascending."""

HEAD: Key = (2**31 - 1, dt.datetime.min.replace(tzinfo=dt.UTC), uuid.UUID(int=0))
"""Before every job's key (the highest priority a job can have, the earliest time, the least
id): a claim from here walks the whole queue."""

KEEPS_MARKS = frozenset(
    {
        "fetch",
        "complete",
        "complete_and_fetch",
        "send",
        "touch",
        "watch",
        "claim_pass",
        "record_process",
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
        "retention",
        "deletion",
        "mark_maintained",
        "count_events",
        "counters",
        "counters_horizon",
        "forget_process",
    }
)
"""The plans that cannot put a job before a mark -- but ``complete`` can, once this engine
has made flows: a completion may release flow jobs, whose places are those of their
creation."""

CLEARS_WHEN_CHANGED = frozenset({"expire", "expire_heartbeats", "release_flows"})
"""The maintenance pass's plans that return how many jobs they put back in the queue: the
claims walk from the head after one that put any (a worker runs a pass every second, and
most put none)."""

REWALK_SECONDS = 1.0
"""How often, at most, one claim of a queue walks it from the head."""

REWALK_SHARE = 20.0
"""The time between two walks from the head, in multiples of the last one's duration (when
that is longer than :data:`REWALK_SECONDS`)."""

PROBE_SECONDS = 1.0
"""How often, at most, one claim of a queue whose mark is not engaged walks from the mark (to
learn what a walk from the mark takes)."""


def key_of(job: Job) -> Key:
    """``job``'s place in fetch order."""
    return (job.priority, job.created_on, job.id)


def _order(key: Key) -> tuple[int, dt.datetime, int]:
    """``key`` as a tuple that compares in fetch order."""
    priority, created_on, job_id = key
    return (-priority, created_on, job_id.int)


@attrs.define
class _Mark:
    due: float
    """``time.monotonic()`` from which the next claim walks from :data:`HEAD` (engaged), or
    from the mark (not engaged: a probe)."""
    key: Key = HEAD
    walking: float | None = None
    """``time.monotonic()`` at which the walk from the head under way began (engaged)."""
    switch: Switch = attrs.Factory(Switch)
    """Whether the claims walk from the mark (engaged): off, from the head."""


class ClaimMarks:
    """The marks of one engine instance: plain Python state shared by its fetchers."""

    def __init__(
        self,
        rewalk_seconds: float = REWALK_SECONDS,
        rewalk_share: float = REWALK_SHARE,
        probe_seconds: float = PROBE_SECONDS,
    ) -> None:
        self._marks: dict[str, _Mark] = {}
        self._rewalk = rewalk_seconds
        self._share = rewalk_share
        self._probe = probe_seconds
        self._flows = False

    def before(self, operation: str) -> None:
        """Called as the engine builds the plan of ``operation``: one that may put a job
        before a mark (not in :data:`KEEPS_MARKS`) makes the next claims walk from the
        head."""
        if operation == "flow":
            self._flows = True
        if operation not in KEEPS_MARKS or (operation == "complete" and self._flows):
            self.clear()

    def start(self, queue: str) -> Key:
        """Where the next claim of ``queue`` starts its walk. Engaged, one claim a period
        walks from the head and the others from the mark meanwhile (the walk from the head
        is the one that still visits the dead versions); not engaged, one claim a period
        walks from the mark and the others from the head."""
        now = time.monotonic()
        mark = self._marks.get(queue)
        if mark is None:
            self._marks[queue] = _Mark(now + self._probe)
            return HEAD
        if not mark.switch.engaged:
            if mark.key == HEAD or now < mark.due:
                return HEAD
            mark.due = now + self._probe
            return mark.key
        if mark.key != HEAD and now < mark.due:
            return mark.key
        # Until this walk returns, the next one is due a period from now at the latest.
        mark.due = now + self._rewalk
        mark.walking = now
        return HEAD

    def advance(self, queue: str, started: Key, jobs: list[Job], took: float | None) -> None:
        """After a claim from ``started`` returned ``jobs`` (in fetch order) in ``took``
        seconds of the server's time (None: not reported): the mark moves to the first of
        them -- unless a claim from further back moved the mark before ``started``
        meanwhile (it found claimable jobs there) -- and engages or disengages."""
        mark = self._marks.get(queue)
        if mark is None:
            return
        now = time.monotonic()
        if started == HEAD and mark.walking is not None:
            mark.due = now + max(self._rewalk, self._share * (now - mark.walking))
            mark.walking = None
        if took is not None and mark.switch.record(started != HEAD, took):
            mark.due = now + (self._rewalk if mark.switch.engaged else self._probe)
        if jobs and _order(started) <= _order(mark.key):
            mark.key = key_of(jobs[0])

    def engage(self, queue: str) -> None:
        """The claims of ``queue`` walk from its mark from now on (as when the walks from the
        head were found slower), one a period from the head."""
        mark = self._marks.setdefault(queue, _Mark(0.0))
        mark.switch.engaged = True
        mark.due = time.monotonic() + self._rewalk

    def engaged(self, queue: str) -> bool:
        """Whether the claims of ``queue`` walk from its mark."""
        mark = self._marks.get(queue)
        return mark is not None and mark.switch.engaged

    def forget(self, queue: str) -> None:
        """The next claim of ``queue`` walks it from the head."""
        mark = self._marks.get(queue)
        if mark is not None:
            mark.key = HEAD

    def clear(self) -> None:
        """The next claim of every queue walks it from the head."""
        for mark in self._marks.values():
            mark.key = HEAD
