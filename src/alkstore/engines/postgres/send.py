"""Sending: jobs inserted in one statement, their options resolved in SQL."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from typing import Any

from ...core.errors import (
    JobConflict,
)
from ...core.options import JobOptions, NewJob, Policy
from ...core.plans import Plan, Statement, Steps
from ...core.records import as_int
from ...core.tracecontext import trace_context_json
from .policies import QueueHintsMixin
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
    "singleton_seconds": "int",
    "trace_context": "text",
    **{name: sql_type for name, (sql_type, _default) in SEND_OPTION_SQL.items()},
}
"""SQL element type of every array ``send`` may bind."""


SLOT = "to_timestamp(floor(extract(epoch FROM now()) / t.singleton_seconds) * t.singleton_seconds)"
"""The start of the current throttle slot of a job (``singleton_on``)."""
NEXT_SLOT = f"({SLOT} + t.singleton_seconds * interval '1 second')"
"""The start of the slot after it (debounce)."""


class SendMixin(QueueHintsMixin):
    """The plan of ``send``."""

    def send(self, queue: str, jobs: Sequence[NewJob]) -> Plan[list[uuid.UUID | None]]:
        """Insert ``jobs`` (ids already assigned) in one statement, options resolved in SQL.

        Returns one entry per job, in order: its id, or None when the queue's policy or the
        job's throttle refused it (docs/queues.md). Raises :class:`QueueNotFound` when the
        queue does not exist and :class:`JobConflict` on a duplicate id; either way nothing
        is written.
        """
        ids = [job.id for job in jobs]
        if len(ids) != len(set(ids)):
            dup = next(i for i in ids if ids.count(i) > 1)
            raise JobConflict(f"id {dup} appears twice in one send")
        throttled = any(job.options.singleton_seconds is not None for job in jobs)
        if not throttled and self.standard_queues.get(queue):
            return self._plain_send(queue, jobs)
        return self._guarded_send(queue, jobs, throttled)

    def _plain_send(self, queue: str, jobs: Sequence[NewJob]) -> Plan[list[uuid.UUID | None]]:
        """The INSERT into a queue known to be ``standard`` (gated on it: a queue recreated
        with a policy since gets the guarded insert)."""
        # Where the INSERT is wrapped to notify anyway, only how many rows it inserted is
        # read back (the ids are the ones sent): a row per job cost the client more than
        # the count. Elsewhere the INSERT stays a statement of its own (a modifying CTE is
        # a plan of its own on sharded Citus).
        counted = self.capabilities.listen_notify
        sql, params = self._plain_send_sql(queue, jobs, counted=counted)
        ids: list[uuid.UUID | None] = [job.id for job in jobs]

        def steps() -> Steps[list[uuid.UUID | None]]:
            rows = yield Statement(sql, params)
            if (as_int(rows[0]["changed"]) if counted else len(rows)) < len(jobs):
                rules = yield from self._read_rules(queue)
                if rules.policy is not Policy.STANDARD:
                    return (yield from self._guarded_steps(queue, jobs, throttled=False))
            return ids

        # The job table's only unique key a standard queue's jobs meet is (name, id); no
        # constraint name is needed (see _queue_errors for why none is relied upon).
        def map_error(sqlstate: str | None, _constraint: str | None) -> Exception | None:
            if sqlstate == "23505":
                return JobConflict(f"a job with one of these ids already exists in {queue!r}")
            return None

        return self._plan("send", steps, map_error=map_error)

    def _plain_send_sql(
        self, queue: str, jobs: Sequence[NewJob], *, counted: bool
    ) -> tuple[str, tuple[Any, ...]]:
        """The plain send's one statement: the INSERT, made to notify; with ``counted`` it
        returns one row, ``changed`` (how many jobs it inserted), else a row per job."""
        return notifying(self, *self._send_statement(queue, jobs), "$1::text", counted=counted)

    def _guarded_send(
        self, queue: str, jobs: Sequence[NewJob], throttled: bool
    ) -> Plan[list[uuid.UUID | None]]:
        """``ON CONFLICT DO NOTHING``: a job a policy or throttle refuses is not inserted.

        A debounce (``singleton_next_slot``) is a second INSERT of the refused jobs in the
        next slot, in the same transaction.
        """
        debounce = any(job.options.singleton_next_slot for job in jobs)
        return self._plan(
            "send",
            lambda: self._guarded_steps(queue, jobs, throttled),
            transaction=debounce,
        )

    def _guarded_steps(
        self, queue: str, jobs: Sequence[NewJob], throttled: bool
    ) -> Steps[list[uuid.UUID | None]]:
        chosen = [job.id for job in jobs if job.options.id is not None]
        if chosen:
            # DO NOTHING would also swallow a duplicate id: tell it apart before inserting.
            taken = yield Statement(
                f"SELECT id FROM {self.s}.job WHERE name = $1 AND id = ANY($2::uuid[])",
                (queue, chosen),
            )
            if taken:
                raise JobConflict(f"a job with id {taken[0]['id']} already exists in {queue!r}")
        slot = SLOT if throttled else None
        sql, params = self._send_statement(queue, jobs, slot=slot, guarded=True)
        sql, params = notifying(self, sql, params, "$1::text")
        rows = yield Statement(sql, params)
        if rows:
            self.standard_queues[queue] = rows[0]["policy"] == Policy.STANDARD.value
        inserted = {r["id"] for r in rows}
        later = [j for j in jobs if j.id not in inserted and j.options.singleton_next_slot]
        if later:
            sql, params = self._send_statement(queue, later, slot=NEXT_SLOT, guarded=True)
            sql, params = notifying(self, sql, params, "$1::text")
            more = yield Statement(sql, params)
            inserted |= {r["id"] for r in more}
        if not inserted and jobs:
            yield from self._require_queue(queue)
        return [job.id if job.id in inserted else None for job in jobs]

    def _send_statement(
        self,
        queue: str,
        jobs: Sequence[NewJob],
        *,
        slot: str | None = None,
        guarded: bool = False,
    ) -> tuple[str, tuple[Any, ...]]:
        """The INSERT of ``send``, binding only the option arrays some job sets.

        An option no job sets comes straight from the queue row (or its constant default), so
        a large batch without options binds two arrays instead of sixteen. ``slot`` is the
        throttle slot's SQL (jobs without ``singleton_seconds`` get none); ``guarded`` adds
        ``ON CONFLICT DO NOTHING`` for the policy and throttle indexes.
        """
        arrays = send_arrays(jobs)
        bound = [name for name in SEND_OPTION_SQL if name in arrays]
        timed = "start_at" in arrays
        traced = "trace_context" in arrays
        if slot is not None:
            arrays["singleton_seconds"] = [job.options.singleton_seconds for job in jobs]
        values = {
            name: f"coalesce(t.{name}, {default})" if name in bound else default
            for name, (_type, default) in SEND_OPTION_SQL.items()
        }
        start = (
            "coalesce(t.start_at, now() + coalesce(t.delay, 0) * interval '1 second')"
            if timed
            else "now()"
        )
        if slot is NEXT_SLOT:
            # A debounced job waits for its slot.
            start = f"GREATEST({start}, {NEXT_SLOT})"
        unnest = ", ".join(f"${i + 2}::{SEND_TYPES[n]}[]" for i, n in enumerate(arrays))
        gate = " AND q.policy = 'standard'" if not guarded else ""
        slot_column, slot_value = ("singleton_on, ", f"{slot}, ") if slot is not None else ("", "")
        tail = " ON CONFLICT DO NOTHING RETURNING id, policy" if guarded else " RETURNING id"
        trace_column, trace_value = (
            ("trace_context, ", "t.trace_context::jsonb, ") if traced else ("", "")
        )
        sql = f"""
            INSERT INTO {self.s}.job (id, name, data, {", ".join(SEND_OPTION_SQL)},
                policy, {trace_column}{slot_column}start_after, keep_until)
            SELECT t.id, q.name, t.data::jsonb, {", ".join(values.values())}, q.policy,
                {trace_value}{slot_value}sa.at,
                sa.at + {values["retention_seconds"]} * interval '1 second'
            FROM unnest({unnest}) AS t({", ".join(arrays)})
            JOIN {self.s}.queue q ON q.name = $1{gate}
            CROSS JOIN LATERAL (SELECT {start} AS at) sa{tail}"""
        return sql, (queue, *arrays.values())


def send_arrays(jobs: Sequence[NewJob]) -> dict[str, list[Any]]:
    """The arrays a send binds, by their :data:`SEND_TYPES` names: ``id`` and ``data``, then
    only what some job sets: each option of :data:`SEND_OPTION_SQL`, ``start_at`` and
    ``delay`` (an absolute or a relative ``start_after``), ``trace_context``."""
    options = [job.options for job in jobs]
    # Jobs sent without options share one JobOptions object: look at each object once.
    distinct = {id(o): o for o in options}.values()
    arrays: dict[str, list[Any]] = {
        "id": [job.id for job in jobs],
        "data": [job.data_json for job in jobs],
    }
    for name in SEND_OPTION_SQL:
        if any(getattr(o, name) is not None for o in distinct):
            arrays[name] = [getattr(o, name) for o in options]
    if any(o.start_after is not None for o in distinct):
        arrays["start_at"] = [
            o.start_after if isinstance(o.start_after, dt.datetime) else None for o in options
        ]
        arrays["delay"] = [
            o.start_after if isinstance(o.start_after, float) else None for o in options
        ]
    if any(o.trace_context is not None for o in distinct):
        arrays["trace_context"] = trace_context_texts(options)
    return arrays


def trace_context_texts(options: Sequence[JobOptions]) -> list[str | None]:
    """Each job's ``trace_context`` as the JSON text stored for it
    (:func:`~alkstore.core.tracecontext.trace_context_json`; a batch sent with one context
    shares one mapping: it is encoded once)."""
    texts: dict[int, str] = {}
    out: list[str | None] = []
    for o in options:
        context = o.trace_context
        if context is None:
            out.append(None)
            continue
        text = texts.get(id(context))
        if text is None:
            text = texts[id(context)] = trace_context_json(context)
        out.append(text)
    return out
