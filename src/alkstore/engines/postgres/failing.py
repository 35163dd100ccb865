"""Failing (fail, expiry, heartbeat timeouts) with dead-letter copies, and redrive."""

from __future__ import annotations

import itertools
import json
import random
from typing import Any

from ...core.attempts import MAX_ERRORS, attempt_error_json, snooze_seconds
from ...core.errors import (
    QueueNotFound,
)
from ...core.plans import Plan, Statement, Steps
from ...core.states import QUEUED, Operation
from ...core.targets import Targets
from ...core.validation import INT_MAX
from .base import EngineBase
from .new_ids import NEW_ID
from .schema import in_list
from .sql import (
    accepted,
    columns,
    count_of,
    fence,
    seconds_after,
    target_params,
    targeted_state,
    targets_sql,
)

TIMED_OUT = json.dumps({"message": "job timed out"})
HEARTBEAT_TIMED_OUT = json.dumps({"message": "heartbeat timed out"})

# The retry delay in seconds, spec §4 (engines compute it in SQL within the core's bounds).
# The uniform draw U of the formula arrives bound, as the targets' ``t.jitter``.
RETRY_DELAY_SQL = """(CASE WHEN j.retry_backoff THEN
      CASE WHEN j.retry_delay_max IS NULL THEN {raw}
           ELSE LEAST(j.retry_delay_max::float8, {raw}) END
    ELSE j.retry_delay::float8 END)""".format(
    raw="GREATEST(j.retry_delay, 1)::float8 * power(2::float8, LEAST(16, j.retry_count)) "
    "* (1 + t.jitter)"
)
WILL_RETRY = "j.retry_count < j.retry_limit"

# The stately retry bypass (docs/queues.md): a stately queue holds one retry job per key, so an
# attempt that would retry while another job of its key waits for its retry fails for good.
# Of several targets of one key failed in one call ($2 holds their ids), only the lowest id may
# take the retry slot; the others fail for good (never a unique violation). ``{queue}`` is the
# targets' queue: the bound ``$1`` where they are of one queue, which routes the sub-SELECT to
# that queue's shard on sharded Citus (``o.name = j.name`` alone made the UPDATE a subplan over
# every shard: EXPLAIN Task Count 32 instead of 1, measured on Citus 13.2.2).
STATELY_RETRY_TAKEN = """(j.policy = 'stately' AND EXISTS (SELECT 1 FROM {s}.job o
    WHERE o.name = {queue} AND o.policy = 'stately' AND o.id <> j.id
      AND coalesce(o.singleton_key, '') = coalesce(j.singleton_key, '')
      AND (o.state = 'retry' OR (o.id = ANY($2::uuid[]) AND o.id < j.id
          AND o.state IN {fail_from} AND o.retry_count < o.retry_limit))))"""


RETRY_AT = seconds_after("now()", RETRY_DELAY_SQL)
"""When a failed attempt may run again (its ``keep_until`` counts from there)."""

COPIED_COLUMNS = (
    "name",
    "id",
    "state",
    "priority",
    "retry_count",
    "data",
    "output",
    "dead_letter",
    "singleton_key",
    "created_on",
    "root_id",
    "trace_context",
    "errors",
)
"""Columns of a failed job that the split-statement path binds into its dead-letter copy."""


def errors_appended(entry: str) -> str:
    """The ``errors`` of a failed attempt ``j``: its history with the entry bound at
    ``entry`` (JSON text of ``name``, ``message``, ``stack``) appended, its ``attempt`` and
    ``at`` set, the oldest entry dropped past :data:`~alkstore.core.attempts.MAX_ERRORS`.

    Only IMMUTABLE functions are applied to columns, and ``now()`` stands outside any CASE
    (both as sharded Citus requires, see :func:`.sql.seconds_after`)."""
    history = "coalesce(j.errors, '[]'::jsonb)"
    kept = (
        f"(CASE WHEN jsonb_array_length({history}) >= {MAX_ERRORS} "
        f"THEN {history} - 0 ELSE {history} END)"
    )
    attempt = f"jsonb_set({entry}::text::jsonb, '{{attempt}}', (j.retry_count + 1)::text::jsonb)"
    return f"{kept} || jsonb_set({attempt}, '{{at}}', to_jsonb(now()))"


