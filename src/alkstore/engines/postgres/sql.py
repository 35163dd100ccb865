"""SQL fragments every operation family of the postgres engine shares.

Only constants of the library and quoted identifiers are interpolated here; values are
always bound.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.capabilities import Capabilities
from ...core.plans import Row
from ...core.records import as_int
from ...core.states import TRANSITIONS, Operation
from ...core.targets import Targets
from ...core.validation import MAX_DELAY
from .schema import in_list

JOB_COLUMNS = (
    "id, name, data::text AS data, state, priority, retry_count, retry_limit, retry_delay, "
    "retry_backoff, retry_delay_max, expire_seconds, heartbeat_seconds, retention_seconds, "
    "deletion_seconds, singleton_key, group_id, group_tier, start_after, created_on, "
    "started_on, completed_on, heartbeat_on, keep_until, output::text AS output, "
    "source_queue, source_id, source_retry_count, source_root_id, source_created_on, "
    "source_output::text AS source_output, dead_letter, trace_context::text AS trace_context, "
    "errors::text AS errors"
)
RETURNED_JOB_COLUMNS = ", ".join("j." + c.strip() for c in JOB_COLUMNS.split(","))
""":data:`JOB_COLUMNS` of the job table aliased ``j`` (in ``RETURNING`` lists)."""
LEAN_JOB_COLUMNS = (
    "id, name, data::text AS data, state, priority, retry_count, retry_limit, expire_seconds, "
    "heartbeat_seconds, singleton_key, group_id, group_tier, created_on, "
    "trace_context::text AS trace_context"
)
"""The columns of a lean job (:data:`alkstore.core.lean.LEAN_FIELDS`): a fetch without
metadata returns only these."""
RETURNED_LEAN_JOB_COLUMNS = ", ".join("j." + c.strip() for c in LEAN_JOB_COLUMNS.split(","))
""":data:`LEAN_JOB_COLUMNS` of the job table aliased ``j`` (in ``RETURNING`` lists)."""


# The job table's types of the columns JOB_COLUMNS returns uncast (the cast ones are text).
_UNCAST_TYPES = {
    "id": "uuid",
    "name": "text",
    "state": "text",
    "priority": "int",
    "retry_count": "int",
    "retry_limit": "int",
    "retry_delay": "int",
    "retry_backoff": "bool",
    "retry_delay_max": "int",
    "expire_seconds": "int",
    "heartbeat_seconds": "int",
    "retention_seconds": "int",
    "deletion_seconds": "int",
    "singleton_key": "text",
    "group_id": "text",
    "group_tier": "text",
    "start_after": "timestamptz",
    "created_on": "timestamptz",
    "started_on": "timestamptz",
    "completed_on": "timestamptz",
    "heartbeat_on": "timestamptz",
    "keep_until": "timestamptz",
    "source_queue": "text",
    "source_id": "uuid",
    "source_retry_count": "int",
    "source_root_id": "uuid",
    "source_created_on": "timestamptz",
    "dead_letter": "text",
}


def output_names(columns: str) -> list[str]:
    """The output names of a column list such as :data:`JOB_COLUMNS`."""
    return [item.strip().rpartition(" AS ")[2] for item in columns.split(",")]


def job_column_types() -> list[tuple[str, str]]:
    """(name, type) of each column of :data:`JOB_COLUMNS`, as a function returning them
    declares them (the cast ones as text)."""
    return [
        (name, "text" if f"::text AS {name}" in JOB_COLUMNS else _UNCAST_TYPES[name])
        for name in output_names(JOB_COLUMNS)
    ]


def counted_job_columns(counts: Sequence[str]) -> str:
    """The column definitions of rows that carry the bigint ``counts`` then every column of
    :data:`JOB_COLUMNS` (a function's ``RETURNS TABLE`` or a call's column list)."""
    return ", ".join(
        [*(f"{c} bigint" for c in counts), *(f"{n} {t}" for n, t in job_column_types())]
    )


def returned_columns(full: bool) -> str:
    """:data:`RETURNED_JOB_COLUMNS` for full jobs, else :data:`RETURNED_LEAN_JOB_COLUMNS`."""
    return RETURNED_JOB_COLUMNS if full else RETURNED_LEAN_JOB_COLUMNS


LATEST_TIME = "'9999-12-31 23:59:59.999999+00'::timestamptz"
"""The latest time Python's datetime holds. A job blocked in a flow waits with
``start_after`` and ``keep_until`` at ``'infinity'``, which psycopg cannot read; reads show it
as this instead (as asyncpg reads ``'infinity'``)."""


def read_job_columns(alias: str) -> str:
    """:data:`JOB_COLUMNS` of the job table aliased ``alias``, readable by every driver even
    for a job blocked in a flow (see :data:`LATEST_TIME`)."""
    out = []
    for column in (c.strip() for c in JOB_COLUMNS.split(",")):
        if column in ("start_after", "keep_until"):
            out.append(f"LEAST({alias}.{column}, {LATEST_TIME}) AS {column}")
        else:
            out.append(f"{alias}.{column}")
    return ", ".join(out)


QUEUE_COLUMNS = (
    "name, policy, retry_limit, retry_delay, retry_backoff, retry_delay_max, expire_seconds, "
    "heartbeat_seconds, retention_seconds, deletion_seconds, dead_letter, partition, "
    "created_on, updated_on, concurrency_limit, paused"
)
INT_COLUMNS = frozenset({"priority", "retry_count"})


def accepted(operation: Operation) -> str:
    """The ``IN`` list of the states ``operation`` accepts, from the core's transition table."""
    return in_list(TRANSITIONS[operation][0])


