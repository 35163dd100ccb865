"""Queue policies, limits and groups in the claim (docs/queues.md).

A queue whose claim needs nothing but the plain SKIP LOCKED walk (``standard``, ``short`` and
``exclusive`` without a ``concurrency_limit``) keeps the plain claim of :mod:`.claim`, gated
on the queue row so that a stale guess never hands out a job the queue's rules forbid. Every
other claim (``singleton``, ``stately``, ``key_strict_fifo``, a ``concurrency_limit``,
``group_concurrency`` or ``ignore_start_after``) is a *keyed claim*, in one of two forms:

- *lock-free* (:func:`lock_free_claim_sql`): a ``singleton``, ``stately`` or
  ``key_strict_fifo`` queue without a limit, fetched without group limits, on an engine with
  SKIP LOCKED under READ COMMITTED. One statement picks each free key's head, locks it
  ``FOR UPDATE SKIP LOCKED`` and claims it; the unique index of active jobs per key
  (``job_policy_active``) refuses the second of two claims that picked different heads of
  one key, and that plan runs again (:func:`claim_collided`).
- *under the queue row's lock* (:func:`keyed_claim_sql`): a transaction that first locks the
  queue row (``SELECT … FOR UPDATE``, which every engine accepts) and then claims in one
  statement. The lock serialises these claims of one queue, so the second statement counts
  the active jobs (per queue, per key, per group) as they are after every earlier claim
  committed: two fetchers can never both take the last free slot. The claim statement itself
  uses neither SKIP LOCKED nor ctid: its UPDATE rechecks the state, like the claim of engines
  without SKIP LOCKED.
"""

from __future__ import annotations

import functools

import attrs

from ...core.errors import QueueNotFound
from ...core.options import KEYED_CLAIM_POLICIES, Policy
from ...core.plans import Isolation, Row, Statement, Steps
from ...core.records import as_bool, as_opt_int
from ...core.states import QUEUED
from .base import EngineBase
from .schema import in_list
from .sql import RETURNED_JOB_COLUMNS, seconds_after

PLAIN_QUEUE = (
    "NOT pq.paused AND pq.concurrency_limit IS NULL "
    "AND pq.policy NOT IN ('singleton', 'stately', 'key_strict_fifo')"
)
"""The condition on a queue row ``pq`` under which the plain claim may run for its queue."""

PLAIN_GATE = "EXISTS (SELECT 1 FROM {s}.queue pq WHERE pq.name = $1 AND " + PLAIN_QUEUE + ")"
"""The condition under which the plain claim may run for queue ``$1`` (format with ``s``)."""

QUEUE_RULES = "SELECT policy, paused, concurrency_limit, partition FROM {s}.queue WHERE name = $1"
"""What a claim needs to know of queue ``$1`` (format with ``s``)."""


@attrs.frozen
class QueueRules:
    """The parts of a queue row that decide how it is claimed."""

    policy: Policy
    paused: bool
    concurrency_limit: int | None
    own_partition: bool
    """The queue's jobs are in a partition of its own (not the default one)."""

    @classmethod
    def from_row(cls, row: Row, prefix: str = "") -> QueueRules:
        """From a row of :data:`QUEUE_RULES` (its columns named with ``prefix``)."""
        return cls(
            Policy(row[prefix + "policy"]),
            as_bool(row[prefix + "paused"]),
            as_opt_int(row[prefix + "concurrency_limit"]),
            as_bool(row[prefix + "partition"]),
        )

    @property
    def plain(self) -> bool:
        """The plain claim serves this queue (paused or not)."""
        return self.policy not in KEYED_CLAIM_POLICIES and self.concurrency_limit is None

    @property
    def keyed_unlimited(self) -> Policy | None:
        """The keyed policy of a queue without a concurrency limit, else None: where the
        engine can, the lock-free keyed claim serves it (:func:`lock_free_claim_sql`)."""
        if self.policy in KEYED_CLAIM_POLICIES and self.concurrency_limit is None:
            return self.policy
        return None


