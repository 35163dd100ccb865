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
from ...core.queries import JobPage, JobSearch
from ...core.records import Job, as_uuid
from ...core.states import JobState
from .base import EngineBase
from .sql import JOB_COLUMNS


class ListingMixin(EngineBase):
    """The plans of :meth:`list_jobs` and :meth:`search_jobs`."""

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

    def search_jobs(self, queue: str, search: JobSearch) -> Plan[JobPage]:
        """A page of ``queue``'s jobs matching ``search``, examining at most ``search.scan``.

        Two statements, both range scans of the primary key ``(name, id)``: the first finds
        the id that ends the window of ``scan`` jobs after ``after`` (an index-only walk of
        ``scan`` entries), the second reads the window's rows in id order, filtered, and
        stops at ``limit + 1`` matches. So a page costs at most ``scan`` rows however large
        the queue is and however rare the text; the text filter is a substring test of the
        data's JSON text (no index can serve it, which is why it is bounded).
        """
        s = self.s
        wanted = [str(state) for state in search.states] or None

        def steps() -> Steps[JobPage]:
            yield from self._require_queue(queue)
            end_rows = yield Statement(
                f"""SELECT id FROM {s}.job
                WHERE name = $1 AND ($2::uuid IS NULL OR id > $2::uuid)
                ORDER BY id OFFSET $3::int LIMIT 1""",
                (queue, search.after, search.scan - 1),
            )
            end = as_uuid(end_rows[0]["id"]) if end_rows else None
            rows = yield Statement(
                f"""SELECT {JOB_COLUMNS} FROM {s}.job
                WHERE name = $1
                  AND ($2::uuid IS NULL OR id > $2::uuid)
                  AND ($3::uuid IS NULL OR id <= $3::uuid)
                  AND ($4::text[] IS NULL OR state = ANY($4::text[]))
                  AND ($5::text IS NULL OR singleton_key = $5::text)
                  AND ($6::text IS NULL OR strpos(lower(data::text), lower($6::text)) > 0)
                ORDER BY id LIMIT $7::int""",
                (queue, search.after, end, wanted, search.key, search.text, search.limit + 1),
            )
            jobs = [Job.from_row(row) for row in rows]
            if len(jobs) > search.limit:
                jobs = jobs[: search.limit]
                return JobPage(jobs, jobs[-1].id)
            return JobPage(jobs, end)

        return self._plan("search_jobs", steps)
