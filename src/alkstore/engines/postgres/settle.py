"""Settling: complete, touch, cancel, resume, retry, delete and read jobs.

The states each operation accepts come from the core's transition table
(:data:`~alkstore.core.states.TRANSITIONS`)."""

from __future__ import annotations

import uuid
from typing import Any

from ...core.plans import Plan, Statement, Steps, rowcount
from ...core.records import Job, as_int
from ...core.states import ACTIVE, QUEUED, Operation
from ...core.targets import Targets
from .base import EngineBase
from .policies import fits_policy
from .runtime import channel
from .schema import in_list
from .sql import (
    accepted,
    columns,
    count_of,
    fence,
    read_job_columns,
    seconds_after,
    target_params,
    targeted_state,
    targets_sql,
)


def _completable(include_queued: bool) -> str:
    """The state check of a completion's target ``j`` (joined to its target ``t``)."""
    if include_queued:
        return (
            f"j.state IN {in_list(ACTIVE | QUEUED)} "
            "AND (t.retry_count IS NULL OR j.state = 'active')"
        )
    return targeted_state(Operation.COMPLETE)


def complete_update(
    s: str,
    targets_at: int,
    output: str,
    *,
    include_queued: bool = False,
    unless: str = "",
    note: str = "",
) -> str:
    """The UPDATE of ``complete`` in schema ``s``: queue ``$1``, targets bound from
    ``$targets_at``; with ``include_queued``, queued jobs are completed as well as active
    ones (by bare id: a ``Job`` still completes only its own, active attempt); ``unless``, a
    condition on the rest of the statement, makes it complete nothing; ``note``, the
    engine's :func:`~.sql.result_note`, notifies the waiters of the completed jobs. Returns
    the ``name``, ``id`` and ``flow_parent`` (true when flow jobs wait for it) of each
    completed job."""
    where = _completable(include_queued)
    if unless:
        where += f" AND NOT ({unless})"
    return f"""UPDATE {s}.job j SET state = 'completed', completed_on = now(),
            output = {output}::text::jsonb
        FROM {targets_sql(targets_at)}
        WHERE j.name = $1 AND {where} AND {fence()}
        RETURNING j.name, j.id, j.flow_parent{note}"""


def unflowed_complete_ctes(
    s: str, targets_at: int, output: str, *, include_queued: bool = False, note: str = ""
) -> str:
    """The CTEs of a completion that pays nothing for flows (for ``WITH {...}, ...``):
    ``flow_parents``, the targets it would complete that flow jobs wait for, and ``done``,
    the completion (:func:`complete_update`) of all the targets, or of none when there is
    such a parent: then the caller completes them with :func:`complete_ctes` instead, one
    statement either way. ``note``: as in :func:`complete_update`.

    Both read and change only the rows of queue ``$1`` by primary key: on sharded Citus the
    statement goes to the queue's one shard and writes no table of the flows (the release
    writes ``job_blocked``, a reference table, whose lock on every node serialised all
    completions of the cluster)."""
    where = _completable(include_queued)
    # Looked up only in a queue that may have flow parents: evaluated once, not per target.
    may_have = f"(SELECT q.flow_parents FROM {s}.queue q WHERE q.name = $1) IS NOT FALSE"
    parents = f"""SELECT j.id FROM {s}.job j, {targets_sql(targets_at)}
        WHERE {may_have} AND j.name = $1 AND j.flow_parent AND {where} AND {fence()}"""
    done = complete_update(
        s,
        targets_at,
        output,
        include_queued=include_queued,
        unless="EXISTS (SELECT 1 FROM flow_parents)",
        note=note,
    )
    return f"flow_parents AS ({parents}), done AS ({done})"


def complete_ctes(
    s: str, targets_at: int, output: str, *, include_queued: bool = False, note: str = ""
) -> str:
    """The CTEs of a completion in one statement (for ``WITH {complete_ctes(...)}, ...``):
    ``done``, the jobs completed (:func:`complete_update`), then the release of the flow jobs
    whose last parent that was (:func:`release_ctes`). ``complete_and_fetch`` embeds it too.
    ``note``: as in :func:`complete_update`."""
    done = complete_update(s, targets_at, output, include_queued=include_queued, note=note)
    return f"done AS ({done}), {release_ctes(s, 'done')}"


def unblock_update(s: str, parents: str) -> str:
    """UPDATE counting down the parents each flow job still waits for, by the completed jobs
    ``parents`` (rows ``name``, ``id``); returns the counted-down rows.

    The count lives on one row per waiting job, so two transactions completing two parents
    of one job at once serialise on it and the later one sees the earlier one's count (a
    check of the parents' states could miss both)."""
    return f"""UPDATE {s}.job_blocked b SET waiting = b.waiting - e.n
        FROM (SELECT d.name, d.id, count(*) AS n FROM {s}.job_dependency d
              JOIN {parents} ON d.parent_name = p.name AND d.parent_id = p.id
              GROUP BY d.name, d.id) e
        WHERE b.name = e.name AND b.id = e.id
        RETURNING b.name, b.id, b.waiting, b.start_at, b.delay"""