class QueueHintsMixin(EngineBase):
    """A per-engine guess of which queues the plain claim and plain send serve.

    Only a guess: the plain statements are gated on the queue row, so a stale guess (another
    process changed a queue's limit) costs one empty fetch, never a broken rule.
    """

    @functools.cached_property
    def plain_queues(self) -> dict[str, bool]:
        """queue name -> whether the plain claim serves it (absent: not known yet)."""
        return {}

    @functools.cached_property
    def standard_queues(self) -> dict[str, bool]:
        """queue name -> whether its policy is ``standard`` (the plain send serves it)."""
        return {}

    @functools.cached_property
    def keyed_unlimited_queues(self) -> dict[str, Policy | None]:
        """queue name -> :attr:`QueueRules.keyed_unlimited` (absent: not known yet)."""
        return {}

    @functools.cached_property
    def own_partition_queues(self) -> dict[str, bool]:
        """queue name -> :attr:`QueueRules.own_partition` (absent: not known yet)."""
        return {}

    def learn(self, name: str, rules: QueueRules) -> None:
        """Remember what the queue row said."""
        self.plain_queues[name] = rules.plain
        self.standard_queues[name] = rules.policy is Policy.STANDARD
        self.keyed_unlimited_queues[name] = rules.keyed_unlimited
        self.own_partition_queues[name] = rules.own_partition

    def forget(self, name: str) -> None:
        """Drop the guesses about a queue (deleted, or its limit changed)."""
        self.plain_queues.pop(name, None)
        self.standard_queues.pop(name, None)
        self.keyed_unlimited_queues.pop(name, None)
        self.own_partition_queues.pop(name, None)

    @functools.cached_property
    def lock_free_keyed(self) -> bool:
        """The engine claims keyed queues without the queue row's lock where it may: it has
        SKIP LOCKED under READ COMMITTED (a stricter isolation would fail the recheck of a row
        changed since the snapshot instead of skipping or re-reading it)."""
        return self.capabilities.skip_locked and self.isolation in (
            None,
            Isolation.READ_COMMITTED,
        )

    def _read_rules(self, queue: str, lock: str = "") -> Steps[QueueRules]:
        """Read (``lock``: and lock) the queue row; :class:`QueueNotFound` when missing."""
        rows = yield Statement(QUEUE_RULES.format(s=self.s) + lock, (queue,))
        if not rows:
            raise QueueNotFound(queue)
        rules = QueueRules.from_row(rows[0])
        self.learn(queue, rules)
        return rules

    def _lock_rules(self, queue: str, ignore_start_after: bool) -> Steps[QueueRules | None]:
        """Lock and read the queue row for a keyed claim; None when there is nothing to claim.

        Where the engine has SKIP LOCKED under READ COMMITTED, a fetcher that finds the row
        locked by another claim does not queue behind it blind: it first looks (unlocked) for
        a job the claim could take, and returns None when there is none. Queued behind the
        lock, every such fetcher walked all the keys again once it got the row, while the
        fetcher with work to take waited behind them (docs/queues.md). "None" is only said
        from a snapshot without a claimable job, so it is the answer a fetch a moment earlier
        would have had; work that the lock holder has not claimed yet shows as claimable, and
        then this fetcher waits for the lock as before.
        """
        if not self.lock_free_keyed:
            return (yield from self._read_rules(queue, " FOR UPDATE"))
        rows = yield Statement(QUEUE_RULES.format(s=self.s) + " FOR UPDATE SKIP LOCKED", (queue,))
        if rows:
            rules = QueueRules.from_row(rows[0])
            self.learn(queue, rules)
            return rules
        rules = yield from self._read_rules(queue)
        if rules.paused:
            return rules
        probe = self._probe_sql(rules.policy, ignore_start_after)
        if not (yield Statement(probe, (queue,))):
            return None
        return (yield from self._read_rules(queue, " FOR UPDATE"))

    def _probe_sql(self, policy: Policy, ignore_start_after: bool) -> str:
        """:func:`claimable_probe_sql` of one shape, built once per engine."""
        return self.built_once(
            ("probe", policy, ignore_start_after),
            lambda: claimable_probe_sql(self.s, policy, ignore_start_after),
        )


