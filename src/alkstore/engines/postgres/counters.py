"""The SQL of the per-queue counters (schema v8): tallied by maintenance, never on the hot path.

A job records its own events: ``created_on`` (sent), ``completed_on`` with its final state
(completed, failed), one ``errors`` entry per failed attempt with its time ``at`` (retried,
expired) and, for a dead-letter copy, ``source_queue`` (dead-lettered, counted for that
queue). A maintenance pass counts the events between the watermark ``version.counted_until``
and a horizon before which every transaction that could still write an event has ended, adds
them to ``queue_counter`` (one row per queue, written only here) and moves the watermark to
the horizon, in one transaction. A maintenance deletion counts, in its own transaction, the
events at or after the watermark of the rows it deletes, so the next tally cannot miss them.
Send, fetch and settle write nothing more than before.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from ...core.counters import EVENTS, Counters, QueueCounters, summed
from ...core.plans import Plan, Row, Statement, Steps
from ...core.records import as_int, as_time
from ...core.states import FINISHED
from .base import EngineBase
from .failing import HEARTBEAT_TIMED_OUT, TIMED_OUT
from .schema import in_list

HIDDEN_SESSION_MARGIN = 60.0
"""Seconds the horizon stays behind the clock when the role cannot see every session's
transaction start (``pg_stat_activity`` hides other roles' sessions without
``pg_read_all_stats``): a transaction of such a session open longer than this is missed."""

EXPIRY_MESSAGES = [json.loads(m)["message"] for m in (TIMED_OUT, HEARTBEAT_TIMED_OUT)]
"""The ``errors`` messages of attempts the maintenance pass failed (the entry has no
exception ``name``)."""

FOREVER = dt.datetime.max.replace(tzinfo=dt.UTC)
"""The open end of a counted deletion's window (a datetime: asyncpg binds no text here)."""

DELETED_COLUMNS = "name, id, state, created_on, completed_on, errors, source_queue"
"""What a counted deletion returns of each deleted row: the columns its events are read from."""


def _in_window(column: str) -> str:
    """``column`` is in the counted window [$1, $2) ($1 NULL: from the beginning)."""
    return f"({column} >= coalesce($1::timestamptz, '-infinity') AND {column} < $2::timestamptz)"


def tally_sql(rows: str) -> str:
    """A SELECT of the events in the window [$1, $2) of the rows ``t``, defined by ``rows``
    (the common table expression ``t AS (…)`` with the columns of :data:`DELETED_COLUMNS`), as
    rows ``(queue, <event columns>..., n)``; ``n`` is the number of rows of ``t``
    of the queue. ``$3``: :data:`EXPIRY_MESSAGES`.

    The attempts are read by a join to the ``errors`` entries of the rows that have some,
    not by a sub-SELECT per row, which the planner costs for every row."""
    at = "(e.value ->> 'at')::timestamptz"
    # A dead-letter copy starts with its source's history, up to its own creation.
    own = f"(r.source_queue IS NULL OR {at} > r.created_on)"
    expired = "e.value ->> 'name' IS NULL AND e.value ->> 'message' = ANY($3::text[])"
    failed = f"r.state = 'failed' AND {_in_window('r.completed_on')}"
    # A failed job's last entry is its final attempt (at = completed_on): not a retry.
    return f"""WITH {rows}
        SELECT r.name AS queue, count(*) FILTER (WHERE {_in_window("r.created_on")}) AS sent,
            count(*) FILTER (WHERE r.state = 'completed' AND {_in_window("r.completed_on")})
                AS completed,
            count(*) FILTER (WHERE {failed}) AS failed,
            0 AS retried, 0 AS expired, 0 AS dead_lettered, count(*) AS n
        FROM t r GROUP BY r.name
        UNION ALL
        SELECT r.source_queue, 0, 0, 0, 0, 0, count(*), 0 FROM t r
        WHERE r.source_queue IS NOT NULL AND {_in_window("r.created_on")}
        GROUP BY r.source_queue
        UNION ALL
        SELECT r.name, 0, 0, 0, count(*) - count(DISTINCT r.id) FILTER (WHERE {failed}),
            count(*) FILTER (WHERE {expired}), 0, 0
        FROM t r CROSS JOIN LATERAL jsonb_array_elements(r.errors) e
        WHERE r.errors IS NOT NULL AND {_in_window(at)} AND {own}
        GROUP BY r.name"""


def _add(engine: EngineBase, counts: dict[str, QueueCounters]) -> Statement:
    """The upsert adding ``counts`` to ``queue_counter``."""
    columns = ", ".join(EVENTS)
    casts = ", ".join(f"${i + 2}::int8[]" for i in range(len(EVENTS)))
    added = ", ".join(f"{e} = c.{e} + EXCLUDED.{e}" for e in EVENTS)
    sql = f"""INSERT INTO {engine.s}.queue_counter AS c (name, {columns})
        SELECT * FROM unnest($1::text[], {casts})
        ON CONFLICT (name) DO UPDATE SET {added}"""
    names = sorted(counts)
    values = [[getattr(counts[q], e) for q in names] for e in EVENTS]
    return Statement(sql, (names, *values))