def jitters(n: int) -> list[float]:
    """One uniform draw in [0, 1) per failed attempt: the retry delay's jitter (spec §4)."""
    return [random.random() for _ in range(n)]


class FailMixin(EngineBase):
    """Plans that fail jobs (retry or failed) and move dead letters back."""

    # A failure is two UPDATEs over the same targets, one for the attempts that will retry
    # and one for those that fail for good, instead of one UPDATE choosing with CASE: sharded
    # Citus refuses now() inside CASE, random() anywhere in an UPDATE, and a sub-SELECT of
    # now() across shards. So the retry jitter is bound (one uniform draw per target, drawn
    # here), times are shifted with :func:`seconds_after`, and no CASE holds now().

    def fail(self, queue: str, targets: Targets, output_json: str | None) -> Plan[int]:
        """queued or active -> retry or failed; dead-letter copies in the same transaction."""
        # A bare id fails a queued or active job; a Job only its own, still active attempt.
        where = (
            f"j.name = $1 AND j.state IN {accepted(Operation.FAIL)} AND {fence()} "
            "AND (t.retry_count IS NULL OR j.state = 'active')"
        )
        source = "unnest($2::uuid[], $3::int[], $4::float8[]) AS t(id, retry_count, jitter)"
        entry = attempt_error_json(output_json)
        params = (queue, *target_params(targets), jitters(len(targets.ids)), output_json, entry)
        return self._plan(
            "fail",
            lambda: self._fail_steps(source, where, "$5", "$1", params),
            transaction=True,
        )

    def expire(self) -> Plan[int]:
        """Fail active jobs that ran past ``started_on + expire_seconds``."""
        return self._overdue_plan(
            "expire", seconds_after("j.started_on", "j.expire_seconds"), TIMED_OUT
        )

    def expire_heartbeats(self) -> Plan[int]:
        """Fail active jobs whose heartbeat is older than ``heartbeat_seconds``."""
        return self._overdue_plan(
            "expire_heartbeats",
            seconds_after("j.heartbeat_on", "j.heartbeat_seconds"),
            HEARTBEAT_TIMED_OUT,
        )

    def _overdue_plan(self, name: str, deadline: str, output_json: str) -> Plan[int]:
        """Fail the active attempts whose ``deadline`` has passed.

        The overdue attempts are found first, then failed as targets (a jitter each), fenced
        to the attempt found and with the deadline checked again: one that finished or sent a
        heartbeat in between is left alone. One statement per queue, all in one transaction:
        each filters ``j.name = $1``, so sharded Citus routes it to the queue's one shard
        (with the names bound as an array, every expiry ran on all 32 shards).
        """
        due = f"{deadline} < now()"
        overdue = f"j.state IN {accepted(Operation.EXPIRE)} AND {due}"
        find = Statement(
            f"SELECT j.name, j.id, j.retry_count FROM {self.s}.job j WHERE {overdue} "
            "ORDER BY j.name"
        )
        source = "unnest($2::uuid[], $3::int[], $4::float8[]) AS t(id, retry_count, jitter)"
        where = (
            f"j.name = $1 AND j.id = t.id AND j.retry_count = t.retry_count "
            f"AND {targeted_state(Operation.EXPIRE)} AND {due}"
        )
        entry = attempt_error_json(output_json)

        def steps() -> Steps[int]:
            rows = yield find
            total = 0
            for queue, overdue_rows in itertools.groupby(rows, key=lambda r: r["name"]):
                of_queue = list(overdue_rows)
                ids, counts = columns(of_queue, ("id", "retry_count"))
                params = (queue, ids, counts, jitters(len(of_queue)), output_json, entry)
                total += yield from self._fail_steps(source, where, "$5", "$1", params)
            return total

        return self._plan(name, steps, transaction=True)

    def _retry_update(self, source: str, where: str, output: str, entry: str, queue: str) -> str:
        """The UPDATE of the targets that will run again, after the retry delay."""
        return f"""UPDATE {self.s}.job j SET state = 'retry',
                start_after = {RETRY_AT},
                keep_until = {seconds_after(RETRY_AT, "j.retention_seconds")},
                output = {output}::text::jsonb, errors = {errors_appended(entry)}
            FROM {source}
            WHERE {where} AND {WILL_RETRY} AND NOT {self._stately_retry_taken(queue)}
            RETURNING j.id"""

    def _failed_update(self, source: str, where: str, output: str, entry: str, queue: str) -> str:
        """The UPDATE of the targets out of retries; returns what a dead-letter copy needs."""
        return f"""UPDATE {self.s}.job j SET state = 'failed', completed_on = now(),
                output = {output}::text::jsonb, errors = {errors_appended(entry)}
            FROM {self.s}.queue sq, {source}
            WHERE sq.name = j.name AND {where}
                AND (NOT {WILL_RETRY} OR {self._stately_retry_taken(queue)})
            RETURNING j.name, j.id, j.state, j.priority, j.retry_count,
                j.data::text AS data, j.output::text AS output,
                coalesce(j.dead_letter, sq.dead_letter) AS dead_letter,
                j.singleton_key, j.created_on, coalesce(j.source_root_id, j.id) AS root_id,
                j.trace_context::text AS trace_context, j.errors::text AS errors
                {self._note}"""

    def _dead_letter_insert(self, source: str) -> str:
        """INSERT of dead-letter copies of the failed rows ``f`` of ``source``.

        A copy keeps the source's ``singleton_key``, ``trace_context`` and ``errors``, and
        records its lineage: the source's queue, id, retry count, creation time and output,
        and the root of a chain of dead letters (the first job's id, when the source was
        itself a copy).
        """
        return f"""INSERT INTO {self.s}.job (id, name, data, output, priority, retry_limit,
                retry_delay, retry_backoff, retry_delay_max, expire_seconds, heartbeat_seconds,
                retention_seconds, deletion_seconds, policy, singleton_key, start_after,
                keep_until, source_queue, source_id, source_retry_count, source_root_id,
                source_created_on, source_output, trace_context, errors)
            SELECT {NEW_ID}, q.name, f.data::jsonb, f.output::jsonb, f.priority,
                q.retry_limit, q.retry_delay, q.retry_backoff, q.retry_delay_max,
                q.expire_seconds, q.heartbeat_seconds, q.retention_seconds, q.deletion_seconds,
                q.policy, f.singleton_key, now(),
                now() + q.retention_seconds * interval '1 second',
                f.name, f.id, f.retry_count, f.root_id, f.created_on, f.output::jsonb,
                f.trace_context::jsonb, f.errors::jsonb
            FROM {source} JOIN {self.s}.queue q ON q.name = f.dead_letter
            WHERE f.state = 'failed'
            ON CONFLICT DO NOTHING
            RETURNING source_id"""

    def _refused_note(self) -> str:
        """UPDATE recording, in the output of failed jobs ``$2`` of queues ``$1``, that the
        policy of their dead-letter queue ``$3`` refused the copy (docs/queues.md)."""
        # Only IMMUTABLE functions (jsonb_set, jsonb_object): Citus refuses a STABLE one
        # such as jsonb_build_object inside CASE, or applied to a column, in an UPDATE.
        return f"""UPDATE {self.s}.job j SET output = (CASE
                WHEN jsonb_typeof(j.output) = 'object' THEN j.output
                ELSE jsonb_set('{{}}'::jsonb, '{{output}}', coalesce(j.output, 'null'::jsonb))
                END) || jsonb_object(ARRAY['dead_letter_refused'], ARRAY[r.dlq])
            FROM unnest($1::text[], $2::uuid[], $3::text[]) AS r(name, id, dlq)
            WHERE j.name = r.name AND j.id = r.id AND j.state = 'failed'
              AND EXISTS (SELECT 1 FROM {self.s}.queue q WHERE q.name = r.dlq)"""

    def _fail_steps(
        self, source: str, where: str, output: str, queue: str, params: tuple[Any, ...]
    ) -> Steps[int]:
        """Fail the targets of ``source`` matching ``where`` (of the queue ``queue`` names:
        a placeholder, or the column ``j.name``); how many were changed. The ``output`` is
        bound at the placeholder ``output``, its history entry
        (:func:`~alkstore.core.attempts.attempt_error_json`) at the next one."""
        entry = f"${int(output[1:]) + 1}"
        retry = self._retry_update(source, where, output, entry, queue)
        failed = self._failed_update(source, where, output, entry, queue)
        if self.capabilities.multi_mutation_cte:
            # The two UPDATEs never touch the same row (a row either will retry or not). The
            # rows after the first name the failed jobs whose dead-letter copy was refused.
            rows = yield Statement(
                f"""WITH retried AS ({retry}), failed AS ({failed}),
                    dead AS ({self._dead_letter_insert("failed f")})
                SELECT (SELECT count(*) FROM retried) + (SELECT count(*) FROM failed) AS n,
                    r.name, r.id, r.dead_letter
                FROM (SELECT 1 AS one) one LEFT JOIN (SELECT f.name, f.id, f.dead_letter
                    FROM failed f WHERE f.dead_letter IS NOT NULL
                      AND NOT EXISTS (SELECT 1 FROM dead d WHERE d.source_id = f.id)) r
                ON true""",
                params,
            )
            refused = [r for r in rows if r["id"] is not None]
            total = count_of(rows)
        else:
            retried = yield Statement(retry, params)
            gone = yield Statement(failed, params)
            total = len(retried) + len(gone)
            dead = [r for r in gone if r["dead_letter"] is not None]
            refused = []
            if dead:
                copy = self._dead_letter_insert(
                    "unnest($1::text[], $2::uuid[], $3::text[], $4::int[], $5::int[], "
                    "$6::text[], $7::text[], $8::text[], $9::text[], $10::timestamptz[], "
                    "$11::uuid[], $12::text[], $13::text[]) AS f(name, id, state, priority, "
                    "retry_count, data, output, dead_letter, singleton_key, created_on, "
                    "root_id, trace_context, errors)"
                )
                copied = yield Statement(copy, columns(dead, COPIED_COLUMNS))
                made = {r["source_id"] for r in copied}
                refused = [r for r in dead if r["id"] not in made]
        if refused:
            yield Statement(self._refused_note(), columns(refused, ("name", "id", "dead_letter")))
        return total

    def snooze(self, queue: str, targets: Targets, seconds: float) -> Plan[int]:
        """active -> retry, due ``seconds`` from now, without spending an attempt: the next
        fetch raises ``retry_count``, so ``retry_limit`` grows by one (as River and Oban
        do), and the attempt's fence stays unique. A stately job whose key already has a job
        waiting for its retry (one of the snoozed, or another) is left alone."""
        at = seconds_after("now()", "$4")
        # o.name = $1, not o.name = j.name: routed to the queue's one shard on sharded Citus
        # (see STATELY_RETRY_TAKEN).
        taken = f"""(j.policy = 'stately' AND EXISTS (SELECT 1 FROM {self.s}.job o
            WHERE o.name = $1 AND o.policy = 'stately' AND o.id <> j.id
              AND coalesce(o.singleton_key, '') = coalesce(j.singleton_key, '')
              AND (o.state = 'retry' OR (o.id = ANY($2::uuid[]) AND o.id < j.id
                  AND o.state = 'active'))))"""
        sql = f"""UPDATE {self.s}.job j SET state = 'retry',
                retry_limit = LEAST(j.retry_limit::int8 + 1, {INT_MAX})::int,
                start_after = {at}, keep_until = {seconds_after(at, "j.retention_seconds")}
            FROM {targets_sql(2)}
            WHERE j.name = $1 AND {targeted_state(Operation.SNOOZE)} AND {fence()}
              AND NOT {taken}
            RETURNING j.id"""
        params = (queue, *target_params(targets), snooze_seconds(seconds))
        return self._single("snooze", sql, params, len)

    def _stately_retry_taken(self, queue: str) -> str:
        return STATELY_RETRY_TAKEN.format(s=self.s, fail_from=accepted(Operation.FAIL), queue=queue)

    def redrive(self, dlq: str, to: str | None, limit: int) -> Plan[int]:
        """Move up to ``limit`` queued jobs of ``dlq`` back to their source queue (or ``to``)
        as fresh jobs (new id, ``retry_count`` 0, the target queue's settings).

        A job the target queue's policy refuses (like a refused send) stays in ``dlq``; the
        count is of the jobs moved."""
        s = self.s
        lock = (
            " FOR UPDATE OF d SKIP LOCKED" if self.capabilities.skip_locked else " FOR UPDATE OF d"
        )
        pick = f"""SELECT d.name, d.id, d.data::text AS data, d.priority, q.name AS target,
                {NEW_ID} AS new_id, d.trace_context::text AS trace_context
            FROM {s}.job d JOIN {s}.queue q ON q.name = coalesce($2::text, d.source_queue)
            WHERE d.name = $1 AND d.state IN {in_list(QUEUED)}
            ORDER BY d.created_on, d.id LIMIT $3{lock}"""

        def insert(source: str) -> str:
            return f"""INSERT INTO {s}.job (id, name, data, priority, retry_limit, retry_delay,
                    retry_backoff, retry_delay_max, expire_seconds, heartbeat_seconds,
                    retention_seconds, deletion_seconds, policy, start_after, keep_until,
                    trace_context)
                SELECT m.new_id, q.name, m.data::jsonb, m.priority, q.retry_limit,
                    q.retry_delay, q.retry_backoff, q.retry_delay_max, q.expire_seconds,
                    q.heartbeat_seconds, q.retention_seconds, q.deletion_seconds, q.policy,
                    now(), now() + q.retention_seconds * interval '1 second',
                    m.trace_context::jsonb
                FROM {source} JOIN {s}.queue q ON q.name = m.target
                ON CONFLICT DO NOTHING
                RETURNING id"""

        def steps() -> Steps[int]:
            rows = yield Statement(
                f"SELECT name FROM {s}.queue WHERE name = $1 OR name = $2::text", (dlq, to)
            )
            for field, queue in (("dlq", dlq), ("to", to)):
                if queue is not None and queue not in {r["name"] for r in rows}:
                    raise QueueNotFound(queue, field=field)
            if self.capabilities.multi_mutation_cte:
                rows = yield Statement(
                    f"""WITH pick AS ({pick}),
                        added AS ({insert("pick m")}),
                        moved AS (DELETE FROM {s}.job d USING pick, added
                            WHERE d.name = pick.name AND d.id = pick.id
                              AND added.id = pick.new_id RETURNING d.id)
                    SELECT count(*) AS n FROM moved""",
                    (dlq, to, limit),
                )
                return count_of(rows)
            picked = yield Statement(pick, (dlq, to, limit))
            if not picked:
                return 0
            added = yield Statement(
                insert(
                    "unnest($1::uuid[], $2::text[], $3::int[], $4::text[], $5::text[]) "
                    "AS m(new_id, data, priority, target, trace_context)"
                ),
                columns(picked, ("new_id", "data", "priority", "target", "trace_context")),
            )
            made = {r["id"] for r in added}
            moved = [r["id"] for r in picked if r["new_id"] in made]
            if moved:
                yield Statement(
                    f"DELETE FROM {s}.job WHERE name = $1 AND id = ANY($2::uuid[])", (dlq, moved)
                )
            return len(moved)

        return self._plan("redrive", steps, transaction=True)