def keyed_claim_sql(
    s: str,
    policy: Policy,
    *,
    ignore_start_after: bool,
    grouped: bool,
    limited: bool = True,
    returned: str = RETURNED_JOB_COLUMNS,
) -> str:
    """The claim statement of the keyed claim of a queue with ``policy``.

    Parameters: ``$1`` queue, ``$2`` batch size, ``$3`` the queue's concurrency limit (NULL:
    none), ``$4`` the default group limit (NULL: none), ``$5``/``$6`` tiers and their limits.
    Without ``limited`` (a queue without a limit) the active jobs are not counted: the planner
    ran that count once per claimed row, over the rows the claim had just made active
    (measured: a third of a 100-job singleton claim). The claimed jobs' columns are
    ``returned``. Run only while the transaction holds the queue row's lock.
    """
    queued = in_list(QUEUED)
    due = due_condition(ignore_start_after)
    columns = "j.name, j.id, j.priority, j.created_on, j.start_after, j.group_id, j.group_tier"
    if policy in KEYED_CLAIM_POLICIES:
        ctes = keyed_heads(s, policy, due)
    else:
        ctes = [
            f"""cand AS (SELECT {columns} FROM {s}.job j
                WHERE j.name = $1 AND j.state IN {queued} AND {due})"""
        ]
    if grouped:
        ctes.append(
            f"""group_active AS (SELECT j.group_id, count(*) AS n FROM {s}.job j
                WHERE j.name = $1 AND j.state = 'active' AND j.group_id IS NOT NULL
                GROUP BY j.group_id)"""
        )
        ctes.append(
            """ranked AS (SELECT c.*, row_number() OVER (PARTITION BY c.group_id
                    ORDER BY c.priority DESC, c.created_on, c.id) AS group_rank
                FROM cand c)"""
        )
        ctes.append(
            """grouped AS (SELECT r.* FROM ranked r
                LEFT JOIN group_active a ON a.group_id = r.group_id
                LEFT JOIN unnest($5::text[], $6::int[]) AS t(tier, n) ON t.tier = r.group_tier
                WHERE r.group_id IS NULL OR coalesce(t.n, $4::int) IS NULL
                   OR r.group_rank + coalesce(a.n, 0) <= coalesce(t.n, $4::int))"""
        )
        last = "grouped"
    else:
        last = "cand"
    ctes.append(
        f"""ordered AS (SELECT o.name, o.id, row_number() OVER (
                ORDER BY o.priority DESC, o.created_on, o.id) AS n FROM {last} o
            ORDER BY o.priority DESC, o.created_on, o.id LIMIT $2)"""
    )
    if limited:
        ctes.append(
            f"""picked AS (SELECT o.name, o.id FROM ordered o
                CROSS JOIN (SELECT count(*) AS n FROM {s}.job j
                            WHERE j.name = $1 AND j.state = 'active') a
                WHERE o.n <= $2 AND ($3::int IS NULL OR o.n + a.n <= $3::int))"""
        )
    else:
        ctes.append(
            """picked AS (SELECT o.name, o.id FROM ordered o
                WHERE o.n <= $2 AND $3::int IS NULL)"""
        )
    # The picked ids as one array, so that no plan can turn the lookup around: joined to the
    # CTE, a table without statistics (a new queue) was planned as a walk over every queued
    # row rescanning the picked ones for each (measured: 3.4 s at 20,000 jobs). The array
    # costs at most one scan of the queue's queued rows there (9.9 ms), and one primary-key
    # probe per id once the table has statistics.
    update = f"""UPDATE {s}.job j SET {CLAIM_ASSIGNMENTS}
        WHERE j.name = $1 AND j.id = ANY (ARRAY(SELECT p.id FROM picked p))
            AND j.state IN {queued}
        RETURNING {returned}"""
    return "WITH RECURSIVE " + ",\n".join(ctes) + "\n" + update


CLAIM_ASSIGNMENTS = f"""state = 'active', started_on = now(),
    heartbeat_on = {seconds_after("now()", "0 * j.heartbeat_seconds")},
    retry_count = CASE WHEN j.started_on IS NULL THEN j.retry_count
                       ELSE j.retry_count + 1 END"""
"""The ``SET`` list of a claim's ``UPDATE`` of job ``j``."""


