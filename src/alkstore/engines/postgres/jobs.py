"""Finding and editing jobs: ``find_jobs`` and the data ``update`` of queued jobs.

Every filter is a bound value; only the filters given reach the WHERE clause, so each query
can use the queue's indexes.
"""

from __future__ import annotations

import uuid
from typing import Any

from ...core.plans import Plan, Statement, Steps
from ...core.queries import JobQuery, JobSelector, Match
from ...core.records import Job, as_time, as_uuid
from ...core.states import QUEUED
from .base import EngineBase
from .schema import in_list
from .sql import read_job_columns


def _filters(first: int, **given: Any) -> tuple[list[str], list[Any]]:
    """``column = $n`` conditions (``n`` from ``first``) for the filters that are not None."""
    conditions, params = [], []
    for column, (sql, value) in given.items():
        if value is None:
            continue
        params.append(value)
        conditions.append(sql.format(column=column, at=f"${first + len(params) - 1}"))
    return conditions, params


class JobsMixin(EngineBase):
    """Plans of ``find_jobs`` and ``update``."""

    def find_jobs(self, queue: str, query: JobQuery) -> Plan[list[Job]]:
        """The jobs of ``queue`` matching ``query``, oldest first (created_on, id)."""
        conditions, params = _filters(
            2,
            id=("{column} = {at}::uuid", query.id),
            singleton_key=("{column} = {at}::text", query.key),
            data=("{column} @> {at}::text::jsonb", query.data_json),
        )
        if query.queued:
            conditions.append(f"state IN {in_list(QUEUED)}")
        where = " AND ".join(["name = $1", *conditions])
        sql = (
            f"SELECT {read_job_columns('j')} FROM {self.s}.job j WHERE {where} "
            "ORDER BY j.created_on, j.id"
        )

        def steps() -> Steps[list[Job]]:
            rows = yield Statement(sql, (queue, *params))
            if not rows:
                yield from self._require_queue(queue)
            return [Job.from_row(r) for r in rows]

        return self._plan("find_jobs", steps)

    def update_jobs(
        self, queue: str, selector: JobSelector, data_json: str | None
    ) -> Plan[list[uuid.UUID]]:
        """Replace the ``data`` of the queued job(s) ``selector`` picks; their ids (newest
        first). An empty result in a queue that does not exist raises ``QueueNotFound``."""
        conditions, params = _filters(
            3,
            id=("{column} = {at}::uuid", selector.id),
            singleton_key=("{column} = {at}::text", selector.singleton_key),
        )
        queued = in_list(QUEUED)
        order = "created_on, id" if selector.match is Match.OLDEST else "created_on DESC, id DESC"
        limit = "" if selector.match is Match.ALL else " LIMIT 1"
        pick = f"""SELECT id, created_on FROM {self.s}.job
            WHERE name = $1 AND state IN {queued} AND {" AND ".join(conditions)}
            ORDER BY {order}{limit}"""
        # The state is checked again on the row itself: a job fetched since the pick is left
        # alone.
        sql = f"""UPDATE {self.s}.job j SET data = $2::text::jsonb
            FROM ({pick}) t
            WHERE j.name = $1 AND j.id = t.id AND j.state IN {queued}
            RETURNING j.id, j.created_on"""

        def steps() -> Steps[list[uuid.UUID]]:
            rows = yield Statement(sql, (queue, data_json, *params))
            if not rows:
                yield from self._require_queue(queue)
            rows = sorted(rows, key=lambda r: (as_time(r["created_on"]), as_uuid(r["id"])))
            rows.reverse()
            return [as_uuid(r["id"]) for r in rows]

        return self._plan("update", steps)
