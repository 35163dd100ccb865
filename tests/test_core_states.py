"""The job state machine against spec §2 (states and sets) and §3 (transitions)."""

from __future__ import annotations

import itertools

import pytest

from alkstore.core.states import (
    ACTIVE,
    FINISHED,
    QUEUED,
    TRANSITIONS,
    UNFINISHED,
    JobState,
    Operation,
    accepts,
    sql_list,
)

SPEC_STATES = {"created", "retry", "active", "completed", "cancelled", "failed"}

SPEC_SETS = {
    "queued": {"created", "retry"},
    "active": {"active"},
    "finished": {"completed", "cancelled", "failed"},
}

SPEC_TRANSITIONS: dict[str, tuple[set[str], set[str]]] = {
    "fetch": ({"created", "retry"}, {"active"}),
    "complete": ({"active"}, {"completed"}),
    "fail": ({"created", "retry", "active"}, {"retry", "failed"}),
    "cancel": ({"created", "retry", "active"}, {"cancelled"}),
    "resume": ({"cancelled"}, {"created"}),
    "retry": ({"failed"}, {"retry"}),
    "touch": ({"active"}, {"active"}),
    "expire": ({"active"}, {"retry", "failed"}),
    "snooze": ({"active"}, {"retry"}),  # issue 31: back to the queue, no attempt spent
}
"""Spec §3: operation -> (states it acts on, states it can lead to)."""

NAMED_SETS = {"queued": QUEUED, "active": ACTIVE, "finished": FINISHED}


def values(states: frozenset[JobState]) -> set[str]:
    return {s.value for s in states}


def test_states_match_the_spec() -> None:
    assert {s.value for s in JobState} == SPEC_STATES
    assert len(JobState) == len(SPEC_STATES)


@pytest.mark.parametrize("name", sorted(SPEC_SETS))
def test_named_sets_match_the_spec(name: str) -> None:
    assert values(NAMED_SETS[name]) == SPEC_SETS[name]
    assert isinstance(NAMED_SETS[name], frozenset)


def test_named_sets_partition_the_states() -> None:
    sets = list(NAMED_SETS.values())
    for a, b in itertools.combinations(sets, 2):
        assert not a & b
    assert frozenset(JobState) == QUEUED | ACTIVE | FINISHED
    assert sum(len(s) for s in sets) == len(JobState)


def test_unfinished_is_queued_or_active() -> None:
    assert UNFINISHED == QUEUED | ACTIVE
    assert not UNFINISHED & FINISHED
    assert frozenset(JobState) == UNFINISHED | FINISHED


def test_every_operation_has_a_transition() -> None:
    assert set(TRANSITIONS) == set(Operation)
    assert {op.value for op in Operation} == set(SPEC_TRANSITIONS)


@pytest.mark.parametrize("operation", list(Operation), ids=lambda op: op.value)
def test_transition_targets_match_the_spec(operation: Operation) -> None:
    sources, targets = TRANSITIONS[operation]
    assert values(sources) == SPEC_TRANSITIONS[operation.value][0]
    assert values(targets) == SPEC_TRANSITIONS[operation.value][1]


@pytest.mark.parametrize("state", list(JobState), ids=lambda s: s.value)
@pytest.mark.parametrize("operation", list(Operation), ids=lambda op: op.value)
def test_accepts_matches_the_spec(operation: Operation, state: JobState) -> None:
    assert accepts(operation, state) is (state.value in SPEC_TRANSITIONS[operation.value][0])


def test_fail_and_cancel_accept_exactly_the_unfinished_states() -> None:
    for operation in (Operation.FAIL, Operation.CANCEL):
        assert {s for s in JobState if accepts(operation, s)} == set(UNFINISHED)


def test_no_operation_acts_on_completed_jobs() -> None:
    assert not any(accepts(op, JobState.COMPLETED) for op in Operation)


@pytest.mark.parametrize(
    "states",
    [QUEUED, ACTIVE, FINISHED, UNFINISHED, frozenset(JobState), frozenset()],
    ids=["queued", "active", "finished", "unfinished", "all", "empty"],
)
def test_sql_list_is_sorted_plain_strings(states: frozenset[JobState]) -> None:
    listed = sql_list(states)
    assert isinstance(listed, tuple)
    assert all(type(s) is str for s in listed)
    assert list(listed) == sorted(listed)
    assert set(listed) == values(states)
    assert len(listed) == len(states)


def test_sql_list_examples() -> None:
    assert sql_list(FINISHED) == ("cancelled", "completed", "failed")
    assert sql_list(QUEUED) == ("created", "retry")
    assert sql_list(frozenset()) == ()


@pytest.mark.parametrize("state", list(JobState), ids=lambda s: s.value)
def test_job_state_is_a_str_enum_printing_its_value(state: JobState) -> None:
    assert isinstance(state, str)
    assert str(state) == state.value
    assert f"{state}" == state.value
    assert state == state.value
    assert JobState(state.value) is state
    assert state.value == state.name.lower()