def targeted_state(operation: Operation) -> str:
    """The check that a target ``j`` is in a state ``operation`` accepts, for an UPDATE that
    reaches its targets by primary key.

    Written through ``coalesce`` (``state`` is never NULL) so that it implies no partial
    index's predicate: under ``j.state IN ('active')`` the planner read every running job of
    the queue through ``job_active`` and hashed them against the targets, a cost that grows
    with the running jobs (a 100-job completion with 20,000 running: 7-10 ms, against
    1.3 ms by primary key; docs/benchmarks.md, "Settling by primary key").
    """
    return f"coalesce(j.state, '') IN {accepted(operation)}"


def result_note(s: str, caps: Capabilities) -> str:
    """A column for the ``RETURNING`` of an UPDATE that finishes jobs ``j`` (schema version
    15): it notifies the waiters of each such job marked ``waited`` (the ``CASE`` calls
    nothing for the others); empty where results are not notified
    (:attr:`~alkstore.core.capabilities.Capabilities.notifies_results`)."""
    if not caps.notifies_results:
        return ""
    return f", CASE WHEN j.waited THEN {s}.result_note(j.id, j.tableoid) END AS noted"


def seconds_after(moment: str, seconds: str) -> str:
    """SQL for ``moment + seconds * interval '1 second'`` built from IMMUTABLE parts only.

    ``timestamptz + interval`` is STABLE (a day's length depends on the session's time zone),
    and sharded Citus refuses a STABLE function applied to column references in an UPDATE or
    DELETE ("STABLE functions used in UPDATE queries cannot be called with column
    references"): each worker would compute it with its own settings. In UTC every day is
    24 hours, so shifting the UTC wall-clock time is the same arithmetic, and IMMUTABLE.
    ``now()`` itself may appear as ``moment``: without column arguments Citus evaluates it
    once on the coordinator. A NULL ``seconds`` gives NULL, as the plain sum would.

    ``seconds`` is capped at :data:`MAX_SHIFT_SECONDS`, so no row can make the sum overflow
    (22008): a row stored before validation bounded its options (``retry_delay`` 2**31 - 1
    with backoff) would otherwise fail every statement that touches it, maintenance for all
    queues included. ``LEAST`` skips NULLs, so the cap is made NULL with ``seconds``: the cap
    times ``abs(sign(seconds))``, which is 0 only where ``seconds`` is 0 and the minimum is 0
    anyway (no ``+``: the emulated Citus check reads one as ``timestamptz + interval``).
    """
    value = f"({seconds})::float8"
    capped = f"LEAST({value}, {MAX_SHIFT_SECONDS}::float8 * abs(sign({value})))"
    return f"timezone('UTC', timezone('UTC', {moment}) + {capped} * interval '1 second')"


MAX_SHIFT_SECONDS = MAX_DELAY * 2**17
"""The longest shift :func:`seconds_after` applies: the longest retry delay valid options
compute (:data:`~alkstore.core.validation.MAX_DELAY` x 2**16 backoff x 2 jitter, about
131,000 years), so valid rows are never capped, while now + the cap + any int retention stays
far below PostgreSQL's last timestamp (year 294276) and an interval's range."""


def fence(alias: str = "t") -> str:
    """Join condition of a target row: a bare id, or an id fenced to one attempt.

    Every fetch after a job's first raises its ``retry_count``, so within the active state
    ``(id, retry_count)`` names exactly one attempt (the attempt's ``started_on`` adds
    nothing, and binding it would cost a timestamp array per call).
    """
    return (
        f"j.id = {alias}.id AND ({alias}.retry_count IS NULL OR "
        f"j.retry_count = {alias}.retry_count)"
    )


def targets_sql(first: int) -> str:
    """``unnest`` of the two target arrays bound at ``$first`` and ``$first+1``.

    Each array is read through a subquery, so that no plan sees how many targets there
    are: a plan made for the values (one target) was costed below the generic plan (which
    assumes ten), so PostgreSQL planned a one-job completion anew on every call, 1 ms of
    server CPU against its 0.2 ms execution. Every plan is the lookup of each target by
    primary key (docs/benchmarks.md, "Settling by primary key"); as for the claim, the
    generic plan is kept only while the job table has no partition but the default one."""
    return f"unnest((SELECT ${first}::uuid[]), (SELECT ${first + 1}::int[])) AS t(id, retry_count)"


def columns(rows: Sequence[Row], names: Sequence[str]) -> tuple[list[Any], ...]:
    """Rows read back, as one array per column to bind again (integers coerced: CockroachDB
    may have sent them as text, and asyncpg binds only ints into ``int[]``)."""
    return tuple([as_int(r[n]) if n in INT_COLUMNS else r[n] for r in rows] for n in names)


def count_of(rows: Sequence[Row]) -> int:
    """Result mapper of a statement that returns ``count(*) AS n``."""
    return as_int(rows[0]["n"])


def target_params(targets: Targets) -> tuple[Any, ...]:
    """The bound values of :func:`targets_sql`: ids and (fencing) retry counts."""
    return (targets.ids, targets.retry_counts)