NO_JIT = Statement("SELECT set_config(name, 'off', true) FROM pg_settings WHERE name = 'jit'")
"""Turn JIT off for the rest of the transaction, where the server has it. The tally's estimate
counts the ``errors`` entries of every row (a CTE has no statistics), so it passes
``jit_above_cost`` on a queue of some 30,000 jobs; compiling then took longer than the scan
(60 ms of 185 on 100,000 jobs)."""


def _watermark(engine: EngineBase) -> Statement:
    """Read (and lock until commit) the watermark: counting and counted deletions take turns."""
    return Statement(f"SELECT counted_until FROM {engine.s}.version FOR UPDATE")


def horizon(engine: EngineBase) -> Plan[dt.datetime]:
    """The time before which every transaction that may write a job event has ended: the
    oldest start of another client session's open transaction, else the statement's time.

    Run on its own, before :func:`tally`: a transaction started after it reads every
    transaction that began before the horizon as committed (or rolled back).
    """
    sql = """SELECT least(now(),
            min(a.xact_start) FILTER (WHERE a.pid <> pg_backend_pid()),
            CASE WHEN bool_or(a.query = '<insufficient privilege>')
                 THEN now() - $1::float8 * interval '1 second' END) AS horizon
        FROM pg_stat_activity a
        WHERE a.datname = current_database() AND a.backend_type = 'client backend'"""

    def mapped(rows: list[Row]) -> dt.datetime:
        at = as_time(rows[0]["horizon"])
        assert at is not None
        return at

    return engine._single("counters_horizon", sql, (HIDDEN_SESSION_MARGIN,), mapped)


def tally(engine: EngineBase, until: dt.datetime, every: float = 0.0) -> Plan[int]:
    """Count the events from the watermark up to ``until`` (a :func:`horizon`), add them to
    the counters and move the watermark there; how many events were counted. Nothing is done
    while the watermark is less than ``every`` seconds behind ``until``: the scan reads every
    unfinished job, so the workers' passes (one a second) count less often."""
    s = engine.s
    scanned = f"""t AS (SELECT {DELETED_COLUMNS} FROM {s}.job
        WHERE state NOT IN {in_list(FINISHED)}
           OR completed_on >= coalesce($1::timestamptz, '-infinity'))"""

    def steps() -> Steps[int]:
        rows = yield _watermark(engine)
        since = as_time(rows[0]["counted_until"]) if rows else None
        if since is not None and (until - since).total_seconds() < max(every, 1e-6):
            return 0
        yield NO_JIT
        counts = summed((yield Statement(tally_sql(scanned), (since, until, EXPIRY_MESSAGES))))
        if counts:
            yield _add(engine, counts)
        yield Statement(f"UPDATE {s}.version SET counted_until = $1", (until,))
        return sum(getattr(c, e) for c in counts.values() for e in EVENTS)

    return engine._plan("count_events", steps, transaction=True)


def counted_delete(
    engine: EngineBase, name: str, delete: str, params: tuple[Any, ...]
) -> Plan[int]:
    """Run ``delete`` (a DELETE of jobs ``RETURNING`` :data:`DELETED_COLUMNS`, whose own
    parameters start at ``$4``) and add the events of the deleted rows the counters have not
    reached yet; how many rows were deleted."""

    def steps() -> Steps[int]:
        rows = yield _watermark(engine)
        since = as_time(rows[0]["counted_until"]) if rows else None
        yield NO_JIT
        tallied = yield Statement(
            tally_sql(f"t AS ({delete})"),
            (since, FOREVER, EXPIRY_MESSAGES, *params),
        )
        counts = summed(tallied)
        if counts:
            yield _add(engine, counts)
        return sum(as_int(r["n"]) for r in tallied)

    return engine._plan(name, steps, transaction=True)


def read_counters(engine: EngineBase) -> Plan[Counters]:
    """Every queue's counters and the watermark."""
    s = engine.s

    def steps() -> Steps[Counters]:
        marks = yield Statement(f"SELECT counted_until FROM {s}.version")
        rows = yield Statement(f"SELECT name AS queue, {', '.join(EVENTS)} FROM {s}.queue_counter")
        return Counters(
            queues={r["queue"]: QueueCounters.from_row(r) for r in rows},
            counted_until=as_time(marks[0]["counted_until"]) if marks else None,
        )

    return engine._plan("counters", steps)


class CountersMixin(EngineBase):
    """:class:`~alkstore.core.contracts.CounterPlans` on this module's SQL."""

    def counter_horizon(self) -> Plan[dt.datetime]:
        """See :func:`horizon`."""
        return horizon(self)

    def tally_counters(self, until: dt.datetime, every: float) -> Plan[int]:
        """See :func:`tally`."""
        return tally(self, until, every)

    def read_counters(self) -> Plan[Counters]:
        """See :func:`read_counters`."""
        return read_counters(self)
