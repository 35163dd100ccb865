"""Plan mechanics (generators of Statements driven by a runner) and capability flags.

The tiny executor below answers Statements with canned rows; it drives a plan the way
``alkstore.runner`` does (``next`` then ``send``), so these tests exercise the plan protocol
itself, not any database behaviour.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise
from typing import Any, TypeVar

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alkstore.core.capabilities import Capabilities
from alkstore.core.plans import (
    MAX_SERIALIZATION_RETRIES,
    SERIALIZATION_FAILURE,
    Isolation,
    Plan,
    Row,
    Statement,
    Steps,
    no_error_map,
    rowcount,
    serialization_pause,
    single,
)

T = TypeVar("T")


class FakeExecutor:
    """Answers each Statement with the rows ``answer`` gives, recording what it was asked."""

    def __init__(self, answer: Callable[[Statement], list[Row]]) -> None:
        self.answer = answer
        self.seen: list[Statement] = []

    def run(self, plan: Plan[T]) -> T:
        gen = plan.steps()
        try:
            statement = next(gen)
            while True:
                assert isinstance(statement, Statement)
                self.seen.append(statement)
                statement = gen.send(self.answer(statement))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        finally:
            gen.close()


def canned(table: dict[str, list[Row]]) -> Callable[[Statement], list[Row]]:
    return lambda statement: [dict(row) for row in table[statement.sql]]


SELECT_IDS = "SELECT id FROM job WHERE name = $1"
UPDATE_IDS = "UPDATE job SET state = 'active' WHERE id = ANY($1) RETURNING id"


def two_step_plan() -> Plan[list[int]]:
    """Reads ids, then updates those ids: the second statement depends on the first's rows."""

    def steps() -> Steps[list[int]]:
        rows = yield Statement(SELECT_IDS, ("jobs",))
        ids = [row["id"] for row in rows]
        updated = yield Statement(UPDATE_IDS, (ids,))
        return sorted(row["id"] for row in updated)

    return Plan("claim", steps, transaction=True, isolation=Isolation.REPEATABLE_READ)


def test_a_plan_is_driven_statement_by_statement() -> None:
    executor = FakeExecutor(
        canned({SELECT_IDS: [{"id": 3}, {"id": 1}], UPDATE_IDS: [{"id": 1}, {"id": 3}]})
    )
    result = executor.run(two_step_plan())
    assert result == [1, 3]
    assert executor.seen == [
        Statement(SELECT_IDS, ("jobs",)),
        Statement(UPDATE_IDS, ([3, 1],)),
    ]


def test_the_rows_sent_back_decide_the_next_statement() -> None:
    executor = FakeExecutor(canned({SELECT_IDS: [{"id": 9}], UPDATE_IDS: []}))
    assert executor.run(two_step_plan()) == []
    assert executor.seen[1].params == ([9],)


def test_a_plan_can_be_run_again_from_the_start() -> None:
    """Runners retry a whole plan (serialization failures): each run is a fresh generator."""
    plan = two_step_plan()
    table = {SELECT_IDS: [{"id": 2}], UPDATE_IDS: [{"id": 2}]}
    first, second = FakeExecutor(canned(table)), FakeExecutor(canned(table))
    assert first.run(plan) == second.run(plan) == [2]
    assert first.seen == second.seen
    assert len(first.seen) == 2


def test_plan_defaults() -> None:
    plan: Plan[int] = single("count", Statement("SELECT 1"), rowcount)
    assert plan.name == "count"
    assert plan.transaction is False
    assert plan.isolation is None
    assert plan.retry_serialization is False
    assert plan.map_error is no_error_map
    assert plan.serial is None and plan.lost_race is None
    assert no_error_map(SERIALIZATION_FAILURE, "job_pkey") is None
    assert Statement("SELECT 1").params == ()


def test_single_runs_one_statement_and_maps_its_rows() -> None:
    statement = Statement("DELETE FROM job WHERE id = ANY($1) RETURNING id", ([1, 2, 3],))
    plan = single("delete", statement, rowcount, transaction=True, retry_serialization=True)
    executor = FakeExecutor(lambda _s: [{"id": 1}, {"id": 3}])
    assert executor.run(plan) == 2
    assert executor.seen == [statement]
    assert plan.transaction is True
    assert plan.retry_serialization is True


def test_single_passes_the_rows_themselves_to_the_mapper() -> None:
    rows = [{"a": 1}, {"a": 2}]
    plan = single("read", Statement("SELECT a"), lambda got: [r["a"] * 10 for r in got])
    assert FakeExecutor(lambda _s: rows).run(plan) == [10, 20]


def test_then_maps_the_result_and_keeps_the_rest_of_the_plan() -> None:
    def error_map(_sqlstate: str | None, _constraint: str | None) -> Exception | None:
        return None

    plan = single(
        "fetch",
        Statement("SELECT 1"),
        rowcount,
        transaction=True,
        isolation=Isolation.SERIALIZABLE,
        retry_serialization=True,
        map_error=error_map,
        serial="keyed-claim:q",
        lost_race=lambda sqlstate, _c: sqlstate == "23505",
    )
    mapped = plan.then(lambda n: f"{n} rows")
    executor = FakeExecutor(lambda _s: [{}, {}, {}])
    assert executor.run(mapped) == "3 rows"
    assert executor.seen == [Statement("SELECT 1")]
    kept = ("name", "transaction", "isolation", "retry_serialization", "map_error", "serial")
    for field in (*kept, "lost_race"):
        assert getattr(mapped, field) == getattr(plan, field), field
    # The original plan is unchanged.
    assert FakeExecutor(lambda _s: [{}, {}, {}]).run(plan) == 3


