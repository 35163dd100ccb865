"""Peers measured in the same run as alkstore.

The raw-SQL ceiling (and its lanes, gated and layout variants), pg-boss, pgqueuer and procrastinate.

Each peer module offers ``NAME``, ``unavailable()`` (None, or why it cannot run here: no
Node.js, a package not installed) and ``drain(dsn, spec, schema, progress)`` returning a
:class:`~alkstore.bench.results.DrainResult`. :func:`run_peer` turns a peer that cannot run,
or fails, into an :class:`~alkstore.bench.results.Unavailable` row instead of an error.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from ..progress import Progress
from ..report import err
from ..results import Outcome, Unavailable
from .spec import DrainSpec

PEERS = {
    "raw-sql": "rawsql",
    "raw-sql-lanes": "rawsql_lanes",
    "raw-sql-gated": "rawsql_gated",
    "raw-sql-gated-early": "rawsql_gated:drain_early",
    "raw-sql-gated-k4": "rawsql_gated:drain_slots",
    "raw-sql-keyed": "rawsql_layouts:drain_keyed",
    "raw-sql-ordered": "rawsql_layouts:drain_ordered",
    "raw-sql-job-table": "rawsql_layouts:drain_job_table",
    "pg-boss": "pgboss",
    "pg-boss-work": "pgboss:drain_work",
    "pgqueuer": "pgqueuer_peer",
    "procrastinate": "procrastinate_peer",
}
"""Peer name -> its module in this package (``module:function`` when the drain is not the
module's ``drain``: ``pg-boss-work`` drains through pg-boss's ``work()``)."""

DEFAULT_PEERS = tuple(name for name in PEERS if not name.startswith("raw-sql-"))
"""The peers ``bench peers`` drives unless told: all but the ``raw-sql-*`` variants (lanes,
gates, layouts), design alternatives measured on demand (docs/benchmarks.md)."""

SHARED_CONNECTIONS = frozenset(
    {
        "raw-sql",
        "raw-sql-lanes",
        "raw-sql-gated",
        "raw-sql-gated-early",
        "raw-sql-gated-k4",
        "raw-sql-keyed",
        "raw-sql-ordered",
        "raw-sql-job-table",
        "pg-boss",
        "pg-boss-work",
    }
)
"""The peers whose consumers can share fewer connections than there are consumers
(``--connections``): pgqueuer runs one queue manager on a connection of its own per
consumer, and procrastinate's pool is not measured that way."""

LATENCY_PEERS = ("pg-boss", "pgqueuer", "procrastinate")
"""Peers whose worker ``bench latency`` measures (each module's ``latency``)."""


def peer_module(name: str) -> ModuleType:
    """The module that drives peer ``name``."""
    return importlib.import_module(f"{__name__}.{PEERS[name].partition(':')[0]}")


def _drain_function(name: str) -> Any:
    return getattr(peer_module(name), PEERS[name].partition(":")[2] or "drain")


def run_peer(name: str, dsn: str, spec: DrainSpec, schema: str, progress: Progress) -> Outcome:
    """Drain with peer ``name``; an unavailable or failing peer becomes an Unavailable row."""
    cell = spec.cell(name)
    module = peer_module(name)
    reason: str | None = module.unavailable()
    if reason is not None:
        return Unavailable(cell=cell, reason=reason)
    try:
        result: Outcome = _drain_function(name)(dsn, spec, schema, progress)
    except Exception as exc:
        err.print(f"[red]{name} failed:[/red] {type(exc).__name__}: {exc}")
        return Unavailable(cell=cell, reason=f"failed: {type(exc).__name__}: {exc}")
    return result


def peer_versions(names: list[str]) -> dict[str, object]:
    """Versions each available peer reports (Node.js and pg-boss for pg-boss)."""
    versions: dict[str, object] = {}
    for name in names:
        module = peer_module(name)
        if module.unavailable() is None:
            versions.update(module.versions())
    return versions


__all__ = [
    "DEFAULT_PEERS",
    "LATENCY_PEERS",
    "PEERS",
    "SHARED_CONNECTIONS",
    "DrainSpec",
    "peer_module",
    "peer_versions",
    "run_peer",
]
