"""The per-queue counters as plans (docs/dashboard.md, "Counters"): the postgres family's
SQL (:mod:`~alkstore.engines.postgres.counters`); other engines (the in-memory one) have none.
Both faces build their plans here, like :class:`~alkstore.operations.Operations`."""

from __future__ import annotations

import datetime as dt

from .core.contracts import Engine
from .core.counters import Counters
from .core.errors import UnsupportedByEngine
from .core.plans import Plan
from .engines.postgres import PostgresEngine
from .engines.postgres import counters as sql
from .engines.postgres.runtime import runtime_engine


def counting_engine(engine: Engine) -> PostgresEngine | None:
    """The engine whose SQL keeps the counters, or None where there are none."""
    try:
        return runtime_engine(engine)
    except UnsupportedByEngine:
        return None


class Counting:
    """The counter plans of one engine."""

    def __init__(self, engine: Engine) -> None:
        self._name = engine.name
        self._engine = counting_engine(engine)

    @property
    def kept(self) -> bool:
        """Whether the engine keeps counters."""
        return self._engine is not None

    def _sql_engine(self) -> PostgresEngine:
        if self._engine is None:
            raise UnsupportedByEngine(
                self._name, "counters", "per-queue counters need the postgres family"
            )
        return self._engine

    def horizon(self) -> Plan[dt.datetime]:
        """See :func:`~alkstore.engines.postgres.counters.horizon` (run before :meth:`tally`,
        not in its transaction)."""
        return sql.horizon(self._sql_engine())

    def tally(self, until: dt.datetime, every: float) -> Plan[int]:
        """See :func:`~alkstore.engines.postgres.counters.tally`."""
        return sql.tally(self._sql_engine(), until, every)

    def counters(self) -> Plan[Counters]:
        """See :func:`~alkstore.engines.postgres.counters.read_counters`."""
        return sql.read_counters(self._sql_engine())