def test_then_composes_in_order() -> None:
    plan = single("n", Statement("SELECT"), rowcount).then(lambda n: n + 1).then(lambda n: n * 10)
    assert FakeExecutor(lambda _s: [{}, {}]).run(plan) == 30


def test_then_on_a_multi_step_plan_sees_every_statement() -> None:
    executor = FakeExecutor(canned({SELECT_IDS: [{"id": 4}], UPDATE_IDS: [{"id": 4}]}))
    assert executor.run(two_step_plan().then(len)) == 1
    assert [s.sql for s in executor.seen] == [SELECT_IDS, UPDATE_IDS]


def test_rowcount() -> None:
    assert rowcount([]) == 0
    assert rowcount([{}, {"x": 1}]) == 2


def test_isolation_levels_are_sql_words() -> None:
    assert [i.value for i in Isolation] == ["read committed", "repeatable read", "serializable"]


def test_serialization_failure_sqlstate() -> None:
    assert SERIALIZATION_FAILURE == "40001"
    assert MAX_SERIALIZATION_RETRIES > 0


# --------------------------------------------------------------------------- pauses


def test_serialization_pause_grows_then_caps_at_one_second() -> None:
    pauses = [serialization_pause(a, 1.0) for a in range(MAX_SERIALIZATION_RETRIES + 5)]
    assert pauses[0] == pytest.approx(0.005)
    assert pauses[1] == pytest.approx(0.01)
    assert all(a <= b for a, b in pairwise(pauses))
    assert max(pauses) == 1.0
    assert pauses[-1] == 1.0
    growing = [p for p in pauses if p < 1.0]
    assert all(b == pytest.approx(2 * a) for a, b in pairwise(growing))


@settings(max_examples=200, deadline=None)
@given(attempt=st.integers(0, 64), jitter=st.floats(0.0, 1.0))
def test_serialization_pause_is_capped_and_scaled_by_jitter(attempt: int, jitter: float) -> None:
    pause = serialization_pause(attempt, jitter)
    assert 0.0 <= pause <= jitter
    assert pause == pytest.approx(min(1.0, 0.005 * 2**attempt) * jitter)
    assert serialization_pause(attempt, 0.0) == 0.0


# --------------------------------------------------------------------------- capabilities

DOCUMENTED = [
    "skip_locked",
    "multi_mutation_cte",
    "tuple_ids",
    "table_partitioning",
    "deferrable_constraints",
    "advisory_locks",
    "covering_indexes",
    "listen_notify",
    "add_column_backfill",
    "transactional_heartbeat",
    "serialization_retries",
    "single_connection",
    "plpgsql",
    "asynchronous_commit",
    "row_triggers",
]


def test_capability_names_list_every_field_in_order() -> None:
    caps = Capabilities()
    assert caps.names() == [a.name for a in attrs.fields(Capabilities)]
    assert caps.names() == DOCUMENTED
    assert all(isinstance(getattr(caps, name), bool) for name in caps.names())


def test_full_postgres_lacks_nothing() -> None:
    caps = Capabilities()
    assert caps.serialization_retries is False
    assert caps.single_connection is False
    assert caps.lacking() == []


def test_lacking_lists_the_capabilities_that_are_off_in_order() -> None:
    caps = Capabilities(plpgsql=False, skip_locked=False, listen_notify=False)
    assert caps.lacking() == ["skip_locked", "listen_notify", "plpgsql"]


def test_lacking_ignores_the_two_non_feature_flags() -> None:
    """``serialization_retries`` and ``single_connection`` describe a need, not a feature."""
    assert Capabilities(serialization_retries=True, single_connection=True).lacking() == []
    assert Capabilities(serialization_retries=False, single_connection=False).lacking() == []


@settings(max_examples=100, deadline=None)
@given(off=st.sets(st.sampled_from(DOCUMENTED)))
def test_lacking_is_exactly_the_features_turned_off(off: set[str]) -> None:
    flags: dict[str, Any] = {name: name not in off for name in DOCUMENTED}
    caps = Capabilities(**flags)
    expected = [
        n
        for n in DOCUMENTED
        if n in off and n not in ("serialization_retries", "single_connection")
    ]
    assert caps.lacking() == expected


def test_capabilities_are_frozen_and_keyword_only() -> None:
    caps = Capabilities()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        caps.skip_locked = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        Capabilities(False)  # type: ignore[call-arg]


def test_then_maps_the_contention_result_too() -> None:
    from alkstore.core.plans import Plan

    def steps():  # type: ignore[no-untyped-def]
        return (yield Statement("SELECT 1"))

    plan: Plan[list[int]] = Plan("p", steps, on_contention=list)
    mapped = plan.then(len)
    assert mapped.on_contention is not None and mapped.on_contention() == 0
    assert plan.then(len).name == "p"
    assert Plan("q", steps).then(len).on_contention is None
