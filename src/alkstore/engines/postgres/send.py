"""Sending: jobs inserted in one statement, their options resolved in SQL."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

from ...core.errors import (
    JobConflict,
)
from ...core.options import NewJob
from ...core.plans import Plan, Statement, Steps
from .base import EngineBase
from .runtime import notifying

SEND_OPTION_SQL: dict[str, tuple[str, str]] = {
    "priority": ("int", "0"),
    "retry_limit": ("int", "q.retry_limit"),
    "retry_delay": ("int", "q.retry_delay"),
    "retry_backoff": ("bool", "q.retry_backoff"),
    "retry_delay_max": ("int", "q.retry_delay_max"),
    "expire_seconds": ("int", "q.expire_seconds"),
    "heartbeat_seconds": ("int", "q.heartbeat_seconds"),
    "retention_seconds": ("int", "q.retention_seconds"),
    "deletion_seconds": ("int", "q.deletion_seconds"),
    "singleton_key": ("text", "NULL"),
    "group_id": ("text", "NULL"),
    "group_tier": ("text", "NULL"),
    "dead_letter": ("text", "NULL"),
}
"""Job option -> (SQL type, value when the job leaves it unset): job > queue > default."""
SEND_TYPES = {
    "id": "uuid",
    "data": "text",
    "start_at": "timestamptz",
    "delay": "float8",
    **{name: sql_type for name, (sql_type, _default) in SEND_OPTION_SQL.items()},
}
"""SQL element type of every array ``send`` may bind."""


class SendMixin(EngineBase):
    """The plan of ``send``."""

    def send(self, queue: str, jobs: Sequence[NewJob]) -> Plan[list[uuid.UUID]]:
        """Insert ``jobs`` (ids already assigned) in one statement, options resolved in SQL.

        Raises :class:`QueueNotFound` when the queue does not exist and :class:`JobConflict`
        on a duplicate id; either way nothing is written.
        """
        sql, params = notifying(self, *self._send_statement(queue, jobs), "$1::text")
        ids = [job.id for job in jobs]
        if len(ids) != len(set(ids)):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise JobConflict(f"id {dup} appears twice in one send")

        def steps() -> Steps[list[uuid.UUID]]:
            rows = yield Statement(sql, params)
            if len(rows) < len(jobs):
                yield from self._require_queue(queue)
            return ids

        # The job table's only unique key is (name, id); no constraint name is needed (see
        # _queue_errors for why none is relied upon).
        def map_error(sqlstate: str | None, _constraint: str | None) -> Exception | None:
            if sqlstate == "23505":
                return JobConflict(f"a job with one of these ids already exists in {queue!r}")
            return None

        return self._plan("send", steps, map_error=map_error)

    def _send_statement(self, queue: str, jobs: Sequence[NewJob]) -> tuple[str, tuple[Any, ...]]:
        """The INSERT of ``send``, binding only the option arrays some job sets.

        An option no job sets comes straight from the queue row (or its constant default), so
        a large batch without options binds two arrays instead of sixteen.
        """
        options = [job.options for job in jobs]
        # Jobs sent without options share one JobOptions object: look at each object once.
        distinct = {id(o): o for o in options}.values()
        bound = [
            name for name in SEND_OPTION_SQL if any(getattr(o, name) is not None for o in distinct)
        ]
        timed = any(o.start_after is not None for o in distinct)
        arrays: dict[str, list[Any]] = {
            "id": [job.id for job in jobs],
            "data": [job.data_json for job in jobs],
        }
        for name in bound:
            arrays[name] = [getattr(o, name) for o in options]
        if timed:
            arrays["start_at"] = [
                o.start_after if isinstance(o.start_after, dt.datetime) else None for o in options
            ]
            arrays["delay"] = [
                o.start_after if isinstance(o.start_after, float) else None for o in options
            ]
        values = {
            name: f"coalesce(t.{name}, {default})" if name in bound else default
            for name, (_type, default) in SEND_OPTION_SQL.items()
        }
        start = (
            "coalesce(t.start_at, now() + coalesce(t.delay, 0) * interval '1 second')"
            if timed
            else "now()"
        )
        unnest = ", ".join(f"${i + 2}::{SEND_TYPES[n]}[]" for i, n in enumerate(arrays))
        sql = f"""
            INSERT INTO {self.s}.job (id, name, data, {", ".join(SEND_OPTION_SQL)},
                policy, start_after, keep_until)
            SELECT t.id, q.name, t.data::jsonb, {", ".join(values.values())}, q.policy, sa.at,
                sa.at + {values["retention_seconds"]} * interval '1 second'
            FROM unnest({unnest}) AS t({", ".join(arrays)})
            JOIN {self.s}.queue q ON q.name = $1
            CROSS JOIN LATERAL (SELECT {start} AS at) sa
            RETURNING id"""
        return sql, (queue, *arrays.values())
