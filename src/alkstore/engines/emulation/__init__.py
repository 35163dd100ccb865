"""Emulated mode: a distributed engine's SQL on stock PostgreSQL, behind a guard.

A :class:`Profile` lists, as :class:`Rule` objects, the constructs one real server rejects,
each with its ``id``, ``reason``, documented ``source`` and, where the engine avoids the
construct by turning a capability off, that ``capability``. :func:`guard_sync` and
:func:`guard_async` wrap a driver's source so that every statement is checked before it is
sent: a statement the real server would reject raises :class:`EmulationRejected` naming the
construct, and nothing reaches the database. So an engine's alternative code paths are proven
on stock PostgreSQL where its server is not at hand.

Modules: :mod:`.lexer` (normalising and reading SQL), :mod:`.rules` (the rule type and
library), :mod:`.citus` (Citus distributed-table rules), :mod:`.profiles` (the products) and
:mod:`.guard` (the session wrappers). Nothing here imports a driver.
"""

from .guard import (
    GuardedAsyncSession,
    GuardedAsyncSource,
    GuardedSyncSession,
    GuardedSyncSource,
    guard_async,
    guard_sync,
)
from .lexer import normalize
from .profiles import (
    CITUS_DISTRIBUTED,
    COCKROACHDB,
    PROFILES,
    YUGABYTEDB,
    EmulationRejected,
    Profile,
    citus_distributed,
    rules_for,
)
from .rules import Memory, Rule
from .rules_doc import rules_markdown, rules_section

__all__ = [
    "CITUS_DISTRIBUTED",
    "COCKROACHDB",
    "PROFILES",
    "YUGABYTEDB",
    "EmulationRejected",
    "GuardedAsyncSession",
    "GuardedAsyncSource",
    "GuardedSyncSession",
    "GuardedSyncSource",
    "Memory",
    "Profile",
    "Rule",
    "citus_distributed",
    "guard_async",
    "guard_sync",
    "normalize",
    "rules_for",
    "rules_markdown",
    "rules_section",
]