def ready_select(unblocked: str) -> str:
    """SELECT of the counted-down rows ``unblocked`` (alias ``u``) that wait for no parent
    any more, with the time each may start: its own ``start_at``, or its delay after now."""
    at = seconds_after("now()", "coalesce(u.delay, 0)")
    return f"""SELECT u.name, u.id, coalesce(u.start_at, {at}) AS at
        FROM {unblocked} WHERE u.waiting = 0"""


def release_update(s: str, ready: str, *, finished: str = "") -> str:
    """UPDATE giving the ``ready`` jobs (alias ``r``) their start: fetchable from then. A
    ready job that is no longer queued (completed with ``include_queued`` while it waited)
    keeps its waiting start; ``finished`` names a CTE of jobs (``name``, ``id``) that the
    same statement finished, which its snapshot still shows queued."""
    unfinished = ""
    if finished:
        unfinished = (
            f" AND NOT EXISTS (SELECT 1 FROM {finished} f WHERE f.name = j.name AND f.id = j.id)"
        )
    return f"""UPDATE {s}.job j SET start_after = r.at,
            keep_until = {seconds_after("r.at", "j.retention_seconds")}
        FROM {ready}
        WHERE j.name = r.name AND j.id = r.id AND j.start_after = 'infinity'
            AND j.state IN {in_list(QUEUED)}{unfinished}
        RETURNING j.id"""


def release_ctes(s: str, done: str) -> str:
    """CTEs releasing, in the statement that completed the jobs of CTE ``done`` (``name``,
    ``id``), the flow jobs that waited for them last (``flow_released``)."""
    parents = f"(SELECT name, id FROM {done} WHERE flow_parent) p"
    return f"""flow_unblocked AS ({unblock_update(s, parents)}),
        flow_ready AS ({ready_select("flow_unblocked u")}),
        flow_released AS ({release_update(s, "flow_ready r", finished=done)})"""


