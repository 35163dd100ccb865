"""The runners' retry loop: serialization failures are retried, bounded, then settled."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from alkstore import runner
from alkstore.core.plans import (
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

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.callers_transaction = False

    def execute(self, statement: Statement) -> list[dict[str, Any]]:
        self.calls += 1
        if self.calls <= self.failures:
            raise SerializationFailure
        return [{"n": 1}]

    @contextlib.contextmanager
    def transaction(self, isolation: Any = None) -> Iterator[None]:
        yield

    def in_transaction(self) -> bool:
        return self.callers_transaction

    @contextlib.contextmanager
    def session(self) -> Iterator[Flaky]:
        yield self

    def error_info(self, exc: BaseException) -> ErrorInfo | None:
        return ErrorInfo("40001", None) if isinstance(exc, SerializationFailure) else None


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
