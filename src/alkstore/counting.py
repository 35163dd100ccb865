"""The per-queue counters as plans (docs/dashboard.md, "Counters"), from the engine
contract's :class:`~alkstore.core.contracts.CounterPlans`; engines without them (the
in-memory one) refuse them by name. Both faces build their plans here, like
:class:`~alkstore.operations.Operations`."""

from __future__ import annotations

import datetime as dt

from .core.contracts import CounterPlans, Engine, counter_plans
from .core.counters import Counters
from .core.errors import UnsupportedByEngine
from .core.plans import Plan


class Counting:
    """The counter plans of one engine."""

    def __init__(self, engine: Engine) -> None:
        self._name = engine.name
        self._engine = counter_plans(engine)

    @property
    def kept(self) -> bool:
        """Whether the engine keeps counters."""
        return self._engine is not None

    def _keeper(self) -> CounterPlans:
        if self._engine is None:
            raise UnsupportedByEngine(self._name, "counters", "it keeps no per-queue counters")
        return self._engine

    def horizon(self) -> Plan[dt.datetime]:
        """See :meth:`~alkstore.core.contracts.CounterPlans.counter_horizon` (run before
        :meth:`tally`, not in its transaction)."""
        return self._keeper().counter_horizon()

    def tally(self, until: dt.datetime, every: float) -> Plan[int]:
        """See :meth:`~alkstore.core.contracts.CounterPlans.tally_counters`."""
        return self._keeper().tally_counters(until, every)

    def counters(self) -> Plan[Counters]:
        """See :meth:`~alkstore.core.contracts.CounterPlans.read_counters`."""
        return self._keeper().read_counters()