class SettleMixin(EngineBase):
    """Plans that move targeted jobs between states."""

    def _completing(self, include_queued: bool) -> str:
        # One count row instead of a row per completed job: a batch's ids are not read back.
        ctes = complete_ctes(self.s, 2, "$4", include_queued=include_queued, note=self._note)
        return f"WITH {ctes} SELECT count(*) AS n FROM done"

    def _unflowed_completing(self, include_queued: bool) -> str:
        ctes = unflowed_complete_ctes(
            self.s, 2, "$4", include_queued=include_queued, note=self._note
        )
        return f"""WITH {ctes} SELECT count(*) AS n,
            (SELECT count(*) FROM flow_parents) AS flow_parents FROM done"""

    def complete(
        self, queue: str, targets: Targets, output_json: str | None, include_queued: bool = False
    ) -> Plan[int]:
        """active (and with ``include_queued``, queued) -> completed, storing ``output``.

        First the completion that pays nothing for flows (:func:`unflowed_complete_ctes`);
        only when a target is a flow parent, which that statement then left alone, the
        completion that also releases the flow jobs (:meth:`flow_complete`)."""
        params = (queue, *target_params(targets), output_json)
        sql = self.built_once(
            ("complete", include_queued), lambda: self._unflowed_completing(include_queued)
        )

        def steps() -> Steps[int]:
            rows = yield Statement(sql, params)
            completed = as_int(rows[0]["n"])
            if as_int(rows[0]["flow_parents"]):
                # Plus what the statement completed: nothing (a flow parent stops it whole),
                # or on sharded Citus the targets that were not flow parents.
                completed += yield from self.flow_complete(params, include_queued)
            return completed

        return self._plan("complete", steps)

    def flow_complete(self, params: tuple[Any, ...], include_queued: bool) -> Steps[int]:
        """The steps of a completion (``params``: queue, ids, retry counts, output) that also
        releases the flow jobs whose last parent it completed: one statement, or where a
        statement may change the job table only once, :meth:`_complete_steps`."""
        if not self.capabilities.multi_mutation_cte:
            return (yield from self._complete_steps(params, include_queued))
        sql = self.built_once(
            ("flow-complete", include_queued), lambda: self._completing(include_queued)
        )
        rows = yield Statement(sql, params)
        return count_of(rows)

    def _complete_steps(self, params: tuple[Any, ...], include_queued: bool) -> Steps[int]:
        """``complete`` where a statement may change the job table only once: the completion
        and the countdown of the flow jobs waiting for the completed ones in one statement
        (two tables), then, only when some flow job waits for no parent any more, a second
        statement releasing it. No transaction around them: a completion stays one short
        statement, which serializable engines retry far less than a transaction. A crash
        between the two leaves a job counted down to zero but still parked; the next
        maintenance pass releases it (``release_flows``)."""
        s = self.s
        parents = "(SELECT name, id FROM done WHERE flow_parent) p"
        done = complete_update(s, 2, "$4", include_queued=include_queued, note=self._note)
        rows = yield Statement(
            f"""WITH done AS ({done}), flow_unblocked AS ({unblock_update(s, parents)})
            SELECT d.n, u.* FROM (SELECT count(*) AS n FROM done) d
            LEFT JOIN flow_unblocked u ON true""",
            params,
        )
        ready = [r for r in rows if r["name"] is not None and as_int(r["waiting"]) == 0]
        if ready:
            source = (
                "unnest($1::text[], $2::uuid[], $3::timestamptz[], $4::float8[], $5::int[]) "
                "AS u(name, id, start_at, delay, waiting)"
            )
            yield Statement(
                f"WITH flow_ready AS ({ready_select(source)}) {release_update(s, 'flow_ready r')}",
                (*columns(ready, ("name", "id", "start_at", "delay")), [0] * len(ready)),
            )
        return as_int(rows[0]["n"])

    def touch(self, queue: str, targets: Targets) -> Plan[int]:
        """Heartbeat: ``heartbeat_on = now()`` for active jobs."""
        sql = f"""UPDATE {self.s}.job j SET heartbeat_on = now()
            FROM {targets_sql(2)}
            WHERE j.name = $1 AND {targeted_state(Operation.TOUCH)} AND {fence()}
            RETURNING j.id"""
        return self._single("touch", sql, (queue, *target_params(targets)), rowcount)

    def cancel(self, queue: str, targets: Targets) -> Plan[int]:
        """queued or active -> cancelled."""
        return self._set_state(
            Operation.CANCEL,
            queue,
            targets,
            "state = 'cancelled', completed_on = now()",
            finishes=True,
        )

    def resume(self, queue: str, targets: Targets) -> Plan[int]:
        """cancelled -> created: runnable now, or at a ``start_after`` still ahead (cancel +
        resume never skips a pending retry delay; ``keep_until`` moves with ``start_after``)."""
        resumed_at = "GREATEST(j.start_after, now())"
        return self._set_state(
            Operation.RESUME,
            queue,
            targets,
            f"state = 'created', completed_on = NULL, start_after = {resumed_at}, "
            f"keep_until = {seconds_after(resumed_at, 'j.retention_seconds')}",
            notify=True,
            guard=fits_policy(self.s, "created", accepted(Operation.RESUME)),
        )

    def retry(self, queue: str, targets: Targets) -> Plan[int]:
        """failed -> retry, granting one more attempt."""
        return self._set_state(
            Operation.RETRY,
            queue,
            targets,
            "state = 'retry', retry_limit = j.retry_limit + 1, completed_on = NULL, "
            "start_after = now(), "
            f"keep_until = {seconds_after('now()', 'j.retention_seconds')}",
            notify=True,
            guard=fits_policy(self.s, "retry", accepted(Operation.RETRY)),
        )

    def _set_state(
        self,
        operation: Operation,
        queue: str,
        targets: Targets,
        change: str,
        *,
        notify: bool = False,
        guard: str = "true",
        finishes: bool = False,
    ) -> Plan[int]:
        """``change`` the targets in a state ``operation`` accepts (the transition table's)
        that meet ``guard``; with ``notify``, the jobs are runnable again: listening workers
        are woken; with ``finishes``, the change finishes the jobs: their waiters are
        woken."""
        note = self._note if finishes else ""
        sql = f"""UPDATE {self.s}.job j SET {change}
            FROM (SELECT DISTINCT id FROM unnest($2::uuid[]) AS u(id)) t
            WHERE j.name = $1 AND j.id = t.id AND {targeted_state(operation)} AND {guard}
            RETURNING j.id{note}"""
        params: tuple[Any, ...] = (queue, targets.ids)
        if not (notify and self.capabilities.listen_notify):
            return self._single(operation.value, sql, params, rowcount)

        # The NOTIFY is a statement of its own in the same transaction, not a CTE of the
        # UPDATE: sharded Citus runs a statement routed to the queue's one shard whole on the
        # worker holding it, whose notifications reach no listener of the coordinator
        # (measured on Citus 13.2.2; docs/engines.md).
        def steps() -> Steps[int]:
            changed = yield Statement(sql, params)
            if changed:
                yield Statement(
                    "SELECT pg_notify($1::text, $2::text) IS NULL AS sent", (channel(self), queue)
                )
            return len(changed)

        return self._plan(operation.value, steps, transaction=True)

    def delete_jobs(self, queue: str, targets: Targets) -> Plan[int]:
        """Delete jobs in any state."""
        sql = f"DELETE FROM {self.s}.job WHERE name = $1 AND id = ANY($2::uuid[]) RETURNING id"
        return self._single("delete_jobs", sql, (queue, targets.ids), rowcount)

    def get_job(self, queue: str, job_id: uuid.UUID) -> Plan[Job | None]:
        """One job, or None."""
        return self._single(
            "get_job",
            f"SELECT {read_job_columns('j')} FROM {self.s}.job j "
            "WHERE j.name = $1 AND j.id = $2::uuid",
            (queue, job_id),
            lambda rows: Job.from_row(rows[0]) if rows else None,
        )
