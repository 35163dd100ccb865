"""The gated claim: the plain claims of one queue pass a gate of a few advisory-lock slots.

Every row-per-job ``FOR UPDATE SKIP LOCKED`` claim walks past the rows the other in-flight
claims hold: with many fetchers most of a claim's work is stepping over other claims' rows,
and throughput falls as fetchers are added (docs/benchmarks.md, "Claim scaling"). Here the
claim runs inside :data:`GATE_FUNCTION` (schema version 13): it takes one of
:data:`GATE_SLOTS` transaction advisory locks of the queue (the first free one, else it waits
on one), and only then runs the claim statement: in READ COMMITTED each statement of a
volatile function takes its own snapshot, so the claim starts after the gate opened and sees
the claims before it committed. At most :data:`GATE_SLOTS` claims of a queue are in flight,
and a claim walks past the rows of at most ``GATE_SLOTS - 1`` others. One round trip.

The statement the function runs is the engine's own claim (:mod:`.claim`, the same text the
ungated fetch sends), so order, fencing and the queue's rules are unchanged; the function
runs it with ``EXECUTE``, which plans it at each call (the price: the server's planning of
one claim per claim). The function returns ``SETOF record``: the caller names the columns,
so the function stays the same when the job's columns change.

Only the plain claim passes the gate (a keyed claim is already one at a time per queue). An
engine gates where it has advisory locks, PL/pgSQL, ``SKIP LOCKED`` claims by tuple id and
more than one connection (:func:`gated`); elsewhere it claims as before, as the capability
matrix says (docs/engines.md).
"""

from __future__ import annotations

import functools
import hashlib
from typing import TYPE_CHECKING

from ...core.capabilities import Capabilities
from ...core.plans import Statement
from ...core.targets import Targets
from ..citus_calls import _job_columns, output_names
from .schema import GATE_FUNCTION, rows_table
from .sql import JOB_COLUMNS, LEAN_JOB_COLUMNS, RETURNED_JOB_COLUMNS, target_params

if TYPE_CHECKING:
    from .claim import ClaimMixin

GATE_SLOTS = 4
"""Claims of one queue in flight at once (docs/benchmarks.md, "Claim scaling")."""


def gated(caps: Capabilities) -> bool:
    """Whether an engine with ``caps`` claims through the gate."""
    return (
        caps.advisory_locks
        and caps.plpgsql
        and caps.skip_locked
        and caps.tuple_ids
        and caps.multi_mutation_cte
        and not caps.single_connection
    )


@functools.lru_cache(maxsize=4096)
def gate_key(schema: str, queue: str) -> int:
    """The first key of the two-key advisory locks of ``queue``'s gate (the second: the
    slot). Two queues whose keys collide share a gate: slower, never wrong."""
    digest = hashlib.sha256(f"alkstore.claim.{schema}.{queue}".encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


def _column_list(counts: tuple[str, ...]) -> str:
    """The column definition list of the function's rows: ``counts`` then every job column."""
    return ", ".join([*(f"{c} bigint" for c in counts), *(f"{n} {t}" for n, t in _job_columns())])


def _call(engine: ClaimMixin, counts: tuple[str, ...], full: bool) -> str:
    """The call of the gate function returning ``counts`` and the (``full``, else lean) job
    columns; the arguments: gate key, slots, the claim statement, queue, limit, targets and
    output of a completion."""
    names = ", ".join([*counts, *output_names(JOB_COLUMNS if full else LEAN_JOB_COLUMNS)])
    return engine.built_once(
        ("gate-call", counts, full),
        lambda: (
            f"""SELECT {names} FROM {engine.s}.{GATE_FUNCTION}(
                $1::int, $2::int, $3::text, $4::text, $5::bigint, $6::uuid[], $7::int[], $8::text)
            AS c({_column_list(counts)})"""
        ),
    )


def _rows(engine: ClaimMixin, queue: str) -> str | None:
    """:func:`.schema.rows_table` unless ``queue`` has a partition of its own."""
    own = engine.own_partition_queues.get(queue, False)
    return None if own else rows_table(engine.capabilities)


def fetch_statement(
    engine: ClaimMixin, queue: str, batch_size: int, full: bool
) -> Statement | None:
    """The gated claim of up to ``batch_size`` jobs of ``queue``; None where the engine does
    not gate (then the caller sends its plain claim)."""
    if not gated(engine.capabilities):
        return None
    rows = _rows(engine, queue)
    claim = engine.built_once(
        ("gate-fetch", rows),
        lambda: engine.claim.fetch_sql(
            engine.s, engine.claim.batch_limit, RETURNED_JOB_COLUMNS, rows
        ),
    )
    params = (
        gate_key(engine.schema, queue),
        GATE_SLOTS,
        claim,
        queue,
        batch_size,
        None,
        None,
        None,
    )
    return Statement(_call(engine, ("picked",), full), params)


def handoff_statement(
    engine: ClaimMixin,
    queue: str,
    targets: Targets,
    output_json: str | None,
    batch_size: int,
    full: bool,
) -> Statement | None:
    """``complete_and_fetch``'s statement through the gate: the completion and the claim run
    together behind it (one statement, as ungated); None where the engine does not gate."""
    if not gated(engine.capabilities):
        return None
    rows = _rows(engine, queue)
    claim = engine.built_once(
        ("gate-handoff", rows),
        lambda: engine.claim.complete_and_fetch_sql(
            engine.s, RETURNED_JOB_COLUMNS, rows_table=rows
        ),
    )
    params = (
        gate_key(engine.schema, queue),
        GATE_SLOTS,
        claim,
        queue,
        batch_size,
        *target_params(targets),
        output_json,
    )
    return Statement(_call(engine, ("completed", "flow_parents", "picked"), full), params)


__all__ = ["GATE_SLOTS", "fetch_statement", "gate_key", "gated", "handoff_statement"]
