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
when it pays), or ``"auto"``: each queue's claims pass the gate only while it pays
(:class:`GateSwitch`).

The auto gate compares the two ways by the client's round trip of a claim, not by the
server's time for the statement (``took``, which the mark compares): a gated claim's time
would hold its wait for a slot, and the queueing that the gate moves into that wait happens,
ungated, outside the claim statement (measured at 64 to 128 fetchers: ungated claims took
0.2-0.5 ms of the server's time, gated ones 100-120 ms, while the fetch round trips were
70-100 ms against 130-220 ms at 10 a fetch, and 1.1-1.7 s either way at 100). And one gated
claim among ungated ones saves nothing (it still walks past the rows of every claim in
flight), nor does one ungated claim among gated ones cost what ungated claims cost (it walks
past the rows of at most :data:`GATE_SLOTS` claims): the gate's gain is that *all* the claims
walk past fewer rows. So the auto gate tries the other way for a phase of all its claims of
the queue (:class:`GateSwitch`), and compares only the claims that started once the claims of
the phase before had returned.

Only the plain claim passes the gate (a keyed claim is already one at a time per queue). The
option is refused (:func:`configured`) where the engine lacks advisory locks, PL/pgSQL,
``SKIP LOCKED`` claims by tuple id or one statement changing the job table twice, or shares
one connection (PGlite): nothing would be gated there.
"""

from __future__ import annotations

import functools
import hashlib
import statistics
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, Literal, Protocol

import attrs

from ...core.capabilities import Capabilities
from ...core.errors import InvalidOptions
from ...core.plans import Statement
from ...core.targets import Targets
from .claim_switch import SAMPLES, Switch
from .schema import GATE_FUNCTION, rows_table
from .sql import (
    JOB_COLUMNS,
    LEAN_JOB_COLUMNS,
    RETURNED_JOB_COLUMNS,
    counted_job_columns,
    output_names,
    result_note,
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
        self,
        s: str,
        returned: str = ...,
        *,
        one: bool = False,
        rows_table: str | None = None,
        note: str = "",
    ) -> str:
        """The completion and claim statement."""
        ...


class ClaimingEngine(Protocol):
    """What the gate needs of an engine (:class:`.claim.ClaimMixin`)."""

    s: str
    schema: str
    capabilities: Capabilities

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


AUTO: Literal["auto"] = "auto"
"""The ``claim_gate`` value that gates a queue's claims only while it pays."""

Setting = bool | Literal["auto"]
"""A ``claim_gate`` value: off, on, or :data:`AUTO`."""


def configured(options: Mapping[str, Any], engine: str, caps: Capabilities) -> Setting:
    """The ``claim_gate`` engine option of ``options`` (default off), refused unless a bool
    or :data:`AUTO`, and refused on (or auto) when ``caps`` lack what the gate needs: never a
    silent no-op."""
    on = options.get(OPTION, False)
    setting: Setting
    if isinstance(on, bool):
        setting = on
    elif isinstance(on, str) and on == AUTO:
        setting = AUTO
    else:
        raise InvalidOptions(f"engine_options.{OPTION}", on, f'must be a bool or "{AUTO}"')
    lacking = [name for name in NEEDS if not getattr(caps, name)]
    if caps.single_connection:
        lacking.append("more than one connection (single_connection)")
    if setting and lacking:
        raise InvalidOptions(
            f"engine_options.{OPTION}",
            setting,
            f"the {engine} engine cannot gate its claims: it lacks {', '.join(lacking)}",
        )
    return setting


GATE_SLOTS = 4
"""Claims of one queue in flight at once (docs/benchmarks.md, "Claim scaling")."""

PHASE_SECONDS = 0.5
PHASE_ROUNDS = 2.0
"""A probe phase of the auto gate lasts ``PHASE_ROUNDS`` times the median round trip of the
queue's last claims, at least ``PHASE_SECONDS``; a claim that started in the first half of a
phase is not counted (the claims of the phase before are still in flight then)."""

ENGAGE_RATIO = 1.25
"""The gate engages when the ungated claims' round trips take longer than ``ENGAGE_RATIO``
times the gated ones' plus :data:`.claim_switch.ENGAGE_FLOOR` (the gate's measured gain at
128 fetchers is 1.2-1.4 x, docs/benchmarks.md, below the mark's ratio of 2)."""

DISENGAGE_RATIO = 1.1
"""The gate disengages when the ungated claims' round trips take no longer than
``DISENGAGE_RATIO`` times the gated ones' plus :data:`.claim_switch.DISENGAGE_FLOOR`."""

PROBE_SHARE = 0.1
"""The share of the time a queue's claims go the way not engaged (the probe phases); the
first phase of a queue is as short as a probe, so that a short drain is measured too."""


