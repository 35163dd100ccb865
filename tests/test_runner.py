"""The runners' retry loop: serialization failures are retried, bounded, then settled; a plan
that lost a race it names is run again at once, bounded, then settled."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from alkstore import runner
from alkstore.core.plans import (
    MAX_RACE_RERUNS,
    MAX_SERIALIZATION_RETRIES,
    Plan,
    Statement,
    Steps,
)
from alkstore.drivers.base import ErrorInfo


class SerializationFailure(Exception):
    """Stands in for a driver's 40001 error (the runner only sees it through error_info)."""


class Flaky:
    """A session and source whose statements fail with 40001 ``failures`` times."""

    name = "flaky"

    def __init__(self, failures: int, sqlstate: str = "40001") -> None:
        self.failures = failures
        self.sqlstate = sqlstate
        self.calls = 0
        self.transactions = 0
        self.callers_transaction = False

    def execute(self, statement: Statement) -> list[dict[str, Any]]:
        self.calls += 1
        if self.calls <= self.failures:
            raise SerializationFailure
        return [{"n": 1}]

    @contextlib.contextmanager
    def transaction(self, isolation: Any = None) -> Iterator[None]:
        self.transactions += 1
        yield

    def in_transaction(self) -> bool:
        return self.callers_transaction

    @contextlib.contextmanager
    def session(self) -> Iterator[Flaky]:
        yield self

    def error_info(self, exc: BaseException) -> ErrorInfo | None:
        return ErrorInfo(self.sqlstate, None) if isinstance(exc, SerializationFailure) else None


def _plan(**kw: Any) -> Plan[list[dict[str, Any]]]:
    def steps() -> Steps[list[dict[str, Any]]]:
        return (yield Statement("SELECT 1 AS n"))

    return Plan("p", steps, retry_serialization=True, **kw)


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(runner.time, "sleep", slept.append)
    return slept


def test_a_serialization_failure_is_retried(pauses: list[float]) -> None:
    flaky = Flaky(failures=3)
    assert runner.run_sync(flaky, flaky, _plan()) == [{"n": 1}]  # type: ignore[arg-type]
    assert flaky.calls == 4 and len(pauses) == 3 and all(0 <= p <= 1 for p in pauses)


def test_retries_are_bounded_and_then_the_error_is_raised(pauses: list[float]) -> None:
    flaky = Flaky(failures=10**6)
    with pytest.raises(SerializationFailure):
        runner.run_sync(flaky, flaky, _plan())  # type: ignore[arg-type]
    assert flaky.calls == MAX_SERIALIZATION_RETRIES + 1


def test_a_plan_with_a_contention_result_settles_on_it(pauses: list[float]) -> None:
    flaky = Flaky(failures=10**6)
    assert runner.run_sync(flaky, flaky, _plan(on_contention=list)) == []  # type: ignore[arg-type]
    assert flaky.calls == MAX_SERIALIZATION_RETRIES + 1


def test_without_retry_serialization_the_first_failure_is_raised(pauses: list[float]) -> None:
    flaky = Flaky(failures=1)
    plan = Plan("p", _plan().steps, on_contention=list)
    with pytest.raises(SerializationFailure):
        runner.run_sync(flaky, flaky, plan)  # type: ignore[arg-type]
    assert pauses == []


def test_in_the_callers_transaction_a_serialization_failure_is_raised_unchanged(
    pauses: list[float],
) -> None:
    flaky = Flaky(failures=1)
    flaky.callers_transaction = True
    with pytest.raises(SerializationFailure):
        runner.run_sync(flaky, flaky, _plan(on_contention=list))  # type: ignore[arg-type]
    assert flaky.calls == 1 and pauses == []  # no retry, no contention result


def _racing_plan(**kw: Any) -> Plan[list[dict[str, Any]]]:
    return Plan("p", _plan().steps, lost_race=lambda sqlstate, _c: sqlstate == "23505", **kw)


def test_a_lost_race_runs_the_plan_again_at_once(pauses: list[float]) -> None:
    flaky = Flaky(failures=2, sqlstate="23505")
    assert runner.run_sync(flaky, flaky, _racing_plan()) == [{"n": 1}]  # type: ignore[arg-type]
    assert flaky.calls == 3 and pauses == [0.0, 0.0]


def test_lost_races_are_bounded_and_then_settled(pauses: list[float]) -> None:
    flaky = Flaky(failures=10**6, sqlstate="23505")
    plan = _racing_plan(on_contention=list)
    assert runner.run_sync(flaky, flaky, plan) == []  # type: ignore[arg-type]
    assert flaky.calls == MAX_RACE_RERUNS + 1


def test_an_error_the_plan_does_not_name_is_raised(pauses: list[float]) -> None:
    flaky = Flaky(failures=1, sqlstate="23503")
    with pytest.raises(SerializationFailure):
        runner.run_sync(flaky, flaky, _racing_plan(on_contention=list))  # type: ignore[arg-type]
    assert flaky.calls == 1


def test_in_the_callers_transaction_a_racing_plan_runs_in_a_savepoint(
    pauses: list[float],
) -> None:
    flaky = Flaky(failures=1, sqlstate="23505")
    flaky.callers_transaction = True
    assert runner.run_sync(flaky, flaky, _racing_plan()) == [{"n": 1}]  # type: ignore[arg-type]
    assert flaky.calls == 2 and flaky.transactions == 2


def test_on_a_held_session_a_plan_gets_its_transaction_and_its_reruns() -> None:
    flaky = Flaky(failures=1, sqlstate="23505")
    plan = _racing_plan(transaction=True)
    assert runner.run_held(flaky, flaky, plan) == [{"n": 1}]  # type: ignore[arg-type]
    assert flaky.calls == 2 and flaky.transactions == 2
    endless = Flaky(failures=10**6, sqlstate="23505")
    assert runner.run_held(endless, endless, _racing_plan(on_contention=list)) == []  # type: ignore[arg-type]
    assert endless.calls == MAX_RACE_RERUNS + 1 and endless.transactions == 0
