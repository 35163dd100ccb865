"""The worker processes' own records in the supervisor table (``alkstore workers``).

Each process whose store runs a supervisor upserts its row ``process:OWNER`` now and then:
``run_on`` when it first did (kept), ``next_on`` when the row expires, ``info`` what it
runs. It deletes the row when its last supervised worker stops; a process that died
unannounced is listed until its row expires, and the next record of any process deletes
the expired rows. Reading them changes nothing.
"""

from __future__ import annotations

from ...core.plans import Plan, Statement, Steps
from ...core.records import WorkerProcess
from .base import EngineBase
from .runtime import MAINTENANCE

PREFIX = "process:"
"""The name of a process's supervisor row is this and its owner."""


def record_process(engine: EngineBase, owner: str, ttl: float, info_json: str) -> Plan[None]:
    """Create or refresh the row of ``owner`` (``info_json`` holds ``ttl`` too), and delete
    the rows of processes that expired."""
    s = engine.s

    def steps() -> Steps[None]:
        yield Statement(
            f"DELETE FROM {s}.supervisor WHERE name LIKE $1 AND next_on < now()",
            (PREFIX + "%",),
        )
        # now() stays in VALUES: sharded Citus refuses non-IMMUTABLE functions in DO UPDATE.
        yield Statement(
            f"""INSERT INTO {s}.supervisor (name, next_on, run_on, owner, info)
            VALUES ($1, now() + $2::float8 * interval '1 second', now(), $3, $4::text::jsonb)
            ON CONFLICT (name) DO UPDATE SET next_on = EXCLUDED.next_on, info = EXCLUDED.info""",
            (PREFIX + owner, ttl, owner, info_json),
        )

    return engine._plan("record_process", steps, transaction=True)


def forget_process(engine: EngineBase, owner: str) -> Plan[None]:
    """Delete the row of ``owner``."""
    sql = f"DELETE FROM {engine.s}.supervisor WHERE name = $1"
    return engine._single("forget_process", sql, (PREFIX + owner,), lambda _rows: None)


def list_processes(engine: EngineBase) -> Plan[list[WorkerProcess]]:
    """The unexpired process rows, by owner, and whether each ran the latest pass."""
    s = engine.s
    sql = f"""SELECT p.owner, p.run_on, p.next_on, p.info::text AS info,
            p.owner IS NOT DISTINCT FROM m.owner AS ran_last_pass
        FROM {s}.supervisor p LEFT JOIN {s}.supervisor m ON m.name = $2
        WHERE p.name LIKE $1 AND p.next_on > now()
        ORDER BY p.owner"""
    return engine._single(
        "worker_processes",
        sql,
        (PREFIX + "%", MAINTENANCE),
        lambda rows: [WorkerProcess.from_row(r) for r in rows],
    )
