"""Listing a queue's jobs: a read-only page of jobs in some states, in id order.

Pages are keyset pages over the job table's primary key ``(name, id)``: the next page starts
after the last id of the previous one, so a page costs the same however deep it is, and jobs
sent or deleted between pages neither repeat nor shift the others. Job ids are time-ordered
(UUIDv7), so id order is roughly the order jobs were sent in.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from ...core.plans import Plan, Statement, Steps
from ...core.records import Job
from ...core.states import JobState
from .base import EngineBase
from .sql import JOB_COLUMNS


class ListingMixin(EngineBase):
    """The plan of :meth:`list_jobs`."""

    def list_jobs(
        self,
        queue: str,
        states: Sequence[JobState],
        limit: int,
        after: uuid.UUID | None,
    ) -> Plan[list[Job]]:
        """Up to ``limit`` jobs of ``queue`` in ``states`` (every state when empty) with an
        id after ``after`` (from the first when None), in id order. An unknown queue raises
        :class:`~alkstore.QueueNotFound`."""
        s = self.s
        wanted = [str(state) for state in states] or None

        def steps() -> Steps[list[Job]]:
            yield from self._require_queue(queue)
            rows = yield Statement(
                f"""SELECT {JOB_COLUMNS} FROM {s}.job
                WHERE name = $1
                  AND ($2::text[] IS NULL OR state = ANY($2::text[]))
                  AND ($3::uuid IS NULL OR id > $3::uuid)
                ORDER BY id LIMIT $4::int""",
                (queue, wanted, after, limit),
            )
            return [Job.from_row(row) for row in rows]

        return self._plan("list_jobs", steps)
