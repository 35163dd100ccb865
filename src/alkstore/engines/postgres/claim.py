"""Fetching: the claim, as one of three strategies chosen once from the capabilities.

- :data:`BY_TUPLE_ID`: ``FOR UPDATE SKIP LOCKED``, the locked rows re-found by ``ctid``;
- :data:`BY_KEY`: ``FOR UPDATE SKIP LOCKED``, the locked rows re-found by ``(name, id)``;
- :data:`RECHECK`: no row locks; an atomic ``UPDATE`` that rechecks the state, so that of two
  fetchers picking the same rows only one claims each.

The first strategy starts its walk at the queue's mark (:mod:`.claim_marks`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import attrs

from ...core.capabilities import Capabilities
from ...core.errors import QueueNotFound
from ...core.lean import LeanJob
from ...core.options import PLAIN_FETCH, FetchOptions, Policy
from ...core.plans import MAX_RACE_RERUNS, Plan, Row, Statement, Steps
from ...core.records import Handoff, Job, as_int
from ...core.states import Operation
from ...core.targets import Targets
from . import claim_gate
from .claim_marks import CLEARS_WHEN_CHANGED, HEAD, ClaimMarks, Key
from .policies import (
    PLAIN_GATE,
    QueueHintsMixin,
    QueueRules,
    claim_collided,
    keyed_claim_sql,
    lock_free_claim_sql,
)
from .schema import rows_table
from .settle import SettleMixin, unflowed_complete_ctes
from .sql import (
    RETURNED_JOB_COLUMNS,
    accepted,
    returned_columns,
    seconds_after,
    target_params,
)

T = TypeVar("T")

RECLAIM_ROUNDS = 3
"""How many more claims a ctid claim makes for rows it locked but could not re-find."""


@attrs.frozen
class ClaimStrategy:
    """How a claim picks queued rows of queue ``$1`` and re-finds the ones it picked."""

    name: str
    key: str
    """The columns the pick returns."""
    join: str
    """How the UPDATE of the job table re-finds the picked rows ``next`` (its FROM and
    WHERE)."""
    skip_locked: bool
    """Pick with ``FOR UPDATE SKIP LOCKED``; else the UPDATE rechecks the state."""
    counts_picked: bool
    """The claim also says how many rows it locked: it may fail to re-find some (a ctid
    lookup under the statement's snapshot misses a row changed since), and claims again."""
    batch_limit: str = "$2"
    """The ``LIMIT`` of a claim of up to ``$2`` jobs (one job has statements with ``1``
    written in)."""
    rows_join: str | None = None
    """How the UPDATE re-finds the picked rows in the table of the queues without a
    partition of their own (:func:`~.schema.rows_table`), which it then updates instead of
    the job table; None: every claim updates the job table."""
    marked: bool = False
    """The claims may start their walk at a key bound as three parameters (:mod:`.claim_marks`):
    each claim has a second statement that does, and every claim reports the server's time
    for its statement (``took``)."""

    def statements(
        self,
        s: str,
        limit: str,
        returned: str = RETURNED_JOB_COLUMNS,
        *,
        unless: str = "",
        rows_table: str | None = None,
        mark_at: int | None = None,
    ) -> tuple[str, str]:
        """The CTEs that pick at most ``limit`` queued jobs (the last one named ``next``)
        and the UPDATE of those rows that returns the claimed jobs (their columns
        ``returned``); ``unless``, a condition on the rest of the statement, makes it claim
        nothing. ``rows_table``: the queue has no partition of its own and its rows are in
        that table. With ``mark_at`` (a :attr:`marked` strategy's), the pick starts at the key
        bound at ``mark_at`` to ``mark_at + 2``."""
        queued = accepted(Operation.FETCH)
        # The gate (one primary-key read of the queue row) keeps the plain claim off a queue
        # that is paused or whose policy or limit needs the keyed claim (policies.py).
        gate = PLAIN_GATE.format(s=s)
        if unless:
            gate += f" AND NOT ({unless})"
        lock = " FOR UPDATE SKIP LOCKED" if self.skip_locked else ""

        def walk(bound: str, walk_limit: str) -> str:
            return f"""SELECT {self.key} FROM {s}.job
                WHERE name = $1 AND state IN {queued} AND start_after <= now()
                    AND {bound}{gate}
                ORDER BY priority DESC, created_on, id LIMIT {walk_limit}{lock}"""

        if mark_at is not None:
            picks = _marked_walks(walk, limit, mark_at)
        else:
            picks = f"next AS ({walk('', limit)})"
        # Without SKIP LOCKED two fetchers may pick the same rows; the recheck lets only one
        # of them claim each (the other gets fewer rows, never the same job).
        recheck = "" if self.skip_locked else f" AND j.state IN {queued}"
        table, join = "job", self.join
        if rows_table is not None and self.rows_join is not None:
            table, join = rows_table, self.rows_join
        update = f"""UPDATE {s}.{table} j SET state = 'active', started_on = now(),
                heartbeat_on = {seconds_after("now()", "0 * j.heartbeat_seconds")},
                retry_count = CASE WHEN j.started_on IS NULL THEN j.retry_count
                                   ELSE j.retry_count + 1 END
            {join}{recheck}
            RETURNING {returned}"""
        return picks, update

    def fetch_sql(
        self,
        s: str,
        limit: str,
        returned: str = RETURNED_JOB_COLUMNS,
        rows_table: str | None = None,
        *,
        from_mark: bool = False,
    ) -> str:
        """The claim of up to ``limit`` jobs of queue ``$1`` (``rows_table``: as in
        :meth:`statements`); ``from_mark`` (a :attr:`marked` strategy's): the claim starts at
        the key in the next three parameters."""
        mark_at = (2 if limit == "1" else 3) if from_mark else None
        picks, update = self.statements(s, limit, returned, rows_table=rows_table, mark_at=mark_at)
        if not self.counts_picked:
            return f"WITH {picks} {update}"
        return f"""WITH {picks}, claimed AS ({update})
            SELECT n.picked{self._took_column}, c.*
            FROM ({self._picked}) n LEFT JOIN claimed c ON true"""

    @property
    def _took_column(self) -> str:
        """The ``took`` column of a :attr:`marked` claim's result (after ``picked``)."""
        return ", n.took" if self.marked else ""

    @property
    def _picked(self) -> str:
        """How many rows the pick locked (``picked``) and, for a :attr:`marked` claim, the
        server's seconds for the statement until then (``took``): counted after the walk,
        before the rows are updated."""
        took = ", extract(epoch FROM clock_timestamp() - statement_timestamp())::float8 AS took"
        return f"SELECT count(*) AS picked{took if self.marked else ''} FROM next"

    def complete_and_fetch_sql(
        self,
        s: str,
        returned: str = RETURNED_JOB_COLUMNS,
        *,
        one: bool = False,
        rows_table: str | None = None,
        from_mark: bool = False,
        note: str = "",
    ) -> str:
        """``complete`` of the targets at ``$3``/``$4`` (output ``$5``), then the claim of up
        to ``$2`` jobs of queue ``$1``, in one statement; with ``one``, the claim of one job,
        the targets at ``$2``/``$3`` and the output ``$4``. ``from_mark``: the claim starts
        at the key in the three parameters after the output (as in :meth:`fetch_sql`). The
        completion is the one that pays nothing for flows
        (:func:`~.settle.unflowed_complete_ctes`): when a target is a flow parent it
        completes nothing and the statement claims nothing (``flow_parents`` says so); the
        caller then completes with the release of the flow jobs, and claims with a fetch
        after it (which sees the released jobs). ``rows_table``: as in
        :meth:`statements`; ``note``: the engine's :func:`~.sql.result_note`."""
        # The completed rows are active and the claimed ones queued, so the two changes
        # never touch the same row; the LEFT JOIN returns the count when nothing is claimed.
        limit, targets_at = ("1", 2) if one else (self.batch_limit, 3)
        picks, update = self.statements(
            s,
            limit,
            returned,
            unless="EXISTS (SELECT 1 FROM flow_parents)",
            rows_table=rows_table,
            mark_at=targets_at + 3 if from_mark else None,
        )
        completion = unflowed_complete_ctes(s, targets_at, f"${targets_at + 2}", note=note)
        return f"""WITH {completion},
            {picks}, claimed AS ({update})
            SELECT d.completed, r.flow_parents, n.picked{self._took_column}, c.*
            FROM (SELECT count(*) AS completed FROM done) d
            CROSS JOIN (SELECT count(*) AS flow_parents FROM flow_parents) r
            CROSS JOIN ({self._picked}) n
            LEFT JOIN claimed c ON true"""


def _marked_walks(walk: Callable[[str, str], str], limit: str, at: int) -> str:
    """The pick of at most ``limit`` jobs from the key at ``$at`` to ``$at + 2`` (priority,
    created_on, id) on, as a CTE ``next``: one ordered walk of job_fetch, run for three
    ranges of it in turn -- the higher priorities from their head, the mark's priority from
    the mark, the lower priorities from their head -- until ``limit`` jobs are picked (a
    range is walked only while jobs are still wanted, so that no row is locked that is not
    claimed). Each range is bounded by index conditions: the mark's is one range of
    job_fetch (priority DESC, created_on, id) that starts at the mark, past the entries of
    the jobs claimed before it.

    One walk over a list of ranges rather than a walk per range: the server plans the claim
    as one walk (measured at 10 a claim on PostgreSQL 15: 0.44 ms of planning against 0.74
    for three walks and 0.39 for the walk from the head alone, which a driver without
    prepared statements pays on every claim), and the mark is bound only through the
    ranges' subqueries, so that the plan made for the values costs what the generic plan
    costs and a prepared claim keeps the generic one (bound as plain parameters, the plans
    made for them looked cheaper and the server planned anew on almost every claim:
    docs/benchmarks.md)."""
    p, c, i = (
        f"(SELECT ${at}::int8)",
        f"(SELECT ${at + 1}::timestamptz)",
        f"(SELECT ${at + 2}::uuid)",
    )
    # Every key is after (-infinity, the least uuid): created_on and id are NOT NULL.
    low = "'-infinity'::timestamptz, '00000000-0000-0000-0000-000000000000'::uuid"
    # priority (int) against int8 bounds is still an index condition (btree's integer_ops
    # compares across the integer types), and p + 1 cannot overflow.
    ranges = f"""(VALUES ({p} + 1, 2147483647::int8, {low}), ({p}, {p}, {c}, {i}),
        (-2147483648::int8, {p} - 1, {low})) r(low, high, created_on, id)"""
    bound = "priority >= r.low AND priority <= r.high AND (created_on, id) >= (r.created_on, r.id)"
    lateral = walk(bound + " AND ", limit)
    return f"next AS (SELECT w.* FROM {ranges} CROSS JOIN LATERAL ({lateral}) w LIMIT {limit})"


# "j.name = $1" as well: sharded Citus routes the UPDATE to the queue's one shard only by a
# filter on the distribution column with the value itself; a join to the picked names alone
# ran it on all 32 shards (EXPLAIN on a real Citus 13.2.2 cluster: Task Count 32, now 1).
_BY_NAME_AND_ID = "FROM next WHERE j.name = $1 AND j.name = next.name AND j.id = next.id"

BY_TUPLE_ID = ClaimStrategy(
    # A direct tuple fetch instead of a primary-key descent per row (measured: 27 % of the
    # server's time per job at 100 a fetch). A ctid is unique within one partition, and only
    # the partition of queue $1 holds rows named $1, so "name = $1 AND ctid = ..." is one row.
    # The picked ctids as one array, a TID scan in every plan: joined to the CTE, the generic
    # plan (which cannot know the LIMIT) hashed every row of the table to find them (8 ms a
    # one-job claim at 20,000 jobs), so the server re-planned the claim on every call.
    "skip-locked-by-tuple-id",
    "ctid, tableoid",
    "WHERE j.name = $1 AND j.ctid = ANY(ARRAY(SELECT ctid FROM next))",
    skip_locked=True,
    counts_picked=True,
    # The batch size as a subquery: PostgreSQL then costs every plan of the claim under the
    # same unknown limit, so a prepared claim keeps one generic plan (the ordered walk of
    # job_fetch, which is the cheapest plan for any queue and any limit) instead of being
    # planned anew on every call for the plain "$2". Measured (docs/benchmarks.md, "A claim
    # planned once"): the server's CPU per job at 10 a fetch -30 %, at 100 -6 %. Only while
    # the job table has no partition but the default one: a generic plan cannot prune
    # partitions, so with a queue's own partition PostgreSQL goes back to a plan per call.
    batch_limit="(SELECT $2::bigint)",
    marked=True,
    # A queue without a partition of its own: its rows are updated in their table, found by
    # tableoid and ctid alone. "name = $1" is an index condition on job_pkey, and a plan made
    # while the statistics counted a handful of the queue's jobs re-found the rows by walking
    # every version of them in job_pkey, which a held transaction keeps (docs/benchmarks.md,
    # "A claim planned without statistics"); through the job table, without the name, each
    # partition would be probed. The tableoid keeps a stale guess (the queue was recreated
    # with a partition of its own) from touching another partition's rows at those ctids:
    # the claim then re-finds nothing and claims again.
    rows_join="""WHERE j.tableoid = ANY(ARRAY(SELECT tableoid FROM next))
        AND j.ctid = ANY(ARRAY(SELECT ctid FROM next))""",
)
BY_KEY = ClaimStrategy(
    # The join is on the whole key (name, id): with the name as "$1" the planner may
    # hash-join over every row of the queue, which under SERIALIZABLE takes predicate locks
    # on all of them (the emulated CockroachDB claim ran 20 x slower).
    "skip-locked-by-key",
    "name, id",
    _BY_NAME_AND_ID,
    skip_locked=True,
    counts_picked=False,
)
RECHECK = ClaimStrategy(
    "update-with-recheck", "name, id", _BY_NAME_AND_ID, skip_locked=False, counts_picked=False
)


def _job_builder(include_metadata: bool) -> Callable[[Row], Job]:
    """How a claimed row becomes a job: full, or lean (a full row read as a lean job too)."""
    return Job.from_row if include_metadata else LeanJob.from_row


def keyed_claims_of(queue: str) -> str:
    """The :attr:`~alkstore.core.plans.Plan.serial` key of the keyed fetches of ``queue``.

    Measured (docs/benchmarks.md, "Keyed policies"): eight consumers of one process on a
    100-key queue at batch 100, seven of which find every key busy, spent the server's CPU
    on seven walks of the keys side by side; one at a time, the consumer that has work to
    claim gets it.
    """
    return "keyed-claim:" + queue


def claim_for(caps: Capabilities) -> ClaimStrategy:
    """The claim an engine with ``caps`` uses."""
    if not caps.skip_locked:
        return RECHECK
    return BY_TUPLE_ID if caps.tuple_ids else BY_KEY


class ClaimMixin(QueueHintsMixin, SettleMixin):
    """Plans of ``fetch`` and ``complete_and_fetch``."""

    # The strategy and its statements are chosen and built once per engine: building them
    # per call showed up in the client's profile of one-job fetches.
    @functools.cached_property
    def claim(self) -> ClaimStrategy:
        """The claim strategy, from the effective capabilities."""
        return claim_for(self.capabilities)

    def _claim_sql(self, kind: str, full: bool, one: bool, queue: str) -> str:
        """:meth:`_shaped_claim_sql` walking from the head of the queue."""
        return self._shaped_claim_sql(kind, full, one, queue, from_mark=False)

    def _shaped_claim_sql(
        self, kind: str, full: bool, one: bool, queue: str, *, from_mark: bool
    ) -> str:
        """The ``kind`` (``fetch`` or ``complete_and_fetch``) statement returning ``full``
        jobs (else lean ones), claiming ``one`` job or up to ``$2`` of ``queue``, ``from_mark``
        (:attr:`ClaimStrategy.marked`) or from the head; built once per engine for the
        queues with a partition of their own and once for the others.

        One job has statements of their own with the limit written in. The server plans a
        prepared statement once (a generic plan) only where that plan is not costed above
        the plans made for the values; under a limit it cannot see (``$2``) it costs a tenth
        of the queue, so every claim was planned anew: about 240 µs of server CPU a call,
        twice the claim's execution at one job a fetch (docs/benchmarks.md). A batch's
        limit is the strategy's :attr:`~ClaimStrategy.batch_limit`."""

        own = self.own_partition_queues.get(queue, False)
        rows = None if own else rows_table(self.capabilities)

        def build() -> str:
            returned = returned_columns(full)
            if kind == "fetch":
                limit = "1" if one else self.claim.batch_limit
                return self.claim.fetch_sql(self.s, limit, returned, rows, from_mark=from_mark)
            return self.claim.complete_and_fetch_sql(
                self.s,
                returned,
                one=one,
                rows_table=rows,
                from_mark=from_mark,
                note=self._note,
            )

        return self.built_once(("claim", kind, full, one, own, from_mark), build)

    def _claim_from(
        self,
        kind: str,
        full: bool,
        one: bool,
        queue: str,
        params: tuple[Any, ...],
        start: Key | None,
    ) -> Statement:
        """The claim (``kind``, ``full``, ``one``: as in :meth:`_shaped_claim_sql`) with
        ``params``, its walk from ``start``: the head of the queue (None, :data:`HEAD`) or a
        mark, bound after ``params``."""
        if start is None or start == HEAD:
            return Statement(self._claim_sql(kind, full, one, queue), params)
        sql = self._shaped_claim_sql(kind, full, one, queue, from_mark=True)
        return Statement(sql, (*params, *start))

    @functools.cached_property
    def claim_marks(self) -> ClaimMarks:
        """Where this engine's plain claims start their walk, per queue."""
        return ClaimMarks()

    def _plan(self, name: str, steps: Any, *, transaction: bool = False, **kw: Any) -> Plan[Any]:
        marks = self.claim_marks
        if name in CLEARS_WHEN_CHANGED:
            moves = steps

            def steps() -> Steps[int]:
                moved: int = yield from moves()
                if moved:
                    marks.clear()
                return moved

        else:
            marks.before(name)
        return super()._plan(name, steps, transaction=transaction, **kw)

    def _single(
        self,
        name: str,
        sql: str,
        params: Sequence[Any],
        result: Callable[[list[Row]], T],
        **kw: Any,
    ) -> Plan[T]:
        self.claim_marks.before(name)
        return super()._single(name, sql, params, result, **kw)

    def _claim_start(self, queue: str) -> Key | None:
        """Where the next plain claim of ``queue`` starts its walk; None: the strategy walks
        from the head always."""
        return self.claim_marks.start(queue) if self.claim.marked else None

    @functools.cached_property
    def gated_claim(self) -> ClaimStrategy:
        """The claim the gate runs (:mod:`.claim_gate`): from the head always, since the
        gate function binds no mark."""
        return attrs.evolve(self.claim, marked=False)

    @functools.cached_property
    def claim_gates(self) -> claim_gate.GateSwitch:
        """Which plain claims of each queue pass the gate (``claim_gate="auto"``)."""
        return claim_gate.GateSwitch()

    def _gate_ticket(self, queue: str) -> claim_gate.Ticket | None:
        """How the next plain claim of ``queue`` goes (through the gate or not); None: the
        engine never gates."""
        if self.claim_gate == claim_gate.AUTO:
            return self.claim_gates.start(queue)
        return claim_gate.ALWAYS if self.claim_gate else None

    def _gated_start(self) -> Key | None:
        """Where the reclaims after a gated claim walk from: the head."""
        return HEAD if self.claim.marked else None

    def _plain_claim(
        self, queue: str, batch_size: int, full: bool, start: Key | None = None
    ) -> Statement:
        """The plain claim of up to ``batch_size`` jobs of ``queue`` (``full`` jobs, else
        lean), its walk from ``start`` (:meth:`_claim_start`)."""
        if batch_size == 1:
            return self._claim_from("fetch", full, True, queue, (queue,), start)
        return self._claim_from("fetch", full, False, queue, (queue, batch_size), start)

    def _fresh_claim(
        self, queue: str, batch_size: int, full: bool, ticket: claim_gate.Ticket | None = None
    ) -> Steps[list[Job]]:
        """The plain claim from the queue's mark (not gated: ``ticket``), and its claimed
        jobs."""
        start = self._claim_start(queue)
        rows = yield self._plain_claim(queue, batch_size, full, start)
        return (yield from self._claimed_jobs(queue, rows, full, start, ticket))

    def _claimed_jobs(
        self,
        queue: str,
        rows: list[Row],
        include_metadata: bool = True,
        start: Key | None = None,
        ticket: claim_gate.Ticket | None = None,
    ) -> Steps[list[Job]]:
        """The claimed jobs of ``rows`` (a claim from ``start``, gated or not as ``ticket``
        says) in fetch order (an empty claim checks the queue); the queue's mark learns of
        the claim (it moves to the first of them), and the auto gate of its round trip."""
        build = _job_builder(include_metadata)
        jobs = [build(r) for r in rows if r["id"] is not None]
        if self.claim.counts_picked:
            # A queued row that another transaction changed (still queued) after this
            # statement's snapshot is locked in its new version, which a ctid lookup under
            # the old snapshot cannot see: it stays queued, unclaimed. Claim that many again,
            # so that a fetch does not come back short while such jobs wait.
            missing = as_int(rows[0]["picked"]) - len(jobs)
            for _ in range(RECLAIM_ROUNDS):
                if missing <= 0:
                    break
                more = yield self._plain_claim(queue, missing, include_metadata, start)
                claimed = [build(r) for r in more if r["id"] is not None]
                jobs += claimed
                missing = as_int(more[0]["picked"]) - len(claimed)
        if not jobs:
            # Only an empty fetch pays for telling "no jobs" from "no such queue" (and for
            # noticing a queue that now needs the keyed claim).
            yield from self._read_rules(queue)
        jobs.sort(key=Job.sort_key)
        if ticket is not None:
            self.claim_gates.done(queue, ticket)
        if start is not None:
            self.claim_marks.advance(queue, start, jobs, rows[0].get("took"))
        return jobs

    def fetch(
        self, queue: str, batch_size: int, options: FetchOptions = PLAIN_FETCH
    ) -> Plan[list[Job]]:
        """Claim up to ``batch_size`` queued jobs whose time has come; returns them in order.

        The plain claim serves a queue known to need nothing else; a keyed queue without
        limits, on an engine that can, the lock-free keyed claim; any other fetch is the keyed
        claim under the queue row's lock (:mod:`.policies`).
        """
        if not (options.plain and self.plain_queues.get(queue)):
            policy = self.keyed_unlimited_queues.get(queue)
            if policy is not None and options.group_concurrency is None and self.lock_free_keyed:
                return self._lock_free_fetch(queue, batch_size, options, policy)
            return self._keyed_fetch(queue, batch_size, options)
        full = options.include_metadata

        def steps() -> Steps[list[Job]]:
            ticket = self._gate_ticket(queue)
            if ticket is None or not ticket.gated:
                return (yield from self._fresh_claim(queue, batch_size, full, ticket))
            rows = yield claim_gate.fetch_statement(self, queue, batch_size, full)
            return (yield from self._claimed_jobs(queue, rows, full, self._gated_start(), ticket))

        # A fetcher that keeps losing the claim race to others gets no jobs this time, like
        # one that found none; the jobs stay queued for the next fetch.
        return self._plan("fetch", steps, on_contention=list)

    def _lock_free_fetch(
        self, queue: str, batch_size: int, options: FetchOptions, policy: Policy
    ) -> Plan[list[Job]]:
        """The keyed claim without the queue row's lock (:func:`.policies.lock_free_claim_sql`),
        run again when it lost a key to a concurrent claim."""
        full = options.include_metadata
        sql = self._lock_free_sql(policy, options.ignore_start_after, full)

        def steps() -> Steps[list[Job]]:
            rows = yield Statement(sql, (queue, batch_size))
            return self._lock_free_jobs(queue, rows, full)

        return self._plan(
            "fetch",
            steps,
            on_contention=list,
            lost_race=claim_collided,
            serial=keyed_claims_of(queue),
        )

    def _lock_free_sql(self, policy: Policy, ignore_start_after: bool, full: bool) -> str:
        """:func:`.policies.lock_free_claim_sql` of one shape, built once per engine."""
        return self.built_once(
            ("lock-free", policy, ignore_start_after, full),
            lambda: lock_free_claim_sql(
                self.s,
                policy,
                ignore_start_after=ignore_start_after,
                returned=returned_columns(full),
            ),
        )

    def _lock_free_jobs(self, queue: str, rows: list[Row], full: bool) -> list[Job]:
        """The jobs a lock-free keyed claim returned, in fetch order; learns the queue row
        it saw (a queue paused or given a limit meanwhile is served by the locked claim from
        the next fetch on)."""
        if rows[0]["queue_policy"] is None:
            raise QueueNotFound(queue)
        self.learn(queue, QueueRules.from_row(rows[0], "queue_"))
        build = _job_builder(full)
        jobs = [build(r) for r in rows if r["id"] is not None]
        jobs.sort(key=Job.sort_key)
        return jobs

    def _keyed_complete_and_fetch(
        self,
        queue: str,
        targets: Targets,
        output_json: str | None,
        batch_size: int,
        full: bool,
        policy: Policy,
    ) -> Plan[Handoff]:
        """``complete_and_fetch`` of a keyed queue without limits: the completion, then the
        lock-free keyed claim, in one transaction (one commit: a worker's chain through one
        key pays one WAL flush a step, not two). The claim's snapshot sees the completion, so
        the completed jobs' keys are free and flow jobs it released are claimed in fetch
        order, as by a ``fetch`` right after. Not one statement: the claim's recursive key
        walk beside the release of flow jobs on other queues is a statement sharded Citus
        refuses.

        A claim that lost a key to a concurrent claim rolls the transaction back, completion
        included, and the plan runs again; its last run completes only and claims nothing,
        so the completion is never lost to the race."""
        fetch_sql = self._lock_free_sql(policy, False, full)
        runs = 0

        def steps() -> Steps[Handoff]:
            nonlocal runs
            runs += 1
            completed: int = yield from self.complete(queue, targets, output_json).steps()
            if runs > MAX_RACE_RERUNS:
                return Handoff(completed, [])
            rows = yield Statement(fetch_sql, (queue, batch_size))
            return Handoff(completed, self._lock_free_jobs(queue, rows, full))

        return self._plan("complete_and_fetch", steps, transaction=True, lost_race=claim_collided)

    def _keyed_fetch(self, queue: str, batch_size: int, options: FetchOptions) -> Plan[list[Job]]:
        """The claim under the queue row's lock: policies, limits, groups (see .policies)."""
        groups = options.group_concurrency
        tiers = sorted(groups.tiers.items()) if groups is not None else []
        group_params = (
            None if groups is None else groups.default,
            [t for t, _n in tiers],
            [n for _t, n in tiers],
        )

        def steps() -> Steps[list[Job]]:
            rules = yield from self._lock_rules(queue, options.ignore_start_after)
            if rules is None or rules.paused:
                return []
            full = options.include_metadata
            if rules.plain and options.plain:
                return (yield from self._fresh_claim(queue, batch_size, full))
            sql = self._keyed_sql(
                rules.policy,
                options.ignore_start_after,
                groups is not None,
                rules.concurrency_limit is not None,
                full,
            )
            params: tuple[Any, ...] = (queue, batch_size, rules.concurrency_limit)
            if groups is not None:
                params += group_params
            rows = yield Statement(sql, params)
            build = _job_builder(full)
            jobs = [build(r) for r in rows]
            jobs.sort(key=Job.sort_key)
            return jobs

        # A singleton or stately claim under the lock still races the lock-free claims of
        # other fetchers (a fetch with group limits here, a plain fetch there).
        return self._plan(
            "fetch",
            steps,
            transaction=True,
            on_contention=list,
            lost_race=claim_collided,
            serial=keyed_claims_of(queue),
        )

    def _keyed_sql(
        self, policy: Policy, ignore_start_after: bool, grouped: bool, limited: bool, full: bool
    ) -> str:
        """The keyed claim statement of one shape (``full``: returning full jobs, else lean
        ones), built once per engine."""
        return self.built_once(
            ("keyed", policy, ignore_start_after, grouped, limited, full),
            lambda: keyed_claim_sql(
                self.s,
                policy,
                ignore_start_after=ignore_start_after,
                grouped=grouped,
                limited=limited,
                returned=returned_columns(full),
            ),
        )

    def complete_and_fetch(
        self,
        queue: str,
        targets: Targets,
        output_json: str | None,
        batch_size: int,
        include_metadata: bool = True,
    ) -> Plan[Handoff] | None:
        """``complete`` then ``fetch`` in one statement (a keyed queue without limits: in
        one transaction); None where the engine cannot change the job table twice in one
        statement, or the queue needs the claim under the queue row's lock (run the two
        plans one after the other)."""
        if not self.plain_queues.get(queue):
            policy = self.keyed_unlimited_queues.get(queue)
            if policy is None or not self.lock_free_keyed:
                return None
            return self._keyed_complete_and_fetch(
                queue, targets, output_json, batch_size, include_metadata, policy
            )
        if not self.capabilities.multi_mutation_cte:
            return None
        full = include_metadata
        one = batch_size == 1
        completion = (queue, *target_params(targets), output_json)
        params = (queue, *([] if one else [batch_size]), *completion[1:])

        def steps() -> Steps[Handoff]:
            ticket = self._gate_ticket(queue)
            if ticket is None or not ticket.gated:
                start = self._claim_start(queue)
                rows = yield self._claim_from("complete_and_fetch", full, one, queue, params, start)
            else:
                start = self._gated_start()
                rows = yield claim_gate.handoff_statement(
                    self, queue, targets, output_json, batch_size, full
                )
            completed = as_int(rows[0]["completed"])
            if as_int(rows[0]["flow_parents"]):
                # Plus what the statement completed: nothing (a flow parent stops it whole),
                # or on sharded Citus the targets that were not flow parents.
                completed += yield from self.flow_complete(completion, False)
                # The released flow jobs may sort before the mark: walk from the head.
                self.claim_marks.forget(queue)
                return Handoff(completed, (yield from self._fresh_claim(queue, batch_size, full)))
            jobs = yield from self._claimed_jobs(queue, rows, full, start, ticket)
            return Handoff(completed, jobs)

        # No contention result: under contention the completion must not be reported lost.
        return self._plan("complete_and_fetch", steps)
