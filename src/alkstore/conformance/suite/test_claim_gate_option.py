"""The ``claim_gate`` engine option (docs/engines.md, "The claim gate"): an engine that takes
it gates its claims and they keep the fetch order and hand each job out once; an engine that
cannot gate refuses it by name. Never a silent no-op."""

from __future__ import annotations

import pytest

from alkstore.core.errors import InvalidOptions


@pytest.mark.requires("several_sessions")
def test_the_claim_gate_is_taken_and_keeps_the_order_or_is_refused(alkstore_store):
    alkstore_store.create_queue("q")
    low = [alkstore_store.send("q", n) for n in range(3)]
    high = alkstore_store.send("q", "urgent", priority=5)
    try:
        gated = alkstore_store.sibling(engine_options={"claim_gate": True})
    except InvalidOptions as exc:
        assert "claim_gate" in str(exc)
        return
    try:
        assert gated.engine.claim_gate is True
        first = gated.fetch("q", batch_size=2)
        assert [j.id for j in first] == [high, low[0]]
        handoff = gated.complete_and_fetch("q", first, batch_size=5)
        assert handoff.completed == 2
        assert [j.id for j in handoff.jobs] == low[1:]
        assert gated.fetch("q", batch_size=5) == []
    finally:
        gated.close()
