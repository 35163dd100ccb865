"""The gated claim: the plain claims of one queue pass a gate of a few advisory-lock slots.

Every row-per-job ``FOR UPDATE SKIP LOCKED`` claim walks past the rows the other in-flight
claims hold: with many fetchers most of a claim's work is stepping over other claims' rows,
and throughput falls as fetchers are added (docs/benchmarks.md, "Claim scaling"). Gated, the
claim runs inside the schema's function ``claim_gate`` (version 11): it takes one of
:data:`GATE_SLOTS` transaction advisory locks of the queue (the first free one, else it waits
on one), and only then runs the claim statement: in READ COMMITTED each statement of a
volatile function takes its own snapshot, so the claim starts after the gate opened and sees
the claims before it committed. At most :data:`GATE_SLOTS` claims of a queue are in flight,
and a claim walks past the rows of at most ``GATE_SLOTS - 1`` others. One round trip.

The statement the function runs is the engine's own claim (:mod:`.claim`, the same text the
ungated fetch sends), so order, fencing and the queue's rules are unchanged. The function
prepares it in the session once, named by its hash, so the server plans it as it plans the
ungated claim (a first version ran it with a plain ``EXECUTE``, planned at each call: 77 µs
of server CPU a job more at 10 a fetch). It returns ``SETOF record``: the caller names the
columns, so the function stays the same when the job's columns change.

The gate costs a little where few fetchers never walked far anyway, so it is an engine
option, off by default: ``engine_options={"claim_gate": True}`` (docs/benchmarks.md says
when it pays).

Only the plain claim passes the gate (a keyed claim is already one at a time per queue). The
option is refused (:func:`configured`) where the engine lacks advisory locks, PL/pgSQL,
``SKIP LOCKED`` claims by tuple id or one statement changing the job table twice, or shares
one connection (PGlite): nothing would be gated there.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ...core.capabilities import Capabilities
from ...core.errors import InvalidOptions
from ...core.plans import Statement
from ...core.targets import Targets
from .schema import GATE_FUNCTION, rows_table
from .sql import (
    JOB_COLUMNS,
    LEAN_JOB_COLUMNS,
    RETURNED_JOB_COLUMNS,
    counted_job_columns,
    output_names,
    target_params,
)

OPTION = "claim_gate"
"""The ``engine_options`` key that turns the gate on."""
NEEDS = ("advisory_locks", "plpgsql", "skip_locked", "tuple_ids", "multi_mutation_cte")
"""The capabilities the gated claim uses."""


class ClaimSql(Protocol):
    """What the gate needs of a claim strategy (:class:`.claim.ClaimStrategy`)."""

    @property
    def batch_limit(self) -> str:
        """The ``LIMIT`` of a claim of up to ``$2`` jobs."""
        ...

    def fetch_sql(
        self, s: str, limit: str, returned: str = ..., rows_table: str | None = None
    ) -> str:
        """The claim statement."""
        ...

    def complete_and_fetch_sql(
        self, s: str, returned: str = ..., *, one: bool = False, rows_table: str | None = None
    ) -> str:
        """The completion and claim statement."""
        ...


class ClaimingEngine(Protocol):
    """What the gate needs of an engine (:class:`.claim.ClaimMixin`)."""

    s: str
    schema: str
    capabilities: Capabilities
    claim_gate: bool

    @property
    def gated_claim(self) -> ClaimSql:
        """The engine's claim strategy, from the head of the queue (no mark)."""
        ...

    @property
    def own_partition_queues(self) -> dict[str, bool]:
        """Queue name -> whether it has a partition of its own."""
        ...

    def built_once(self, shape: tuple[Any, ...], build: Callable[[], str]) -> str:
        """The SQL of ``shape``, built once."""
        ...


def configured(options: Mapping[str, Any], engine: str, caps: Capabilities) -> bool:
    """The ``claim_gate`` engine option of ``options`` (default off), refused unless a bool,
    and refused on when ``caps`` lack what the gate needs: never a silent no-op."""
    on = options.get(OPTION, False)
    if not isinstance(on, bool):
        raise InvalidOptions(f"engine_options.{OPTION}", on, "must be a bool")
    lacking = [name for name in NEEDS if not getattr(caps, name)]
    if caps.single_connection:
        lacking.append("more than one connection (single_connection)")
    if on and lacking:
        raise InvalidOptions(
            f"engine_options.{OPTION}",
            on,
            f"the {engine} engine cannot gate its claims: it lacks {', '.join(lacking)}",
        )
    return on


GATE_SLOTS = 4
"""Claims of one queue in flight at once (docs/benchmarks.md, "Claim scaling")."""


@functools.lru_cache(maxsize=4096)
def gate_key(schema: str, queue: str) -> int:
    """The first key of the two-key advisory locks of ``queue``'s gate (the second: the
    slot). Two queues whose keys collide share a gate: slower, never wrong."""
    digest = hashlib.sha256(f"alkstore.claim.{schema}.{queue}".encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


def _call(engine: ClaimingEngine, counts: tuple[str, ...], full: bool) -> str:
    """The call of the gate function returning ``counts`` and the (``full``, else lean) job
    columns; the arguments: gate key, slots, the claim statement, queue, limit, targets and
    output of a completion."""
    names = ", ".join([*counts, *output_names(JOB_COLUMNS if full else LEAN_JOB_COLUMNS)])
    return engine.built_once(
        ("gate-call", counts, full),
        lambda: (
            f"""SELECT {names} FROM {engine.s}.{GATE_FUNCTION}(
                $1::int, $2::int, $3::text, $4::text, $5::bigint, $6::uuid[], $7::int[], $8::text)
            AS c({counted_job_columns(counts)})"""
        ),
    )


def _rows(engine: ClaimingEngine, queue: str) -> str | None:
    """:func:`.schema.rows_table` unless ``queue`` has a partition of its own."""
    own = engine.own_partition_queues.get(queue, False)
    return None if own else rows_table(engine.capabilities)


def fetch_statement(
    engine: ClaimingEngine, queue: str, batch_size: int, full: bool
) -> Statement | None:
    """The gated claim of up to ``batch_size`` jobs of ``queue``; None unless the engine
    gates (``claim_gate``; then the caller sends its plain claim)."""
    if not engine.claim_gate:
        return None
    rows = _rows(engine, queue)
    claim = engine.built_once(
        ("gate-fetch", rows),
        lambda: engine.gated_claim.fetch_sql(
            engine.s, engine.gated_claim.batch_limit, RETURNED_JOB_COLUMNS, rows
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
    engine: ClaimingEngine,
    queue: str,
    targets: Targets,
    output_json: str | None,
    batch_size: int,
    full: bool,
) -> Statement | None:
    """``complete_and_fetch``'s statement through the gate: the completion and the claim run
    together behind it (one statement, as ungated); None unless the engine gates."""
    if not engine.claim_gate:
        return None
    rows = _rows(engine, queue)
    claim = engine.built_once(
        ("gate-handoff", rows),
        lambda: engine.gated_claim.complete_and_fetch_sql(
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


__all__ = [
    "GATE_SLOTS",
    "NEEDS",
    "OPTION",
    "ClaimSql",
    "ClaimingEngine",
    "configured",
    "fetch_statement",
    "gate_key",
    "handoff_statement",
]
