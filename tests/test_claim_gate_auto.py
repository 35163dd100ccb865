"""The auto claim gate (``engine_options={"claim_gate": "auto"}``, engines/postgres/claim_gate.py):
per queue, phases of gated and of ungated claims; the gate engages when the ungated claims take
longer than the gated ones (claim_switch.py's rule, by their round trips) and disengages when
they no longer do; only claims that started once the claims of the phase before had returned,
and after the last switch, are compared; on a real
PostgreSQL an engaged auto gate makes the claims wait at the gate, a disengaged one does not."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg
import pytest

import alkstore
from alkstore.engines.postgres.claim_gate import (
    ALWAYS,
    GATE_SLOTS,
    GateSwitch,
    Ticket,
    gate_key,
)
from alkstore.engines.postgres.claim_switch import ENGAGE_FLOOR, SAMPLES, Switch
from lock_waits import wait_for_a_lock_wait

SLOW, FAST = 10 * ENGAGE_FLOOR, ENGAGE_FLOOR / 10


def end_phase(gates: GateSwitch, queue: str = "q") -> None:
    """Ends the current phase of ``queue`` now."""
    gates._queues[queue].until = 0.0


def claim(gates: GateSwitch, trip: float, queue: str = "q") -> bool:
    """A counted claim of ``queue`` (as if its phase had begun long ago) whose round trip
    took ``trip`` seconds; returns whether it went through the gate."""
    ticket = gates.start(queue)
    counted = Ticket(ticket.gated, time.monotonic() - trip, True)
    gates.done(queue, counted)
    return ticket.gated


def test_the_switch_engages_on_the_medians_and_disengages_lower() -> None:
    switch = Switch()
    for took in (FAST, FAST, SLOW):  # the default way; nothing to compare yet
        assert switch.record(False, took) is False
    switch.record(True, FAST)
    assert not switch.engaged  # the median of the default way is fast
    for _ in range(2):
        switch.record(False, SLOW)
    assert switch.engaged
    for _ in range(2):
        switch.record(False, FAST)
    assert switch.engaged  # the median of the last SAMPLES is still slow
    switch.record(True, FAST)  # a time the engaged way never disengages it
    assert switch.engaged
    switch.record(False, FAST)
    assert not switch.engaged
    assert len(switch.off) == SAMPLES


def test_auto_gate_runs_ungated_then_probes_a_gated_phase_then_ungated_again() -> None:
    gates = GateSwitch(phase_seconds=3600, probe_share=0.5)
    assert gates.start("q").gated is False  # the first phase: ungated
    assert gates.start("q").gated is False
    end_phase(gates)
    assert gates.start("q").gated is True  # the probe phase
    assert gates.start("q").gated is True
    end_phase(gates)
    assert gates.start("q").gated is False
    assert not gates.engaged("q")


def test_only_claims_from_the_second_half_of_a_phase_are_counted() -> None:
    gates = GateSwitch(phase_seconds=3600)
    first = gates.start("q")
    assert not first.counted  # the claims of the phase before may still be in flight
    gates._queues["q"].since -= 1800
    assert gates.start("q").counted
    for _ in range(SAMPLES):  # uncounted claims, however slow, switch nothing
        gates.done("q", Ticket(False, time.monotonic() - SLOW))
    assert not gates._queues["q"].switch.off


def test_auto_gate_engages_when_ungated_claims_are_slower_and_disengages() -> None:
    gates = GateSwitch(phase_seconds=3600)
    for _ in range(3):
        assert not claim(gates, SLOW)  # ungated claims, slow
    end_phase(gates)
    assert claim(gates, FAST)  # a probe phase, gated: its claims are fast
    assert gates.engaged("q")
    # Its samples start afresh: a claim that started before the switch is not compared.
    assert not gates._queues["q"].switch.off and not gates._queues["q"].switch.on
    gates.done("q", Ticket(False, time.monotonic() - 3600, True))
    assert gates.engaged("q") and not gates._queues["q"].switch.off
    gates._queues["q"].switched -= 1  # the claims below started after the switch
    assert claim(gates, FAST)  # the engaged phase began on it: gated
    end_phase(gates)
    assert not claim(gates, FAST)  # a probe phase, ungated: no slower than gated now
    assert not gates.engaged("q")
    assert not gates.start("q").gated


def test_a_claim_of_a_gate_always_on_teaches_nothing() -> None:
    gates = GateSwitch()
    gates.start("q")
    gates.done("q", ALWAYS)
    assert not gates._queues["q"].trips
    claim(gates, SLOW, "other")  # a queue known: its trip kept
    assert gates._queues["other"].trips


def test_a_probe_phase_lasts_two_round_trips_of_the_claims() -> None:
    gates = GateSwitch(phase_seconds=0.0, probe_share=0.5)
    ticket = gates.start("q")
    gates.done("q", Ticket(ticket.gated, time.monotonic() - 2.0))  # a 2 s round trip
    end_phase(gates)
    assert gates.start("q").gated
    phase = gates._queues["q"]
    assert phase.until - phase.since == pytest.approx(4.0, abs=0.1)


def _fetch_at_gate(store: alkstore.Store, pg_dsn: str, schema: str, waits: bool) -> Any:
    """Fetches from ``store`` while another session holds every slot of queue ``q``'s gate,
    which the fetch waits at (``waits``) or not; returns its jobs."""
    result: dict[str, Any] = {}
    with psycopg.connect(pg_dsn) as locker:
        for slot in range(GATE_SLOTS):
            locker.execute("SELECT pg_advisory_xact_lock(%s, %s)", (gate_key(schema, "q"), slot))
        fetcher = threading.Thread(target=lambda: result.update(jobs=store.fetch("q")))
        fetcher.start()
        if waits:
            wait_for_a_lock_wait(locker, "the fetch", "advisory")
            assert fetcher.is_alive()
            locker.rollback()  # opens the gate
        fetcher.join(timeout=30)
        assert not fetcher.is_alive()  # returned while every slot was held, unless it waited
    return result["jobs"]


def test_an_engaged_auto_gate_gates_and_a_disengaged_one_does_not(pg_dsn, schema_name):
    options = {"claim_gate": "auto"}
    with alkstore.connect(pg_dsn, schema=schema_name, engine_options=options) as store:
        store.create_queue("q")
        first, second = store.send("q", "one"), store.send("q", "two")
        assert store.engine.claim_gate == "auto"
        gates = store.engine.claim_gates
        gates.engage("q")
        gates._queues["q"].since = -3600.0  # the claim is counted
        jobs = _fetch_at_gate(store, pg_dsn, schema_name, waits=True)
        assert [j.id for j in jobs] == [first]
        (trip,) = gates._queues["q"].switch.on  # its round trip, its wait at the gate in it
        assert trip > 0
        store.engine.claim_gates = GateSwitch(phase_seconds=3600)  # ungated, a long phase
        jobs = _fetch_at_gate(store, pg_dsn, schema_name, waits=False)
        assert [j.id for j in jobs] == [second]
