"""The PostgreSQL engine: the thin class composing the operation families.

Each family lives in its own module and branches on the effective capabilities, never on an
engine's name: :mod:`.migrate` (schema), :mod:`.queues`, :mod:`.send`, :mod:`.claim` (fetch,
with the claim strategy chosen from the capabilities), :mod:`.settle`, :mod:`.failing`
(fail, expiry, dead letters, redrive), :mod:`.maintenance` and :mod:`.messaging` (schedules
and pub/sub), all on :mod:`.base`. Engines for other servers subclass
:class:`PostgresEngine` or delegate to it
(:class:`~alkstore.engines.delegate.DelegatingEngine`) with their own description. The
package docstring says how the modules depend on one another.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from ...core.description import EngineDescription, ServerInfo
from . import claim_gate
from .claim import ClaimMixin
from .counters import CountersMixin
from .failing import FailMixin
from .flows import FlowsMixin
from .hooks import PostgresTestHooks
from .jobs import JobsMixin
from .listing import ListingMixin
from .maintenance import MaintenanceMixin
from .messaging import MessagingMixin
from .migrate import SchemaMixin
from .operator import OperatorMixin
from .queues import QueueMixin
from .runtime import PostgresRuntime
from .send import SendMixin
from .settle import SettleMixin
from .waiting import WaitingMixin

SESSION_SETUP = (
    # Timestamps then arrive in UTC already, and the records keep them as they are.
    "SET TimeZone TO 'UTC'",
    # Until ANALYZE has seen a burst of new jobs, the planner guesses that a queue holds a
    # handful of them and claims through a bitmap scan plus a sort of the whole queue
    # (100,000 jobs: 240 ms a fetch instead of 1 ms). Without bitmap scans the only cheap
    # plan left is the ordered walk of the job_fetch index. pg_settings filters the setting
    # out on servers that do not have it.
    "SELECT set_config(name, 'off', false) FROM pg_settings WHERE name = 'enable_bitmapscan'",
)
"""What :attr:`PostgresEngine.session_setup` runs."""


def _stock_postgresql(server: ServerInfo) -> bool:
    """Stock PostgreSQL: not a server that only speaks its protocol, no Citus."""
    return (
        server.version.startswith("PostgreSQL")
        and "-YB-" not in server.version
        and "citus" not in server.extensions
    )


POSTGRES = EngineDescription(
    name="postgres",
    summary="stock PostgreSQL 13 or newer: the reference engine",
    detects=_stock_postgresql,
)
"""The reference engine lacks nothing; engines built on it derive their descriptions."""


class PostgresEngine(
    SchemaMixin,
    QueueMixin,
    MessagingMixin,  # before SendMixin, which it extends
    OperatorMixin,
    SendMixin,
    ClaimMixin,
    SettleMixin,
    FailMixin,
    MaintenanceMixin,
    ListingMixin,
    JobsMixin,
    FlowsMixin,
    WaitingMixin,
    CountersMixin,
):
    """Stock PostgreSQL: every capability but serialization retries and a single connection.

    Engines for other servers subclass it (or delegate to it) with their own
    :class:`~alkstore.core.description.EngineDescription`: the SQL branches on the
    description's capabilities, never on a name.
    """

    description: ClassVar[EngineDescription] = POSTGRES
    session_setup: ClassVar[tuple[str, ...]] = SESSION_SETUP
    """Statements run on every connection the store opens (never on a caller's)."""
    option_names: ClassVar[frozenset[str]] = frozenset({claim_gate.OPTION})
    """``engine_options`` keys :meth:`configure` accepts: ``claim_gate`` (:mod:`.claim_gate`)."""

    @classmethod
    def configure(
        cls,
        schema: str,
        options: Mapping[str, Any],
        *,
        emulated: bool = False,
        server: ServerInfo | None = None,
    ) -> Self:
        """The engine on ``schema``; ``claim_gate=True`` gates its plain claims, ``"auto"``
        while the gate pays, refused where the engine lacks what the gate needs
        (:func:`.claim_gate.configured`)."""
        engine = super().configure(schema, options, emulated=emulated, server=server)
        engine.claim_gate = claim_gate.configured(options, engine.name, engine.capabilities)
        return engine

    def test_hooks(self) -> PostgresTestHooks:
        """Plans the conformance suite sets up and reads state with (:mod:`.hooks`)."""
        caps = self.capabilities
        return PostgresTestHooks(
            self.s,
            retry_serialization=caps.serialization_retries,
            on_plan=self.claim_marks.clear,
        )

    def worker_runtime(self) -> PostgresRuntime:
        """The worker runtime's plans on this engine (:mod:`.runtime`)."""
        return PostgresRuntime(self)
