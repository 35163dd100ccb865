"""The ``claim_gate`` engine option (docs/engines.md, "The claim gate"): an engine that takes
it (``True``, or ``"auto"``: gated while the gate pays) gates its claims and they keep the
fetch order and hand each job out once; an engine that cannot gate refuses both by name, and
every engine refuses any other value by name. Never a silent no-op."""

from __future__ import annotations

from typing import Any

import pytest

from alkstore.core.errors import InvalidOptions

SETTINGS = {"on": True, "auto": "auto", "auto-engaged": "auto"}
"""The ways an engine can take the option; ``auto-engaged``: auto, the gate forced engaged
(through the engine's state, as when it was found to pay)."""


@pytest.mark.requires("several_sessions")
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_the_claim_gate_is_taken_and_keeps_the_order_or_is_refused(alkstore_store, setting):
    value: Any = SETTINGS[setting]
    alkstore_store.create_queue("q")
    low = [alkstore_store.send("q", n) for n in range(3)]
    high = alkstore_store.send("q", "urgent", priority=5)
    try:
        gated = alkstore_store.sibling(engine_options={"claim_gate": value})
    except InvalidOptions as exc:
        assert "claim_gate" in str(exc)
        assert repr(value) in str(exc)
        return
    try:
        assert gated.engine.claim_gate == value
        if setting == "auto-engaged":
            gated.engine.claim_gates.engage("q")
            assert gated.engine.claim_gates.engaged("q")
        first = gated.fetch("q", batch_size=2)
        assert [j.id for j in first] == [high, low[0]]
        handoff = gated.complete_and_fetch("q", first, batch_size=5)
        assert handoff.completed == 2
        assert [j.id for j in handoff.jobs] == low[1:]
        assert gated.fetch("q", batch_size=5) == []
    finally:
        gated.close()


@pytest.mark.requires("several_sessions")
def test_an_engine_refuses_auto_exactly_where_it_refuses_on(alkstore_store):
    refused = []
    for value in (True, "auto"):
        try:
            alkstore_store.sibling(engine_options={"claim_gate": value}).close()
        except InvalidOptions as exc:
            assert "claim_gate" in str(exc)
            refused.append(value)
    assert refused in ([], [True, "auto"])


@pytest.mark.requires("several_sessions")
@pytest.mark.parametrize("value", ["sometimes", "AUTO", 1, None])
def test_any_other_claim_gate_value_is_refused_by_name(alkstore_store, value):
    with pytest.raises(InvalidOptions) as refused:
        alkstore_store.sibling(engine_options={"claim_gate": value}).close()
    assert "claim_gate" in str(refused.value)
    assert repr(value) in str(refused.value)
