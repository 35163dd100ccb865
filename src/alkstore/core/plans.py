"""Plans: what an operation executes and how its rows map back to a result.

An operation is written once, as a generator that yields :class:`Statement` objects and
receives each statement's rows back (the psycopg 3 "generators + waiting" idea). A sync and
an async runner drive the same generator; they are the only code that differs.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar, overload

import attrs

T = TypeVar("T")
U = TypeVar("U")


class Row(Protocol):
    """A result row, read by column name only: a dict, or a driver's own record where copying
    it into a dict would cost a fetch per row (asyncpg's ``Record``, which iterates its values
    rather than its names: hence no ``__iter__`` here, so that no plan iterates a row)."""

    def __getitem__(self, name: str, /) -> Any: ...

    @overload
    def get(self, name: str, /) -> Any: ...

    @overload
    def get(self, name: str, default: Any, /) -> Any: ...

    def items(self) -> Iterable[tuple[str, Any]]:
        """The (column name, value) pairs."""
        ...

    def keys(self) -> Iterable[str]:
        """The column names."""
        ...

    def __contains__(self, name: object, /) -> bool: ...

    def __len__(self) -> int: ...


Steps = Generator["Statement", list[Row], T]


@attrs.frozen
class Statement:
    """One SQL statement with ``$1``-style placeholders and its bound parameter values."""

    sql: str
    params: tuple[Any, ...] = ()
    tolerate: frozenset[str] = frozenset()
    """SQLSTATEs that mean "already done" for this statement: the runner then returns no
    rows instead of raising. Only for statements outside a transaction."""


class Isolation(enum.StrEnum):
    """Transaction isolation levels a plan may ask for."""

    READ_COMMITTED = "read committed"
    REPEATABLE_READ = "repeatable read"
    SERIALIZABLE = "serializable"


ErrorMap = Callable[[str | None, str | None], Exception | None]
"""(sqlstate, constraint name) -> the alkstore error to raise instead, or None."""
RaceCheck = Callable[[str | None, str | None], bool]
"""(sqlstate, constraint name) -> whether the error says the plan lost a race to a concurrent
one, which running the plan again settles."""


def no_error_map(_sqlstate: str | None, _constraint: str | None) -> Exception | None:
    """The default error map: let every driver error pass through unchanged."""
    return None


@attrs.frozen
class Plan(Generic[T]):
    """An operation ready to run: its steps, whether they share one transaction, and retries."""

    name: str
    steps: Callable[[], Steps[T]]
    transaction: bool = False
    isolation: Isolation | None = None
    retry_serialization: bool = False
    map_error: ErrorMap = no_error_map
    on_contention: Callable[[], T] | None = None
    """The result when serialization failures or lost races outlast every retry (None: raise
    the last)."""
    serial: str | None = None
    """Plans of one store with the same ``serial`` key run one at a time (the others wait in
    the process, not in the database): the keyed claims of one queue, which can only split
    the same free keys between them and would otherwise walk the keys side by side for
    nothing."""
    lost_race: RaceCheck | None = None
    """Which errors mean the plan lost a race it may run again after (see :data:`RaceCheck`):
    the runner runs it again at once, up to :data:`MAX_RACE_RERUNS` times. In a caller's
    transaction such a plan runs in a savepoint, so that losing undoes only its own work."""

    def then(self, mapper: Callable[[T], U]) -> Plan[U]:
        """The same plan with its result (and its contention result) passed through ``mapper``."""
        inner, contention = self.steps, self.on_contention

        def steps() -> Steps[U]:
            return mapper((yield from inner()))

        def on_contention() -> U:
            assert contention is not None
            return mapper(contention())

        return Plan(
            self.name,
            steps,
            transaction=self.transaction,
            isolation=self.isolation,
            retry_serialization=self.retry_serialization,
            map_error=self.map_error,
            on_contention=None if contention is None else on_contention,
            serial=self.serial,
            lost_race=self.lost_race,
        )

    def in_own_transaction(self, callers_transaction: bool) -> bool:
        """Whether the runner wraps the plan in a transaction (a savepoint inside a caller's
        transaction): when it asks for one, and for a plan that may lose a race in a caller's
        transaction, whose error would otherwise abort that whole transaction."""
        return self.transaction or (callers_transaction and self.lost_race is not None)


def single(name: str, statement: Statement, result: Callable[[list[Row]], T], **kw: Any) -> Plan[T]:
    """A plan of one statement whose rows are mapped by ``result``."""

    def steps() -> Steps[T]:
        rows = yield statement
        return result(rows)

    return Plan(name, steps, **kw)


def each(statements: Iterable[Statement]) -> Steps[None]:
    """Steps that run ``statements`` in order, from any iterable (an engine hook's list).

    ``yield from a_list`` would hand the rows the runner sends back to a list iterator, which
    cannot take them; this generator can.
    """
    for statement in statements:
        _rows = yield statement


def rowcount(rows: Sequence[Row]) -> int:
    """Result mapper: how many rows came back (the statements ``RETURNING`` one row a change)."""
    return len(rows)


SERIALIZATION_FAILURE = "40001"
"""SQLSTATE of a serialization failure: the whole transaction may be retried."""
MAX_SERIALIZATION_RETRIES = 12
"""How many times a runner retries a plan that hit a serialization failure."""


MAX_RACE_RERUNS = 3
"""How many times a runner runs a plan again after it lost a race (:attr:`Plan.lost_race`)."""


def serialization_pause(attempt: int, jitter: float) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): capped exponential, full jitter."""
    return min(1.0, 0.005 * 2.0**attempt) * jitter


def serialization_retry(sqlstate: str, attempt: int) -> float | None:
    """Seconds to wait before running a transaction again that failed with ``sqlstate`` on
    its run ``attempt`` (0-based); None when that was no serialization failure or the
    retries are spent. The one rule for the store's runner and the transactional worker."""
    if sqlstate != SERIALIZATION_FAILURE or attempt >= MAX_SERIALIZATION_RETRIES:
        return None
    return serialization_pause(attempt, random.random())
