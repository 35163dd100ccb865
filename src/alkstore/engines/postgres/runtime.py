"""The SQL of the worker runtime: the supervisor's claimed pass and a worker's watch.

Functions of an engine rather than methods, so that the worker runtime adds no code to the
engine class; like the engine's own builders they branch on capabilities, never on names.
"""

from __future__ import annotations

import hashlib
import uuid
from typing import TYPE_CHECKING, Any, TypeVar

import attrs

from ...core.plans import Plan, Statement, Steps
from ...core.records import as_uuid
from ...core.states import Operation
from ...core.targets import Targets
from .sql import targeted_state, targets_sql

if TYPE_CHECKING:
    from .base import EngineBase

T = TypeVar("T")

MAINTENANCE = "maintenance"
"""The supervisor row whose claim elects the instance that runs a maintenance pass."""


def claim_pass(engine: EngineBase, interval: float, owner: str) -> Plan[bool]:
    """Claim the next maintenance pass: True for exactly one caller per ``interval`` seconds.

    One conditional ``UPDATE`` of one row: concurrent claimers queue on its row lock and the
    losers re-check ``next_on`` (or, under SERIALIZABLE, retry and find it moved).
    """
    sql = f"""UPDATE {engine.s}.supervisor
        SET next_on = now() + $2::float8 * interval '1 second', run_on = now(), owner = $3
        WHERE name = $1 AND next_on <= now()
        RETURNING name"""
    return engine._single(
        "claim_pass",
        sql,
        (MAINTENANCE, interval, owner),
        bool,
        on_contention=lambda: False,
    )


def unflushed(engine: EngineBase, plan: Plan[T]) -> Plan[T]:
    """``plan`` in a transaction that commits without waiting for its WAL flush, where the
    engine has ``asynchronous_commit`` (else ``plan`` as it is).

    For an idle worker's claim: the wake-up path pays one flush (the send's) instead of two.
    A server crash can lose only the last such claims, whose jobs then return to the queue
    and are delivered again (at-least-once, as when a worker dies); every later commit of
    the session, the job's completion included, flushes them first.
    """
    if not engine.capabilities.asynchronous_commit:
        return plan
    inner = plan.steps

    def steps() -> Steps[T]:
        yield Statement("SET LOCAL synchronous_commit TO off")
        return (yield from inner())

    return attrs.evolve(plan, steps=steps, transaction=True)


def watch(engine: EngineBase, queue: str, targets: Targets) -> Plan[set[uuid.UUID]]:
    """Heartbeat the running jobs that have ``heartbeat_seconds``; return the ids of those
    still active in the attempt they were fetched in (the rest were cancelled, expired or
    settled elsewhere). One statement; its ``SELECT`` reads the rows as they were before the
    heartbeat, which changes no state."""
    s = engine.s
    fence = "j.id = t.id AND j.retry_count = t.retry_count"
    active = targeted_state(Operation.TOUCH)  # by primary key, not through job_active
    sql = f"""WITH t AS (SELECT * FROM {targets_sql(2)}),
        beat AS (UPDATE {s}.job j SET heartbeat_on = now() FROM t
            WHERE j.name = $1 AND {active} AND {fence}
              AND j.heartbeat_seconds IS NOT NULL
            RETURNING j.id)
        SELECT j.id FROM {s}.job j JOIN t ON {fence}
        WHERE j.name = $1 AND {active}"""
    return engine._single(
        "watch",
        sql,
        (queue, targets.ids, targets.retry_counts),
        lambda rows: {as_uuid(r["id"]) for r in rows},
    )


def channel(engine: EngineBase) -> str:
    """The NOTIFY channel of the engine's schema (payload: a queue name): a plain identifier
    of at most 63 characters, so LISTEN takes it as it is."""
    name = f"alkstore_{engine.schema}"
    if len(name) <= 63:
        return name
    return "alkstore_" + hashlib.sha256(engine.schema.encode()).hexdigest()[:32]


def notifying(
    engine: EngineBase, sql: str, params: tuple[Any, ...], queue: str, *, counted: bool = False
) -> tuple[str, tuple[Any, ...]]:
    """``sql`` (a statement ``RETURNING`` its rows) made to also ``NOTIFY`` the schema's
    channel, with the queue name as payload, once per queue it returned a row of (``queue``:
    the SQL of the queue name of a row ``changed``). Listening workers then wake when the
    transaction commits. Unchanged where the engine lacks ``listen_notify`` (workers poll).

    ``note`` selects a boolean, not pg_notify's ``void``: sharded Citus materialises CTEs and
    refuses a column of a pseudo-type. The count of ``note`` is cross-joined so that the
    planner cannot drop it (a LEFT JOIN
    to a one-row aggregate that no column reads is removed, and an unread SELECT CTE never
    runs).
    """
    returned = "count(*) AS changed" if counted else "changed.*"
    if not engine.capabilities.listen_notify:
        if not counted:
            return sql, params
        return f"WITH changed AS ({sql}) SELECT {returned} FROM changed", params
    at = len(params) + 1
    wrapped = f"""WITH changed AS ({sql}),
        note AS (SELECT pg_notify(${at}::text, p.queue) IS NULL AS sent
                 FROM (SELECT DISTINCT {queue} AS queue FROM changed) p)
        SELECT {returned} FROM changed CROSS JOIN (SELECT count(*) AS n FROM note) n"""
    return wrapped, (*params, channel(engine))


class PostgresRuntime:
    """The :class:`~alkstore.core.contracts.WorkerRuntime` of a postgres-family engine: the
    functions above, bound to it."""

    def __init__(self, engine: EngineBase) -> None:
        self._engine = engine
        self.isolation = engine.isolation

    def claim_pass(self, interval: float, owner: str) -> Plan[bool]:
        """See :func:`claim_pass`."""
        return claim_pass(self._engine, interval, owner)

    def watch(self, queue: str, targets: Targets) -> Plan[set[uuid.UUID]]:
        """See :func:`watch`."""
        return watch(self._engine, queue, targets)

    def unflushed(self, plan: Plan[T]) -> Plan[T]:
        """See :func:`unflushed`."""
        return unflushed(self._engine, plan)

    def channel(self) -> str:
        """See :func:`channel`."""
        return channel(self._engine)