def lock_free_claim_sql(
    s: str,
    policy: Policy,
    *,
    ignore_start_after: bool,
    returned: str = RETURNED_JOB_COLUMNS,
) -> str:
    """The keyed claim without the queue row's lock, of a queue with a keyed ``policy`` and
    neither a concurrency limit nor group limits: ``$1`` queue, ``$2`` batch size.

    It picks each free key's head from the statement's snapshot (:func:`keyed_heads`), locks
    the picked rows ``FOR UPDATE SKIP LOCKED`` (rechecking that they are still queued) and
    claims them. Two fetchers that pick the same head: one locks it, the other skips it. Two
    fetchers that pick different heads of one key (possible for ``singleton`` and ``stately``,
    whose head may change between their snapshots: a newer job of higher priority, a job that
    became due; for ``key_strict_fifo`` a send committed late with an older ``created_on``):
    the second one's ``UPDATE`` hits the unique index ``job_policy_active`` (SQLSTATE 23505,
    or 40P01 when two such claims wait on each other), which rolls its whole statement back
    (:func:`claim_collided`: the plan runs again).

    The queue row gates the claim (a queue paused or given a limit meanwhile is not served by
    it), and the statement returns it in every row (columns ``queue_policy``,
    ``queue_paused``, ``queue_concurrency_limit``, ``queue_partition``, NULL when there is no
    such queue) beside the claimed jobs' columns ``returned``, which are NULL in the one row of
    a claim that took nothing: an empty fetch needs no second statement to tell "no jobs" from
    "no queue".
    """
    queued = in_list(QUEUED)
    ctes = keyed_heads(s, policy, due_condition(ignore_start_after))
    ctes.append(
        """ordered AS (SELECT o.id FROM cand o
            ORDER BY o.priority DESC, o.created_on, o.id LIMIT $2)"""
    )
    ctes.append(
        f"""rules AS (SELECT pq.policy, pq.paused, pq.concurrency_limit, pq.partition
            FROM {s}.queue pq
            WHERE pq.name = $1)"""
    )
    ctes.append(
        f"""locked AS (SELECT j.name, j.id FROM {s}.job j
            WHERE j.name = $1 AND j.id = ANY (ARRAY(SELECT o.id FROM ordered o))
                AND j.state IN {queued}
                AND EXISTS (SELECT 1 FROM rules r WHERE NOT r.paused
                    AND r.concurrency_limit IS NULL AND r.policy = '{policy.value}')
            FOR UPDATE SKIP LOCKED)"""
    )
    ctes.append(
        f"""claimed AS (UPDATE {s}.job j SET {CLAIM_ASSIGNMENTS}
            FROM locked l WHERE j.name = $1 AND j.name = l.name AND j.id = l.id
                AND j.state IN {queued}
            RETURNING {returned})"""
    )
    return (
        "WITH RECURSIVE "
        + ",\n".join(ctes)
        + """
        SELECT r.policy AS queue_policy, r.paused AS queue_paused,
            r.concurrency_limit AS queue_concurrency_limit, r.partition AS queue_partition, c.*
        FROM (SELECT 1) one LEFT JOIN rules r ON true LEFT JOIN claimed c ON true"""
    )


UNIQUE_VIOLATION = "23505"
DEADLOCK_DETECTED = "40P01"


def claim_collided(sqlstate: str | None, _constraint: str | None) -> bool:
    """A claim lost the race for a key to a concurrent claim (see
    :func:`lock_free_claim_sql`): the only unique indexes a claim's ``UPDATE`` enters rows
    into are the policies' indexes of active jobs, and two claims that each wait for the
    other's entry end in a deadlock. The constraint's name is not checked: on a partitioned
    table it is the partition's index."""
    return sqlstate in (UNIQUE_VIOLATION, DEADLOCK_DETECTED)


def due_condition(ignore_start_after: bool) -> str:
    """When job ``j`` is due for a claim."""
    # ignore_start_after still never takes a job parked at 'infinity' (a flow's child that
    # waits for its parents).
    return "j.start_after < 'infinity'" if ignore_start_after else "j.start_after <= now()"


def claimable_probe_sql(s: str, policy: Policy, ignore_start_after: bool) -> str:
    """One row when queue ``$1`` may have a job the keyed claim could take now, else none.

    It ignores the queue's concurrency limit and group limits, so it errs only towards
    "maybe": it never says "none" while a job is claimable in its snapshot. For a keyed policy
    it walks the keys like the claim and stops at the first free key with a due head.
    """
    due = due_condition(ignore_start_after)
    if policy not in KEYED_CLAIM_POLICIES:
        return f"""SELECT 1 FROM {s}.job j
            WHERE j.name = $1 AND j.state IN {in_list(QUEUED)} AND {due} LIMIT 1"""
    return (
        "WITH RECURSIVE " + ",\n".join(keyed_heads(s, policy, due)) + " SELECT 1 FROM cand LIMIT 1"
    )