@attrs.frozen
class Ticket:
    """How one plain claim goes: through the gate (``gated``) or not."""

    gated: bool
    at: float = -1.0
    """``time.monotonic()`` when the claim started."""
    counted: bool = False
    """Its time is compared (it started once the claims of the phase before had returned)."""


ALWAYS = Ticket(True)
"""The ticket of every claim of an engine whose gate is on (``claim_gate=True``)."""


@attrs.define
class _Phase:
    until: float
    """``time.monotonic()`` when the phase ends."""
    since: float
    gated: bool = False
    switch: Switch = attrs.Factory(lambda: Switch(ENGAGE_RATIO, DISENGAGE_RATIO))
    """Whether the gate pays (engaged): the claims' round trips each way."""
    switched: float = -1.0
    """``time.monotonic()`` of the last engaging or disengaging: claims that started before
    are not compared."""
    trips: deque[float] = attrs.Factory(lambda: deque(maxlen=SAMPLES))
    """The round trips of the last claims, in seconds of the client's clock."""


class GateSwitch:
    """The auto gate of one engine instance (``claim_gate="auto"``): per queue, phases of
    gated and of ungated claims, the way that pays (:class:`.claim_switch.Switch`) for most
    of the time and the other for :data:`PROBE_SHARE` of it."""

    def __init__(
        self, phase_seconds: float = PHASE_SECONDS, probe_share: float = PROBE_SHARE
    ) -> None:
        self._queues: dict[str, _Phase] = {}
        self._phase_seconds = phase_seconds
        self._share = probe_share

    def _probe_seconds(self, phase: _Phase) -> float:
        """How long a probe phase of ``phase``'s queue lasts."""
        trips = statistics.median(phase.trips) if phase.trips else 0.0
        return max(self._phase_seconds, PHASE_ROUNDS * trips)

    def _begin(self, phase: _Phase, now: float, probe: bool) -> None:
        """A phase of the way not engaged (``probe``), else of the engaged way, from ``now``."""
        length = self._probe_seconds(phase)
        phase.gated = phase.switch.engaged != probe
        phase.since = now
        phase.until = now + (length if probe else length * (1 - self._share) / self._share)

    def start(self, queue: str) -> Ticket:
        """How the next plain claim of ``queue`` goes."""
        now = time.monotonic()
        phase = self._queues.get(queue)
        if phase is None:
            phase = self._queues[queue] = _Phase(now + self._phase_seconds, now)
        elif now >= phase.until:
            self._begin(phase, now, probe=phase.gated == phase.switch.engaged)
        counted = now - phase.since >= self._probe_seconds(phase) / 2
        return Ticket(phase.gated, now, counted)

    def done(self, queue: str, ticket: Ticket) -> None:
        """A claim of ``queue`` that went as ``ticket`` says returned: the gate engages or
        disengages on its round trip, and the phase of the way that now pays begins."""
        phase = self._queues.get(queue)
        if phase is None or ticket is ALWAYS:
            return
        now = time.monotonic()
        phase.trips.append(now - ticket.at)
        counted = ticket.counted and ticket.at >= phase.switched
        if counted and phase.switch.record(ticket.gated, now - ticket.at):
            # The claims so far ran beside claims of the other way: start afresh.
            phase.switched = now
            phase.switch.off.clear()
            phase.switch.on.clear()
            self._begin(phase, now, probe=False)

    def engage(self, queue: str) -> None:
        """The claims of ``queue`` pass the gate from now on (as when the gate was found to
        pay), one phase in :data:`PROBE_SHARE` not."""
        now = time.monotonic()
        phase = self._queues.setdefault(queue, _Phase(now, now))
        phase.switch.engaged = True
        phase.switched = now
        self._begin(phase, now, probe=False)

    def engaged(self, queue: str) -> bool:
        """Whether the gate pays for ``queue``'s claims."""
        phase = self._queues.get(queue)
        return phase is not None and phase.switch.engaged


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


def fetch_statement(engine: ClaimingEngine, queue: str, batch_size: int, full: bool) -> Statement:
    """The gated claim of up to ``batch_size`` jobs of ``queue``."""
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
) -> Statement:
    """``complete_and_fetch``'s statement through the gate: the completion and the claim run
    together behind it (one statement, as ungated)."""
    rows = _rows(engine, queue)
    claim = engine.built_once(
        ("gate-handoff", rows),
        lambda: engine.gated_claim.complete_and_fetch_sql(
            engine.s,
            RETURNED_JOB_COLUMNS,
            rows_table=rows,
            note=result_note(engine.s, engine.capabilities),
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
    "ALWAYS",
    "AUTO",
    "GATE_SLOTS",
    "NEEDS",
    "OPTION",
    "PHASE_ROUNDS",
    "PHASE_SECONDS",
    "PROBE_SHARE",
    "ClaimSql",
    "ClaimingEngine",
    "GateSwitch",
    "Setting",
    "Ticket",
    "configured",
    "fetch_statement",
    "gate_key",
    "handoff_statement",
]