def keyed_heads(s: str, policy: Policy, due: str) -> list[str]:
    """CTEs ending in ``cand``: the one job of each key a keyed policy may claim now.

    The keys are walked with a loose index scan (a recursive CTE stepping from one key to the
    next along ``job_policy_keys`` / ``job_policy_fifo``), and each step lands on the key's
    first job in claim order, its head: one index probe per key, the cost grows with the
    number of keys, not of jobs. ``singleton`` and ``stately`` take a key's first due job in
    fetch order unless the key has an active job (a head that is not due yet costs one more
    probe for the key's first due job); ``key_strict_fifo`` takes a key's oldest queued job,
    only if it is due and the key has no active or failed job (a blocked key holds up only
    itself).
    """
    queued = in_list(QUEUED)
    fifo = policy is Policy.KEY_STRICT_FIFO
    k = "coalesce(j.singleton_key, '')"
    # A constant of the library (the Policy enum), never user input.
    own = f"j.policy = '{policy.value}' AND j.state IN {queued}"
    order = "j.created_on, j.id" if fifo else "j.priority DESC, j.created_on, j.id"
    blocking = "('active', 'failed')" if fifo else "('active')"
    head = f"""SELECT {k} AS k, j.name, j.id, j.priority, j.created_on, j.start_after,
                j.group_id, j.group_tier FROM {s}.job j WHERE j.name = $1 AND {own}"""
    walked_due = due.replace("j.", "w.")
    ctes = [
        f"""keys AS (
            ({head} ORDER BY {k}, {order} LIMIT 1)
            UNION ALL
            SELECT n.* FROM keys CROSS JOIN LATERAL (
                {head} AND {k} > keys.k ORDER BY {k}, {order} LIMIT 1) n)""",
        f"""free AS (SELECT w.* FROM keys w WHERE w.k NOT IN (SELECT {k} FROM {s}.job j
                WHERE j.name = $1 AND j.policy = '{policy.value}' AND j.state IN {blocking}))""",
    ]
    columns = "name, id, priority, created_on, start_after, group_id, group_tier"
    j_columns = ", ".join("j." + c for c in columns.split(", "))
    if fifo:
        ctes.append(f"cand AS (SELECT {columns} FROM free w WHERE {walked_due})")
        return ctes
    ctes.append(
        f"""cand AS (SELECT {columns} FROM free w WHERE {walked_due}
            UNION ALL
            SELECT h.* FROM free w CROSS JOIN LATERAL (
                SELECT {j_columns}
                FROM {s}.job j WHERE j.name = $1 AND {own} AND {k} = w.k AND {due}
                ORDER BY {order} LIMIT 1) h
            WHERE NOT ({walked_due}))"""
    )
    return ctes


# The states whose jobs of a key a job entering a queued state would collide with, per policy
# (the partial unique indexes of schema v3); library constants, never user input.
_COLLIDING = {
    "created": {"short": "('created')", "stately": "('created')"},
    "retry": {"stately": "('retry')"},
}
_EXCLUSIVE = "('created', 'retry', 'active')"


def fits_policy(s: str, new_state: str, moving_from: str) -> str:
    """A condition on job ``j`` (of queue ``$1``, one of the target ids ``$2``, now in a state
    of ``moving_from``) that holds when moving it to ``new_state`` breaks no policy.

    It fails when another job of the key already holds the slot, or when a target of lower id
    in the same call takes it first: such a job is left as it is (counted as not changed),
    never a unique violation (docs/queues.md). The other jobs are read by ``o.name = $1``,
    which routes the read to the queue's one shard on sharded Citus (by ``o.name = j.name``
    alone the UPDATE ran over every shard).
    """
    by_policy = {**_COLLIDING[new_state], "exclusive": _EXCLUSIVE}
    held = " OR ".join(
        f"(j.policy = '{policy}' AND o.state IN {states})" for policy, states in by_policy.items()
    )
    policies = ", ".join(f"'{p}'" for p in by_policy)
    return f"""NOT (j.policy IN ({policies}) AND EXISTS (SELECT 1 FROM {s}.job o
        WHERE o.name = $1 AND o.policy = j.policy AND o.id <> j.id
          AND coalesce(o.singleton_key, '') = coalesce(j.singleton_key, '')
          AND ({held} OR (o.id = ANY($2::uuid[]) AND o.id < j.id
              AND o.state IN {moving_from}))))"""
